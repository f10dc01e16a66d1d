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
from typing import Any

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

_delta_make = TextBlockDeltaEvent.make
_thinking_make = ThinkingBlockDeltaEvent.make


class ChunkConverter:
    """Turns the chunks of one model call into block events (``emit`` each)."""

    __slots__ = (
        "_calls",
        "_emit",
        "_open_id",
        "_open_kind",
        "_segments",
        "_source",
        "finish_reason",
        "reply_id",
        "seen_chunk",
        "usage",
    )

    def __init__(self, reply_id: str, source: str, emit: Callable[[AgentEvent], None]) -> None:
        self.reply_id = reply_id
        self._source = source
        self._emit = emit
        self._open_kind = 0
        self._open_id = ""
        self._segments = [0, 0, 0]
        self._calls: dict[int, tuple[str, str]] = {}
        self.usage: ChatUsage | None = None
        self.finish_reason: str | None = None
        self.seen_chunk = False

    def feed(self, chunk: Any) -> None:
        self.seen_chunk = True
        kind = type(chunk)
        if kind is TextChunk:
            if chunk.text:
                if self._open_kind != _TEXT:
                    self._open(_TEXT)
                self._emit(
                    _delta_make(
                        self._source, reply_id=self.reply_id, block_id=self._open_id,
                        delta=scrub(chunk.text),
                    )
                )
        elif kind is ThinkingChunk:
            if chunk.thinking:
                if self._open_kind != _THINKING:
                    self._open(_THINKING)
                self._emit(
                    _thinking_make(
                        self._source, reply_id=self.reply_id, block_id=self._open_id,
                        delta=scrub(chunk.thinking),
                    )
                )
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
        self._segments[kind] += 1
        n = self._segments[kind]
        base = "text" if kind == _TEXT else "thinking"
        self._open_id = base if n == 1 else f"{base}-{n}"
        self._open_kind = kind
        start = TextBlockStartEvent if kind == _TEXT else ThinkingBlockStartEvent
        self._emit(start.make(self._source, reply_id=self.reply_id, block_id=self._open_id))

    def _close(self) -> None:
        if self._open_kind:
            end = TextBlockEndEvent if self._open_kind == _TEXT else ThinkingBlockEndEvent
            self._emit(end.make(self._source, reply_id=self.reply_id, block_id=self._open_id))
            self._open_kind = 0

    def _tool_call(self, chunk: ToolCallChunk) -> None:
        call = self._calls.get(chunk.index)
        if call is None:
            self._close()
            call_id = chunk.id or f"call_{self.reply_id}_{chunk.index}"
            name = chunk.name or ""
            call = (call_id, name)
            self._calls[chunk.index] = call
            self._emit(
                ToolCallStartEvent.make(
                    self._source, reply_id=self.reply_id, tool_call_id=call_id,
                    tool_call_name=name,
                )
            )
        if chunk.arguments:
            self._emit(
                ToolCallDeltaEvent.make(
                    self._source, reply_id=self.reply_id, tool_call_id=call[0],
                    tool_call_name=call[1], delta=chunk.arguments,
                )
            )
        if chunk.done:
            self._end_call(chunk.index)

    def _end_call(self, index: int) -> None:
        call_id, name = self._calls.pop(index)
        self._emit(
            ToolCallEndEvent.make(
                self._source, reply_id=self.reply_id, tool_call_id=call_id, tool_call_name=name
            )
        )

    def finish(self) -> None:
        """Close what is open and emit ``ModelCallEndEvent``."""
        self._close()
        for index in sorted(self._calls):
            self._end_call(index)
        self._emit(
            ModelCallEndEvent.make(
                self._source, reply_id=self.reply_id, usage=self.usage,
                finish_reason=self.finish_reason,
            )
        )


class _Part:
    __slots__ = ("extra", "key", "kind", "parts")

    def __init__(self, kind: str, key: str, extra: Any = None) -> None:
        self.kind = kind
        self.key = key
        self.parts: list[str] = []
        self.extra = extra


class MessageAccumulator:
    """Rebuilds the assistant message of one model call from its events.

    A ``ModelCallStartEvent`` starts over, so a middleware that calls ``next`` twice
    (a retry) leaves the message of the last call.
    """

    __slots__ = ("_blocks", "_by_key", "started", "usage")

    def __init__(self) -> None:
        self._blocks: list[_Part] = []
        self._by_key: dict[str, _Part] = {}
        self.usage: ChatUsage | None = None
        self.started = False

    def reset(self) -> None:
        self._blocks = []
        self._by_key = {}
        self.usage = None

    def _part(self, kind: str, key: str, extra: Any = None) -> _Part:
        part = self._by_key.get(key)
        if part is None:
            part = _Part(kind, key, extra)
            self._by_key[key] = part
            self._blocks.append(part)
        return part

    def feed(self, event: AgentEvent) -> None:
        kind = type(event)
        if kind is TextBlockDeltaEvent:
            self._part("text", "t:" + event.block_id).parts.append(event.delta)  # type: ignore[attr-defined]
        elif kind is ThinkingBlockDeltaEvent:
            self._part("thinking", "k:" + event.block_id).parts.append(event.delta)  # type: ignore[attr-defined]
        elif kind is ToolCallStartEvent:
            self._part("tool", "c:" + event.tool_call_id, event.tool_call_name)  # type: ignore[attr-defined]
        elif kind is ToolCallDeltaEvent:
            self._part("tool", "c:" + event.tool_call_id, event.tool_call_name).parts.append(  # type: ignore[attr-defined]
                event.delta  # type: ignore[attr-defined]
            )
        elif kind is ModelCallStartEvent:
            self.reset()
            self.started = True
        elif kind is ModelCallEndEvent:
            self.usage = event.usage  # type: ignore[attr-defined]
        elif kind is DataBlockStartEvent:
            self._part("data", "d:" + event.block_id, event.media_type)  # type: ignore[attr-defined]
        elif kind is DataBlockDeltaEvent:
            self._part("data", "d:" + event.block_id).parts.append(event.delta)  # type: ignore[attr-defined]
        elif isinstance(event, (TextBlockStartEvent, ToolCallEndEvent)):
            return

    @property
    def empty(self) -> bool:
        return not self._blocks

    def build(self, name: str | None) -> Msg:
        content: list[ContentBlock] = []
        for part in self._blocks:
            text = scrub("".join(part.parts))  # what is stored must serialize
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
