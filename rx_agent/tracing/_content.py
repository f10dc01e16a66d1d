"""Messages as the GenAI conventions' JSON (``gen_ai.input.messages`` and friends).

Each message is ``{"role": ..., "parts": [...]}`` with parts ``text``, ``reasoning``,
``tool_call`` and ``tool_call_response``; binary data is described, not copied (a
base64 payload would blow up the span).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..agent._blocks import MessageAccumulator
from ..message import (
    DataBlock,
    HintBlock,
    Msg,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = ["OutputCollector", "dumps", "message_parts", "messages_json", "split_system"]


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _data_part(block: DataBlock) -> dict[str, Any]:
    if block.url:
        return {"type": "uri", "uri": block.url, "mime_type": block.media_type}
    return {"type": "blob", "mime_type": block.media_type}


def message_parts(content: Iterable[Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "content": block.text})
        elif isinstance(block, HintBlock):
            parts.append({"type": "text", "content": block.hint})
        elif isinstance(block, ThinkingBlock):
            parts.append({"type": "reasoning", "content": block.thinking})
        elif isinstance(block, ToolUseBlock):
            arguments: Any = block.input if block.raw_input is None else block.raw_input
            parts.append(
                {"type": "tool_call", "id": block.id, "name": block.name, "arguments": arguments}
            )
        elif isinstance(block, ToolResultBlock):
            parts.append({"type": "tool_call_response", "id": block.id, "response": block.text})
        elif isinstance(block, DataBlock):
            parts.append(_data_part(block))
    return parts


def _message(msg: Msg) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": msg.role.value, "parts": message_parts(msg.content)}
    if msg.name and msg.role is not Role.TOOL:
        entry["name"] = msg.name
    if msg.generate_reason is not None:
        entry["finish_reason"] = msg.generate_reason.value.lower()
    return entry


def messages_json(msgs: Iterable[Msg]) -> str:
    return dumps([_message(m) for m in msgs])


def split_system(msgs: Iterable[Msg]) -> tuple[list[Msg], list[Msg]]:
    """(system messages, the others): the conventions keep instructions apart."""
    system: list[Msg] = []
    rest: list[Msg] = []
    for msg in msgs:
        (system if msg.role is Role.SYSTEM else rest).append(msg)
    return system, rest


class OutputCollector(MessageAccumulator):
    """Rebuilds a model call's output from its streamed events, as the runtime does.

    The runtime's own accumulator, so the span shows the message the context stores
    (a ``ModelCallStartEvent`` from a retry below starts it over)."""

    __slots__ = ()

    def json(self, finish_reason: str | None) -> str:
        message: dict[str, Any] = {
            "role": "assistant", "parts": message_parts(self.build(None).content),
        }
        if finish_reason is not None:
            message["finish_reason"] = finish_reason
        return dumps([message])
