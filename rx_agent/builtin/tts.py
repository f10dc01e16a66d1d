"""``TTSMiddleware``: speak the agent's text, as audio data blocks in the event stream.

Port of AgentScope Python's middleware of the same name, at ``on_agent`` (AgentScope's
``on_reply``). It watches every ``TextBlockDeltaEvent`` / ``TextBlockEndEvent`` of the
reply and adds ``DataBlockStartEvent`` / ``DataBlockDeltaEvent`` (base64 audio) /
``DataBlockEndEvent`` events:

* ``mode="standard"``: at each text block's end the whole block is synthesized and
  its audio follows the ``TextBlockEndEvent``;
* ``mode="realtime"``: each delta is pushed to a :class:`~rx_agent.model.tts.TTSStream`
  while the text streams; audio is emitted as soon as it is ready (interleaved with
  the text) and the rest is flushed at the block's end.

Events that arrive while a block's audio is being finished wait, in order, so the
audio of a block always ends before whatever followed the block.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections import deque
from collections.abc import Collection
from typing import Any, Literal

from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import CompositeDisposable, Disposable

from .._rx import LoopAffinity, affinity, running_loop, runtime_loop
from ..context import RuntimeContext
from ..event import (
    AgentEvent,
    AgentResultEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
)
from ..message import GenerateReason
from ..middleware import Agent, AgentInput, ExtensionPoint, Handler, MiddlewareBase
from ..model.tts import TTSModel, TTSStream

__all__ = ["TTS_ERROR_EVENT", "TTSMiddleware", "audio_block_id"]

logger = logging.getLogger("rx_agent.tts")

TTS_ERROR_EVENT = "tts_error"
"""``CustomEvent.name`` reporting a synthesis that failed (the reply goes on)."""

_POINTS = frozenset({ExtensionPoint.ON_AGENT})
_COMPLETED = object()


def audio_block_id(text_block_id: str) -> str:
    """The data block id of a text block's audio: ``text`` → ``audio``,
    ``text-2`` → ``audio-2`` (same ``reply_id`` as the text)."""
    if text_block_id.startswith("text"):
        return "audio" + text_block_id[4:]
    return f"audio-{text_block_id}"


class TTSMiddleware(MiddlewareBase):
    """Synthesize the reply's text into audio events (see the module docstring).

    Point: ``ON_AGENT``. Each text block's audio is one data block, with the text
    block's ``reply_id`` and the id :func:`audio_block_id` gives; its
    ``DataBlockDeltaEvent.delta`` s are base64 chunks whose decoded bytes, joined, are
    the audio (``media_type`` from the model, ``audio/wav``). A failed synthesis is
    logged and reported as ``CustomEvent(name="tts_error", value={"reply_id",
    "block_id", "error"})``; the reply is not failed (a block already started is
    ended). The audio is not stored in the session context.

    Args:
        tts_model: the :class:`~rx_agent.model.tts.TTSModel` that speaks.
        mode: ``"standard"`` (synthesize whole blocks) or ``"realtime"`` (speak while
            the text streams).
        chunk_size: at most this many audio bytes per ``DataBlockDeltaEvent``.
    """

    def __init__(
        self,
        tts_model: TTSModel,
        mode: Literal["standard", "realtime"] = "standard",
        *,
        chunk_size: int = 32 * 1024,
    ) -> None:
        if not isinstance(tts_model, TTSModel):
            raise TypeError(f"tts_model must be a TTSModel, not {type(tts_model).__name__}")
        if mode not in ("standard", "realtime"):
            raise ValueError(f"mode must be 'standard' or 'realtime', got {mode!r}")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
        self.tts_model = tts_model
        self.mode = mode
        self.chunk_size = chunk_size

    def active_points(self) -> Collection[ExtensionPoint]:
        return _POINTS

    def on_agent(
        self, agent: Agent, ctx: RuntimeContext, input: AgentInput, next: Handler[AgentInput]
    ) -> Observable[AgentEvent]:
        loop = running_loop() or runtime_loop()

        def subscribe(
            observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
        ) -> rxabc.DisposableBase:
            # All of one subscription's state: the middleware itself stays shareable.
            pump = _Pump(self, agent.name, observer, affinity(loop))
            upstream = next(input).subscribe(pump.on_next, pump.on_error, pump.on_completed,
                                             scheduler=scheduler)
            return CompositeDisposable(upstream, Disposable(pump.dispose))

        return Observable(subscribe)

    def __repr__(self) -> str:
        return f"TTSMiddleware({self.tts_model!r}, mode={self.mode!r})"


class _Block:
    """One text block being spoken."""

    __slots__ = ("data_id", "deltas", "reply_id", "started", "text", "text_id", "wake",
                 "worker")

    def __init__(self, reply_id: str, text_id: str) -> None:
        self.reply_id = reply_id
        self.text_id = text_id
        self.data_id = audio_block_id(text_id)
        self.text: list[str] = []
        self.started = False
        # realtime: deltas not pushed yet (None closes), and the worker pushing them
        self.deltas: deque[str | None] = deque()
        self.wake: asyncio.Event | None = None
        self.worker: asyncio.Task[None] | None = None


class _Pump:
    """One subscription: passes events through, adds audio, holds events back while a
    finished block's audio is still being produced. Runs on the loop's thread."""

    def __init__(self, mw: TTSMiddleware, source: str, observer: rxabc.ObserverBase[AgentEvent],
                 where: LoopAffinity) -> None:
        self.model = mw.tts_model
        self.realtime = mw.mode == "realtime"
        self.chunk_size = mw.chunk_size
        self.source = source
        self.observer = observer
        self.where = where
        self.blocks: dict[tuple[str, str], _Block] = {}
        self.held: deque[Any] = deque()
        self.busy = False  # a block's audio is being finished: later events wait
        self.failed = False  # the upstream failed: events pass, nothing more is spoken
        self.closed = False
        self.tasks: set[asyncio.Task[None]] = set()

    # -- upstream ------------------------------------------------------------------

    def on_next(self, event: AgentEvent) -> None:
        if not self.where.here():  # an inner middleware moved the stream
            self.where.hop(self.on_next, event)
            return
        if self.busy or self.held:
            self.held.append(event)
        else:
            self._handle(event)

    def on_error(self, error: Exception) -> None:
        if not self.where.here():
            self.where.hop(self.on_error, error)
            return
        self.failed = True
        self._cancel()
        self.busy = False
        held, self.held = self.held, deque()
        for item in held:  # what came before the error still arrives, unspoken
            if item is not _COMPLETED:
                self._emit(item)
        if not self.closed:
            self.closed = True
            self.observer.on_error(error)

    def on_completed(self) -> None:
        if not self.where.here():
            self.where.hop(self.on_completed)
            return
        self.held.append(_COMPLETED)
        self._drain()

    def dispose(self) -> None:
        self.where.run(self._dispose)

    def _dispose(self) -> None:
        self.closed = True
        self._cancel()

    def _abandon(self) -> None:
        for block in self.blocks.values():
            if block.worker is not None:
                block.worker.cancel()
            self._end(block)
        self.blocks.clear()

    def _cancel(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        for block in self.blocks.values():
            if block.worker is not None:
                block.worker.cancel()
        self.blocks.clear()

    # -- events --------------------------------------------------------------------

    def _emit(self, event: AgentEvent) -> None:
        if not self.closed:
            self.observer.on_next(event)

    def _handle(self, event: AgentEvent) -> None:
        kind = type(event)
        if kind is AgentResultEvent and self.blocks and not self.failed:
            assert isinstance(event, AgentResultEvent)
            # Blocks the stream never ended: an interrupted reply says nothing more;
            # otherwise their audio comes before the result.
            if event.result.generate_reason is GenerateReason.INTERRUPTED:
                self._abandon()
            else:
                self.held.appendleft(event)
                self._finish(self.blocks.pop(next(iter(self.blocks))))
                if not self.busy:
                    self._drain()
                return
        self._emit(event)
        if self.failed:
            return
        if kind is TextBlockDeltaEvent:
            assert isinstance(event, TextBlockDeltaEvent)
            key = (event.reply_id, event.block_id)
            block = self.blocks.get(key)
            if block is None:
                block = self.blocks[key] = _Block(event.reply_id, event.block_id)
            if self.realtime:
                self._push(block, event.delta)
            else:
                block.text.append(event.delta)
        elif kind is TextBlockEndEvent:
            assert isinstance(event, TextBlockEndEvent)
            found = self.blocks.pop((event.reply_id, event.block_id), None)
            if found is not None:
                self._finish(found)

    def _drain(self) -> None:
        while self.held and not self.busy and not self.closed:
            item = self.held.popleft()
            if item is not _COMPLETED:
                self._handle(item)
            elif self.blocks and not self.failed:
                # A block the stream never ended (and no result came): speak what it
                # has, then complete.
                self.held.appendleft(_COMPLETED)
                self._finish(self.blocks.pop(next(iter(self.blocks))))
            else:
                self.closed = True
                self.observer.on_completed()

    def _spawn(self, body: Any) -> asyncio.Task[None]:
        task = self.where.loop.create_task(body)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    # -- audio ---------------------------------------------------------------------

    def _finish(self, block: _Block) -> None:
        """The block's text is complete: its audio ends before anything else passes."""
        if self.realtime:
            if block.worker is None:
                return  # no delta was pushed
            block.deltas.append(None)
            assert block.wake is not None
            block.wake.set()
            waiting: Any = block.worker
        else:
            text = "".join(block.text)
            if not text.strip():
                return
            waiting = self._spawn(self._speak_whole(block, text))
        self.busy = True

        def release(_: Any) -> None:
            self.busy = False
            self._drain()

        waiting.add_done_callback(release)

    async def _speak_whole(self, block: _Block, text: str) -> None:
        try:
            audio = await self.model.synthesize(text)
        except Exception as exc:
            self._failed(block, exc)
            return
        self._audio(block, [audio])
        self._end(block)

    def _push(self, block: _Block, delta: str) -> None:
        block.deltas.append(delta)
        if block.worker is None:
            block.wake = asyncio.Event()
            block.worker = self._spawn(self._speak_stream(block, self.model.open_stream()))
        assert block.wake is not None
        block.wake.set()

    async def _speak_stream(self, block: _Block, stream: TTSStream) -> None:
        wake = block.wake
        assert wake is not None
        try:
            while True:
                await wake.wait()
                wake.clear()
                # Everything that arrived while the last push ran goes in one push.
                parts: list[str] = []
                ended = False
                while block.deltas:
                    part = block.deltas.popleft()
                    if part is None:
                        ended = True
                        break
                    parts.append(part)
                if parts:
                    self._audio(block, await stream.push("".join(parts)))
                if ended:
                    self._audio(block, await stream.flush())
                    self._end(block)
                    return
        except Exception as exc:
            self._failed(block, exc)

    def _audio(self, block: _Block, chunks: list[bytes]) -> None:
        size = self.chunk_size
        for chunk in chunks:
            for start in range(0, len(chunk), size):
                if not block.started:
                    block.started = True
                    self._emit(DataBlockStartEvent.make(
                        self.source, reply_id=block.reply_id, block_id=block.data_id,
                        media_type=self.model.media_type))
                piece = base64.b64encode(chunk[start:start + size]).decode("ascii")
                self._emit(DataBlockDeltaEvent.make(
                    self.source, reply_id=block.reply_id, block_id=block.data_id, delta=piece))

    def _end(self, block: _Block) -> None:
        if block.started:
            self._emit(DataBlockEndEvent.make(self.source, reply_id=block.reply_id,
                                              block_id=block.data_id))

    def _failed(self, block: _Block, exc: Exception) -> None:
        logger.warning("speech synthesis failed for block %s of reply %s: %s",
                       block.text_id, block.reply_id, exc)
        self._end(block)
        self._emit(CustomEvent(
            name=TTS_ERROR_EVENT, source=self.source,
            value={"reply_id": block.reply_id, "block_id": block.data_id,
                   "error": f"{type(exc).__name__}: {exc}"},
        ))
