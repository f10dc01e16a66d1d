"""Model chunks -> block events, and block events -> the assistant message.

The converter applies the spec's block-id rules: consecutive text chunks share one
block (``text``), a later text segment of the same call gets ``text-2`` and so on
(likewise ``thinking``); a tool-call start closes the open text/thinking block.
The accumulator rebuilds a message from the events that leave the ``on_model_call``
chain, so a middleware's rewrite of a delta is what the context stores.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from .._record import new_id, now
from .._text import scrub
from ..event import (
    AgentEvent,
    DataBlockDeltaEvent,
    DataBlockStartEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ..message import (
    ChatUsage,
    ContentBlock,
    DataBlock,
    Msg,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from ..model.base import FinishChunk, TextChunk, ThinkingChunk, ToolCallChunk, UsageChunk

_TEXT, _THINKING = 1, 2

_new = object.__new__
_set = object.__setattr__
_D = TypeVar("_D", TextBlockDeltaEvent, ThinkingBlockDeltaEvent)


def _block_delta(cls: type[_D], kind: str) -> Callable[[str, str, str, str], _D]:
    """A positional ``cls.make`` for the one event per token: a dict literal in field
    order, no keyword dict and no defaults copy (checked against the class once)."""
    fields = cls._all_fields
    order = ["type", "id", "created_at", "source", "metadata", "reply_id", "block_id", "delta"]
    if list(cls._defaults) != order or cls._defaults["type"] != kind:
        raise TypeError(f"{cls.__name__} changed its fields; update _block_delta")

    def make(source: str, reply_id: str, block_id: str, delta: str) -> _D:
        obj = _new(cls)
        _set(obj, "__dict__", {"type": kind, "id": new_id(), "created_at": now(),
                               "source": source, "metadata": {}, "reply_id": reply_id,
                               "block_id": block_id, "delta": delta})
        _set(obj, "__pydantic_fields_set__", fields)
        _set(obj, "__pydantic_extra__", None)
        _set(obj, "__pydantic_private__", None)
        return obj

    return make


_delta_make = _block_delta(TextBlockDeltaEvent, "text_block_delta")
_thinking_make = _block_delta(ThinkingBlockDeltaEvent, "thinking_block_delta")


class ChunkConverter:
    """Turns the chunks of one model call into block events (``emit`` each).

    With ``acc`` (no ``on_model_call`` layer: what it emits is what leaves the chain)
    it also builds the message itself, as the accumulator would from its events, with
    no call per event for it. With ``emit=None`` as well (nobody reads the events:
    ``acall`` with no layer at ``on_agent``, ``on_reasoning`` or ``on_model_call``)
    it builds only the message."""

    __slots__ = (
        "_acc",
        "_calls",
        "_emit",
        "_open_id",
        "_open_kind",
        "_open_parts",
        "_source",
        "_texts",
        "_thinkings",
        "disposed",
        "finish_reason",
        "reply_id",
        "seen_chunk",
        "usage",
    )

    def __init__(self, reply_id: str, source: str, emit: Callable[[AgentEvent], None] | None,
                 acc: MessageAccumulator | None = None) -> None:
        if emit is None and acc is None:
            raise ValueError("a ChunkConverter without emit must build into an accumulator")
        self._acc = acc
        self._open_parts: list[str] | None = None  # the open block's text, when building
        self.reply_id = reply_id
        self._source = source
        self._emit = emit
        self._open_kind = 0
        self._open_id = ""
        self._texts = self._thinkings = 0  # blocks opened per kind (ints: no list per call)
        self._calls: dict[int, tuple[str, str]] = {}
        self.usage: ChatUsage | None = None
        self.finish_reason: str | None = None
        self.seen_chunk = False
        self.disposed = False  # set: chunks are ignored (the model's call was disposed)

    def feed(self, chunk: Any) -> None:
        if self.disposed:
            return
        self.seen_chunk = True
        kind = type(chunk)
        if kind is TextChunk:
            text = chunk.text
            if text:
                if self._open_kind != _TEXT:
                    self._open(_TEXT)
                if not text.isascii():  # the stream must stay serializable
                    text = scrub(text)
                parts = self._open_parts
                if parts is not None:
                    parts.append(text)
                emit = self._emit
                if emit is not None:
                    emit(_delta_make(self._source, self.reply_id, self._open_id, text))
        elif kind is ThinkingChunk:
            if chunk.thinking:
                if self._open_kind != _THINKING:
                    self._open(_THINKING)
                thinking = scrub(chunk.thinking)
                parts = self._open_parts
                if parts is not None:
                    parts.append(thinking)
                emit = self._emit
                if emit is not None:
                    emit(_thinking_make(self._source, self.reply_id, self._open_id, thinking))
        elif kind is ToolCallChunk:
            self._tool_call(chunk)
        elif kind is UsageChunk:
            self.usage = chunk.usage if self.usage is None else self.usage + chunk.usage
        elif kind is FinishChunk:
            self.finish_reason = chunk.reason
        else:
            raise TypeError(f"a model emitted {kind.__name__}; expected a ModelChunk")

    def _open(self, kind: int) -> None:
        self._close()
        if kind == _TEXT:
            self._texts = n = self._texts + 1
        else:
            self._thinkings = n = self._thinkings + 1
        base = "text" if kind == _TEXT else "thinking"
        self._open_id = block_id = base if n == 1 else f"{base}-{n}"
        self._open_kind = kind
        acc = self._acc
        if acc is not None:  # the accumulator's keys: "t:<id>" / "k:<id>"
            self._open_parts = acc.part(base, ("t:" if kind == _TEXT else "k:") + block_id)
        if self._emit is not None:
            start = TextBlockStartEvent if kind == _TEXT else ThinkingBlockStartEvent
            self._emit(start.make(self._source, reply_id=self.reply_id, block_id=block_id))

    def _close(self) -> None:
        if self._open_kind:
            if self._emit is not None:
                end = TextBlockEndEvent if self._open_kind == _TEXT else ThinkingBlockEndEvent
                self._emit(end.make(self._source, reply_id=self.reply_id,
                                    block_id=self._open_id))
            self._open_kind = 0
            self._open_parts = None

    def _tool_call(self, chunk: ToolCallChunk) -> None:
        call = self._calls.get(chunk.index)
        emit = self._emit
        if call is None:
            self._close()
            call_id = chunk.id or f"call_{self.reply_id}_{chunk.index}"
            name = chunk.name or ""
            call = (call_id, name)
            self._calls[chunk.index] = call
            if self._acc is not None:
                self._acc.part("tool", "c:" + call_id, name)
            if emit is not None:
                emit(ToolCallStartEvent.make(self._source, reply_id=self.reply_id,
                                             tool_call_id=call_id, tool_call_name=name))
        if chunk.arguments:
            if self._acc is not None:
                self._acc.part("tool", "c:" + call[0], call[1]).append(chunk.arguments)
            if emit is not None:
                emit(ToolCallDeltaEvent.make(self._source, reply_id=self.reply_id,
                                             tool_call_id=call[0], tool_call_name=call[1],
                                             delta=chunk.arguments))
        if chunk.done:
            self._end_call(chunk.index)

    def _end_call(self, index: int) -> None:
        call_id, name = self._calls.pop(index)
        if self._emit is not None:
            self._emit(ToolCallEndEvent.make(self._source, reply_id=self.reply_id,
                                             tool_call_id=call_id, tool_call_name=name))

    def finish(self) -> None:
        """Close what is open, hand the usage to ``acc`` (when building) and emit
        ``ModelCallEndEvent`` (when emitting)."""
        self._close()
        for index in sorted(self._calls):
            self._end_call(index)
        if self._acc is not None:
            self._acc.usage = self.usage
        if self._emit is not None:
            self._emit(ModelCallEndEvent.make(self._source, reply_id=self.reply_id,
                                              usage=self.usage,
                                              finish_reason=self.finish_reason))


class _Part(list[str]):
    """One block's text pieces (the list itself: one object per block in flight)."""

    __slots__ = ("extra", "key", "kind")

    def __init__(self, kind: str, key: str, extra: Any = None) -> None:
        # Empty from list.__new__ already: no list.__init__ call.
        self.kind = kind
        self.key = key
        self.extra = extra


class MessageAccumulator:
    """Rebuilds the assistant message of one model call from its events.

    A ``ModelCallStartEvent`` starts over, so a middleware that calls ``next`` twice
    (a retry) leaves the message of the last call.
    """

    __slots__ = ("_by_key", "unused", "usage")

    def __init__(self) -> None:
        # The parts by key, in the order they started (a dict keeps it; an empty one
        # is no work for the garbage collector while a call waits for its model).
        self._by_key: dict[str, _Part] = {}
        self.usage: ChatUsage | None = None
        # The last item fed that does not change the message: an error naming where a
        # non-event came from asks whether it passed here.
        self.unused: Any = None

    def reset(self) -> None:
        self._by_key = {}
        self.usage = None

    def part(self, kind: str, key: str, extra: Any = None) -> _Part:
        part = self._by_key.get(key)
        if part is None:
            part = self._by_key[key] = _Part(kind, key, extra)
        return part

    def feed(self, event: AgentEvent) -> None:
        if type(event) is TextBlockDeltaEvent:  # most events: no dispatch call
            self.part("text", "t:" + event.block_id).append(event.delta)
            return
        handler = _FEED.get(type(event))
        if handler is not None:
            handler(self, event)
        else:
            self.unused = event

    @property
    def empty(self) -> bool:
        return not self._by_key

    def build(self, name: str | None) -> Msg:
        content: list[ContentBlock] = []
        for part in self._by_key.values():
            text = "".join(part)
            if not text.isascii():  # what is stored must serialize
                text = scrub(text)
            if part.kind == "text":
                content.append(TextBlock._fast({"type": "text", "text": text}))
            elif part.kind == "thinking":
                content.append(ThinkingBlock._fast({"type": "thinking", "thinking": text}))
            elif part.kind == "data":
                content.append(DataBlock(media_type=part.extra or "application/octet-stream",
                                         data=text))
            else:
                content.append(_tool_use(part.key[2:], part.extra or "", text))
        return Msg.make(Role.ASSISTANT, content, name, usage=self.usage)


# One typed handler per event class the message is built from (exact-type dispatch);
# other events do not change the message.
def _text_delta(acc: MessageAccumulator, e: TextBlockDeltaEvent) -> None:
    acc.part("text", "t:" + e.block_id).append(e.delta)


def _thinking_delta(acc: MessageAccumulator, e: ThinkingBlockDeltaEvent) -> None:
    acc.part("thinking", "k:" + e.block_id).append(e.delta)


def _tool_start(acc: MessageAccumulator, e: ToolCallStartEvent) -> None:
    acc.part("tool", "c:" + e.tool_call_id, e.tool_call_name)


def _tool_delta(acc: MessageAccumulator, e: ToolCallDeltaEvent) -> None:
    acc.part("tool", "c:" + e.tool_call_id, e.tool_call_name).append(e.delta)


def _call_start(acc: MessageAccumulator, e: ModelCallStartEvent) -> None:
    acc.reset()


def _call_end(acc: MessageAccumulator, e: ModelCallEndEvent) -> None:
    acc.usage = e.usage


def _data_start(acc: MessageAccumulator, e: DataBlockStartEvent) -> None:
    acc.part("data", "d:" + e.block_id, e.media_type)


def _data_delta(acc: MessageAccumulator, e: DataBlockDeltaEvent) -> None:
    acc.part("data", "d:" + e.block_id).append(e.delta)


_FEED: dict[type[AgentEvent], Callable[[MessageAccumulator, Any], None]] = {
    TextBlockDeltaEvent: _text_delta,
    ThinkingBlockDeltaEvent: _thinking_delta,
    ToolCallStartEvent: _tool_start,
    ToolCallDeltaEvent: _tool_delta,
    ModelCallStartEvent: _call_start,
    ModelCallEndEvent: _call_end,
    DataBlockStartEvent: _data_start,
    DataBlockDeltaEvent: _data_delta,
}


def _tool_use(call_id: str, name: str, arguments: str) -> ToolUseBlock:
    if not arguments.strip():
        return ToolUseBlock(id=call_id, name=name, input={})
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return ToolUseBlock(id=call_id, name=name, input={}, raw_input=arguments)
    if not isinstance(parsed, dict):
        return ToolUseBlock(id=call_id, name=name, input={}, raw_input=arguments)
    return ToolUseBlock(id=call_id, name=name, input=parsed)
