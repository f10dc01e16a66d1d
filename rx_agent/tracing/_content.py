"""Messages as the GenAI conventions' JSON (``gen_ai.input.messages`` and friends).

Each message is ``{"role": ..., "parts": [...]}`` with parts ``text``, ``reasoning``,
``tool_call`` and ``tool_call_response``; binary data is described, not copied (a
base64 payload would blow up the span).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

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


class OutputCollector:
    """Rebuilds a model call's output parts from its streamed events."""

    __slots__ = ("_order", "_parts")

    def __init__(self) -> None:
        self._parts: dict[str, dict[str, Any]] = {}
        self._order: list[str] = []

    def reset(self) -> None:
        self._parts.clear()
        self._order.clear()

    def _part(self, key: str, template: dict[str, Any]) -> dict[str, Any]:
        part = self._parts.get(key)
        if part is None:
            part = template
            self._parts[key] = part
            self._order.append(key)
        return part

    def text(self, block_id: str, delta: str) -> None:
        part = self._part("t:" + block_id, {"type": "text", "content": ""})
        part["content"] += delta

    def thinking(self, block_id: str, delta: str) -> None:
        part = self._part("k:" + block_id, {"type": "reasoning", "content": ""})
        part["content"] += delta

    def tool_call(self, call_id: str, name: str, delta: str = "") -> None:
        part = self._part(
            "c:" + call_id, {"type": "tool_call", "id": call_id, "name": name, "arguments": ""}
        )
        part["arguments"] += delta

    def json(self, finish_reason: str | None) -> str:
        parts = []
        for key in self._order:
            part = dict(self._parts[key])
            if part["type"] == "tool_call":
                raw = part["arguments"]
                try:
                    part["arguments"] = json.loads(raw) if raw.strip() else {}
                except ValueError:
                    part["arguments"] = raw
            parts.append(part)
        message: dict[str, Any] = {"role": "assistant", "parts": parts}
        if finish_reason is not None:
            message["finish_reason"] = finish_reason
        return dumps([message])
