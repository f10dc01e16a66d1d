"""An offline model that plays back a script: for tests, demos and benchmarks."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from .._rx import DirectObservable, on_some_loop, running_loop
from ..message import ChatUsage, Msg, TextBlock, ThinkingBlock, ToolUseBlock
from ..middleware.inputs import ModelCallInput
from ..options import GenerateOptions
from ._wire_cache import WireCache
from .base import (
    ChatModel,
    FinishChunk,
    ModelChunk,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from .errors import ScriptExhaustedError

__all__ = ["ScriptedModel"]

ScriptItem = str | ThinkingBlock | ToolUseBlock | TextBlock | BaseException
ScriptEntry = str | Sequence[ScriptItem] | BaseException


def _estimate_tokens(text_len: int) -> int:
    return max(1, text_len // 4)


# From how many messages on the usage estimate keeps each message's text length.
_KEPT_FROM = 32


def _text_length(msg: Msg) -> int:
    """What the usage estimate counts of a message: its text and thinking."""
    return len(msg.text) + len(msg.thinking)


class ScriptedModel(ChatModel):
    """Plays back one scripted response per model call, in order.

    Each entry of ``responses`` is one call:

    * a ``str``: answer with that text (one text delta);
    * a list of items: ``str`` (a text delta each), :class:`ThinkingBlock` (a thinking
      delta), :class:`ToolUseBlock` (a tool call; its ``raw_input``, when set, is sent
      as the argument text, to play a model whose arguments are not JSON), or an
      exception instance (the stream fails there, after the items before it);
    * an exception instance: the call fails before its first chunk.

    ``delay`` seconds pass before each chunk, on the event loop (no thread is held).
    Usage with non-zero token counts is streamed at the end. ``calls`` records the
    :class:`ModelCallInput` of every call received, retries included. Calling past
    the end of the script fails with :class:`ScriptExhaustedError`.
    """

    provider = "scripted"

    def __init__(
        self, responses: Sequence[ScriptEntry], name: str = "scripted", delay: float = 0.0
    ) -> None:
        if isinstance(responses, (str, bytes)) or not isinstance(responses, Sequence):
            raise TypeError("ScriptedModel(responses) takes a list of responses")
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        self._script: list[list[Any] | BaseException] = [self._check(i, r) for i, r in
                                                         enumerate(responses)]
        self.name = name
        self.delay = float(delay)
        self.calls: list[ModelCallInput] = []
        self._lock = threading.Lock()
        # Each message's text length, read once (a conversation is handed whole each call).
        self._lengths = WireCache(_text_length)

    @staticmethod
    def _check(i: int, entry: ScriptEntry) -> list[Any] | BaseException:
        if isinstance(entry, BaseException):
            return entry
        if isinstance(entry, str):
            return [entry]
        if isinstance(entry, Sequence):
            items = list(entry)
            for item in items:
                if not isinstance(
                    item, (str, ThinkingBlock, ToolUseBlock, TextBlock, BaseException)
                ):
                    raise TypeError(
                        f"ScriptedModel response #{i} has an item of type "
                        f"{type(item).__name__}; expected str, TextBlock, ThinkingBlock, "
                        "ToolUseBlock or an exception instance"
                    )
            return items
        raise TypeError(
            f"ScriptedModel response #{i} is a {type(entry).__name__}; expected a str, "
            "a list of items or an exception instance"
        )

    @property
    def remaining(self) -> int:
        """How many scripted responses are left."""
        with self._lock:
            return len(self._script) - len(self.calls)

    def _next_entry(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]], options: GenerateOptions
    ) -> list[Any] | BaseException:
        with self._lock:
            index = len(self.calls)
            self.calls.append(ModelCallInput(messages, tuple(tools), options, self))
            if index >= len(self._script):
                return ScriptExhaustedError(
                    f"ScriptedModel {self.name!r} has no response for call #{index + 1}: "
                    f"the script has {len(self._script)} response(s)"
                )
            return self._script[index]

    def _chunks(
        self, messages: Sequence[Msg], items: list[Any]
    ) -> Iterator[ModelChunk | BaseException]:
        """The chunks of one response, in order (an exception item ends them)."""
        playback = _Playback(self, messages, items)
        chunk = playback.next()
        while chunk is not _END:
            yield chunk
            chunk = playback.next()

    def _prompt_tokens(self, messages: Sequence[Msg]) -> int:
        # A short conversation is read again: cheaper than finding what was kept.
        prompt = sum(self._lengths.values(messages)) if len(messages) > _KEPT_FROM else sum(
            map(_text_length, messages))
        return _estimate_tokens(prompt)

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        opts = options or GenerateOptions()

        def subscribe(
            observer: rxabc.ObserverBase[ModelChunk],
            scheduler: rxabc.SchedulerBase | None = None,
        ) -> rxabc.DisposableBase:
            entry = self._next_entry(messages, tools, opts)
            if isinstance(entry, BaseException):
                observer.on_error(_as_exception(entry))
                return Disposable()
            if self.delay == 0:
                chunks = list(self._chunks(messages, entry))
                loop = running_loop()
                if loop is None:
                    return _emit_now(observer, chunks)
                # Emit from a loop callback, as a network model does, rather than deep
                # inside the subscription: a deep emitting stack can make every event
                # cross a CPython data-stack chunk boundary (gh-142183, unfixed in 3.11).
                holder = SingleAssignmentDisposable()
                loop.call_soon(_emit_now, observer, chunks, holder)
                return holder
            return _emit_later(observer, self, messages, entry, self.delay)

        return DirectObservable(subscribe)


def _as_exception(err: BaseException) -> Exception:
    return err if isinstance(err, Exception) else RuntimeError(repr(err))


def _emit_now(
    observer: rxabc.ObserverBase[ModelChunk],
    chunks: list[ModelChunk | BaseException],
    holder: SingleAssignmentDisposable | None = None,
) -> rxabc.DisposableBase:
    """Emit every chunk now; stops as soon as ``holder`` (or the result) is disposed."""
    subscription = holder if holder is not None else SingleAssignmentDisposable()
    on_next = observer.on_next
    for chunk in chunks:
        if subscription.is_disposed:
            return subscription
        if isinstance(chunk, BaseException):
            observer.on_error(_as_exception(chunk))
            return subscription
        on_next(chunk)
    if not subscription.is_disposed:
        observer.on_completed()
    return subscription


def _emit_later(
    observer: rxabc.ObserverBase[ModelChunk],
    model: ScriptedModel,
    messages: Sequence[Msg],
    items: list[Any],
    delay: float,
) -> rxabc.DisposableBase:
    # A chain of loop timers (no task, no future per chunk): thousands of concurrent
    # scripted calls stay cheap, and nothing holds a thread.
    loop = running_loop()
    if loop is None:
        disposable: rxabc.DisposableBase = on_some_loop(
            lambda obs, _: _emit_later(obs, model, messages, items, delay), observer, None
        )
        return disposable
    return _Timed(loop, observer, model, messages, items, delay)


_END: Any = object()


class _Playback:
    """One response's chunks, each made when it is played (a call in flight holds
    its place in the script, not its chunks): the items', then the usage and the
    finish reason."""

    __slots__ = ("index", "items", "messages", "model", "produced", "tool_index")

    def __init__(self, model: ScriptedModel, messages: Sequence[Msg], items: list[Any]) -> None:
        self.model = model
        self.messages = messages
        self.items = items
        self.index = 0
        self.produced = 0
        self.tool_index = 0

    def more(self) -> bool:
        """Whether a chunk follows the one made last."""
        return self.index < len(self.items) + 2

    def next(self) -> Any:
        """The next chunk (or the exception the stream fails with), or ``_END``."""
        items = self.items
        i = self.index
        self.index = i + 1
        if i < len(items):
            item = items[i]
            if isinstance(item, str):
                self.produced += len(item)
                return TextChunk(item)
            if isinstance(item, TextBlock):
                self.produced += len(item.text)
                return TextChunk(item.text)
            if isinstance(item, ThinkingBlock):
                self.produced += len(item.thinking)
                return ThinkingChunk(item.thinking)
            if isinstance(item, ToolUseBlock):
                # raw_input: argument text that is not a JSON object, as a model may send
                args = item.raw_input if item.raw_input is not None else json.dumps(item.input)
                self.produced += len(args) + len(item.name)
                self.tool_index += 1
                return ToolCallChunk(self.tool_index - 1, item.id, item.name, args, done=True)
            self.index = len(items) + 2  # an exception: the stream fails here
            return item
        if i == len(items):
            return UsageChunk(ChatUsage(input_tokens=self.model._prompt_tokens(self.messages),
                                        output_tokens=_estimate_tokens(self.produced)))
        if i == len(items) + 1:
            return FinishChunk("tool_calls" if self.tool_index else "stop")
        return _END


class _Timed(_Playback, rxabc.DisposableBase):
    """A response played back on the loop's :class:`_Ticker` for ``delay``; the
    subscription's disposable. The ticker's queue holds this object (``due``: when
    its next chunk is) until that chunk is played; nothing points back (no cycle)."""

    __slots__ = ("context", "disposed", "due", "observer", "ticker")

    def __init__(self, loop: asyncio.AbstractEventLoop, observer: rxabc.ObserverBase[ModelChunk],
                 model: ScriptedModel, messages: Sequence[Msg], items: list[Any],
                 delay: float) -> None:
        _Playback.__init__(self, model, messages, items)
        self.observer = observer
        self.disposed = False
        self.due = 0.0
        # One context for every step (each call_later would copy the current one).
        self.context = contextvars.copy_context()
        self.ticker = _ticker(loop, delay)
        self.ticker.add(loop, self)

    def step(self) -> None:
        chunk = self.next()
        if chunk is _END:  # disposed while a step was due
            return
        observer = self.observer
        if isinstance(chunk, BaseException):
            observer.on_error(_as_exception(chunk))
            return
        more = self.more()
        # Queue the next chunk before on_next, which may dispose (then it is skipped).
        if more:
            ticker = self.ticker
            # Steps run inside the ticker's fire(), which re-arms the timer at its end:
            # the chunk only joins the queue (add() stays for a step run any other way).
            if ticker.armed:
                self.due = ticker.clock() + ticker.delay
                ticker.queue.append(self)
            else:
                ticker.add(ticker.loop, self)
        observer.on_next(chunk)
        if not more and not self.disposed:
            observer.on_completed()

    def dispose(self) -> None:
        # Any thread: the ticker skips a disposed playback when its chunk is due; the
        # call's observer and messages are let go now, not then.
        self.disposed = True
        self.observer = _DROPPED
        self.messages = ()
        self.items = []
        self.index = 2  # past the end of no items: a step still due makes nothing


class _Dropped:
    """The observer of a disposed playback (a step already running may still call it)."""

    def on_next(self, value: Any) -> None:
        pass

    def on_error(self, error: Exception) -> None:
        pass

    def on_completed(self) -> None:
        pass


_DROPPED: Any = _Dropped()


_RESOLUTION = time.get_clock_info("monotonic").resolution


class _Ticker:
    """Every timed playback of one delay on one loop, behind one loop timer.

    Each wait is ``delay`` long, so the queue is in due order as it fills: a deque
    instead of asyncio's timer heap, whose Python-level comparisons per timer grow
    with the calls in flight, and one timer callback runs every step that is due.
    Each step runs in its playback's own context, and one that raises goes to the
    loop's exception handler as a failing timer callback would."""

    __slots__ = ("__weakref__", "armed", "clock", "context", "delay", "loop", "queue")

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self.loop = loop
        # asyncio's own loops tell time with time.monotonic (a Python method call per
        # chunk otherwise); any other loop, or one whose time() was patched on the
        # instance (a fast-forwarding test helper), is asked, here and in fire().
        base_time = getattr(loop.time, "__func__", None)
        self.clock: Callable[[], float] = time.monotonic \
            if base_time is asyncio.BaseEventLoop.time else loop.time
        self.delay = delay
        self.queue: deque[_Timed] = deque()
        self.armed = False
        self.context = contextvars.Context()

    def add(self, loop: asyncio.AbstractEventLoop, timed: _Timed) -> None:
        due = timed.due = self.clock() + self.delay
        self.queue.append(timed)
        if not self.armed:
            self.armed = True
            loop.call_at(due, self.fire, context=self.context)

    def fire(self) -> None:
        loop, queue = self.loop, self.queue
        end = self.clock() + _RESOLUTION
        # A step queues its next chunk ``delay`` (> 0) later: past ``end``.
        while queue and queue[0].due <= end:
            timed = queue.popleft()
            if timed.disposed:
                continue
            try:
                timed.context.run(timed.step)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                loop.call_exception_handler({
                    "message": f"Exception in ScriptedModel playback {timed.step!r}",
                    "exception": exc,
                })
        if queue:
            loop.call_at(queue[0].due, self.fire, context=self.context)
        else:
            self.armed = False


# One ticker per loop and delay. The loop's pending timer holds its ticker; the map
# holds tickers weakly, so neither keeps a finished loop alive.
_tickers: weakref.WeakValueDictionary[tuple[int, float], _Ticker] = (
    weakref.WeakValueDictionary()
)


def _ticker(loop: asyncio.AbstractEventLoop, delay: float) -> _Ticker:
    last = _last()
    if last is not None and last.loop is loop and last.delay == delay:
        return last  # the usual case: every playback of a run on one loop and delay
    key = (id(loop), delay)
    found = _tickers.get(key)
    if found is None or found.loop is not loop:
        found = _tickers[key] = _Ticker(loop, delay)
    _remember(found)
    return found


def _none() -> None:
    return None


# The ticker found last, held weakly like the map's (a C call to read, not a lookup
# through WeakValueDictionary's Python methods).
_last: Callable[[], _Ticker | None] = _none


def _remember(ticker: _Ticker) -> None:
    global _last
    _last = weakref.ref(ticker)
