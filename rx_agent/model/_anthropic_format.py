"""The Anthropic Messages API wire format: requests from messages, and complete answers,
usage and stop reasons read back into model chunks.

* system messages become the top-level ``system`` text;
* tool results become ``tool_result`` blocks of a user turn (``is_error`` unless the
  result is a success), images and PDFs ``image`` / ``document`` blocks;
* thinking blocks are not sent back: the message model carries no thinking
  signature, which the API needs to accept them;
* consecutive turns of one role are merged, as the API wants turns to alternate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rx_agent.message import (
    ChatUsage,
    ContentBlock,
    DataBlock,
    HintBlock,
    Msg,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
)

from ._wire_cache import encode_json
from .base import FinishChunk, ModelChunk, TextChunk, ThinkingChunk, ToolCallChunk, UsageChunk

__all__ = [
    "ERROR_STATUS",
    "STOP_REASONS",
    "AnthropicJSON",
    "AnthropicWire",
    "anthropic_message",
    "anthropic_message_json",
    "join_anthropic_json",
    "join_anthropic_messages",
    "parse_message",
    "parse_usage",
    "stop_reason",
    "to_anthropic_messages",
    "to_anthropic_tool_choice",
    "to_anthropic_tools",
]

JSONDict = dict[str, Any]

# Anthropic's stop reasons in the vocabulary every adapter reports (OpenAI's).
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}

# The HTTP status each error type of an in-stream ``error`` event stands for.
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def stop_reason(reason: str) -> str:
    """``end_turn`` → ``stop``, ``tool_use`` → ``tool_calls``, ``max_tokens`` →
    ``length``, ``refusal`` → ``content_filter``; others (``pause_turn``) as they are."""
    return STOP_REASONS.get(reason, reason)


def to_anthropic_messages(messages: Iterable[Msg]) -> tuple[str, list[JSONDict]]:
    """The ``system`` text and the ``messages`` array."""
    return join_anthropic_messages([anthropic_message(m) for m in messages])


AnthropicWire = tuple[str | None, JSONDict | None]
"""One message's share of the request, which depends on that message alone (the model
keeps it, see ``_wire_cache``), read-only once made: a system message's text (else
``None``), and its turn, tool results first (``None``: nothing to send)."""


def anthropic_message(msg: Msg) -> AnthropicWire:
    """``msg``'s :data:`AnthropicWire`."""
    if msg.role is Role.SYSTEM:
        return "\n".join(_texts(msg.content)), None
    if msg.role is Role.ASSISTANT:
        blocks = _assistant_blocks(msg.content)
        role = "assistant"
    else:
        blocks = _user_blocks(msg)
        role = "user"
    if not blocks:
        return None, None  # an empty turn is rejected and tells the model nothing
    return None, {"role": role, "content": blocks}


def _results_last(block: JSONDict) -> bool:
    return bool(block["type"] != "tool_result")


def join_anthropic_messages(wires: Iterable[AnthropicWire]) -> tuple[str, list[JSONDict]]:
    """The ``system`` text and the ``messages`` array from each message's
    :data:`AnthropicWire`, in order. Consecutive turns of one role are merged (into
    a new turn: the wires' own are read-only), tool results leading."""
    system: list[str] = []
    turns: list[JSONDict] = []
    last_role = None
    merged = False  # the last turn is this call's own (a merge), not a wire's
    for text, turn in wires:
        if turn is None:
            if text:
                system.append(text)
            continue
        role = turn["role"]
        if role != last_role:
            if merged:
                turns[-1]["content"].sort(key=_results_last)
                merged = False
            turns.append(turn)
            last_role = role
        elif merged:
            turns[-1]["content"].extend(turn["content"])
        else:
            turns[-1] = {"role": role, "content": [*turns[-1]["content"], *turn["content"]]}
            merged = True
    if merged:
        turns[-1]["content"].sort(key=_results_last)
    return "\n\n".join(system), turns


AnthropicJSON = tuple[str | None, str | None, Sequence[bytes], Sequence[bytes], bytes]
"""A message's :data:`AnthropicWire` as the model keeps it: the system text, the
turn's role (``None``: no turn), its tool results and its other blocks, each already
JSON (a merged turn's content is every tool result, then the rest), and the JSON of
its turn alone."""


def anthropic_message_json(msg: Msg) -> AnthropicJSON:
    """``msg``'s :data:`AnthropicJSON`."""
    system, turn = anthropic_message(msg)
    if turn is None:
        return system, None, (), (), b""
    content = turn["content"]
    blocks = [encode_json(b) for b in content]
    lead = 0
    while lead < len(blocks) and content[lead]["type"] == "tool_result":
        lead += 1
    role = turn["role"]
    return None, role, blocks[:lead], blocks[lead:], _turn_json(role, blocks)


def join_anthropic_json(wires: Iterable[AnthropicJSON]) -> tuple[str, list[bytes]]:
    """The ``system`` text and the items of the ``messages`` array as JSON, from each
    message's :data:`AnthropicJSON`: what ``json.dumps`` makes of each of
    :func:`join_anthropic_messages`' turns."""
    system: list[str] = []
    out: list[bytes] = []
    role: str | None = None
    run: list[AnthropicJSON] = []  # the wires of the turn being joined
    for wire in wires:
        turn_role = wire[1]
        if turn_role is None:
            if wire[0]:
                system.append(wire[0])
            continue
        if turn_role != role:
            if run:
                out.append(_merged(run))
            role, run = turn_role, [wire]
        else:
            run.append(wire)
    if run:
        out.append(_merged(run))
    return "\n\n".join(system), out


def _merged(run: list[AnthropicJSON]) -> bytes:
    """One turn from consecutive messages of one role: tool results first."""
    if len(run) == 1:
        return run[0][4]
    role = run[0][1]
    assert role is not None
    return _turn_json(role, [b for w in run for b in w[2]] + [b for w in run for b in w[3]])


_ROLES = {role: b'{"role": "' + role.encode() + b'", "content": [' for role in
          ("user", "assistant")}


def _turn_json(role: str, blocks: list[bytes]) -> bytes:
    return _ROLES[role] + b", ".join(blocks) + b"]}"


def _texts(blocks: Iterable[ContentBlock]) -> list[str]:
    out = []
    for block in blocks:
        if isinstance(block, TextBlock) and block.text:
            out.append(block.text)
        elif isinstance(block, HintBlock) and block.hint:
            out.append(block.hint)
    return out


def _assistant_blocks(blocks: Sequence[ContentBlock]) -> list[JSONDict]:
    out: list[JSONDict] = [{"type": "text", "text": t} for t in _texts(blocks)]
    for block in blocks:
        if isinstance(block, ToolUseBlock):
            out.append({"type": "tool_use", "id": block.id, "name": block.name,
                        "input": block.input})
    return out


def _user_blocks(msg: Msg) -> list[JSONDict]:
    """A user turn's blocks, tool results first (as the API requires)."""
    results: list[JSONDict] = []
    out: list[JSONDict] = []
    for block in msg.content:
        if isinstance(block, ToolResultBlock):
            results.append(_tool_result(block))
        elif isinstance(block, TextBlock | HintBlock):
            out.extend({"type": "text", "text": t} for t in _texts([block]))
        elif isinstance(block, DataBlock):
            out.append(_data(block))
    if results:
        results.extend(out)
        return results
    return out


def _tool_result(block: ToolResultBlock) -> JSONDict:
    content: str | list[JSONDict]
    if isinstance(block.output, str):
        content = block.output
    else:
        content = []
        for item in block.output:
            if isinstance(item, DataBlock):
                content.append(_data(item))
            else:
                content.extend({"type": "text", "text": t} for t in _texts([item]))
    result: JSONDict = {"type": "tool_result", "tool_use_id": block.id, "content": content}
    if block.state is not ToolResultState.SUCCESS:
        result["is_error"] = True
    return result


def _data(block: DataBlock) -> JSONDict:
    media = block.media_type.lower()
    kind = ("image" if media.startswith("image/")
            else "document" if media == "application/pdf" else None)
    if kind is None:
        # No block type for it: the model gets a line naming it rather than nothing.
        where = f": {block.url}" if block.url else ""
        return {"type": "text", "text": f"[{block.media_type}{where}]"}
    if block.data is not None:
        source: JSONDict = {"type": "base64", "media_type": block.media_type, "data": block.data}
    else:
        source = {"type": "url", "url": block.url or ""}
    return {"type": kind, "source": source}


def to_anthropic_tools(tools: Iterable[Mapping[str, Any]]) -> list[JSONDict]:
    return [
        {"name": t["name"], "description": t.get("description") or "",
         "input_schema": t.get("parameters") or {"type": "object", "properties": {}}}
        for t in tools
    ]


def to_anthropic_tool_choice(choice: str) -> JSONDict:
    """``"auto"``, ``"none"``, ``"required"`` (Anthropic's ``any``), or a tool's name."""
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


# -------------------------------------------------------------------------- answers


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_usage(usage: Mapping[str, Any]) -> ChatUsage:
    """Anthropic ``usage`` as :class:`ChatUsage`: ``input_tokens`` counts every prompt
    token (new, written to the cache and read from it), ``cached_tokens`` the ones read
    from the cache."""
    read = usage.get("cache_read_input_tokens")
    total_in = (_int(usage.get("input_tokens")) + _int(usage.get("cache_creation_input_tokens"))
                + _int(read))
    return ChatUsage(input_tokens=total_in, output_tokens=_int(usage.get("output_tokens")),
                     cached_tokens=_int(read) if read is not None else None)


def parse_message(data: Any) -> list[ModelChunk]:
    """The chunks of a complete (non-streaming) ``message``."""
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise ValueError(f"no content list in {json.dumps(data)[:200]}")
    out: list[ModelChunk] = []
    for index, block in enumerate(data["content"]):
        if not isinstance(block, dict):
            raise ValueError(f"content block #{index} is not an object")
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            out.append(TextChunk(str(block["text"])))
        elif kind == "thinking" and block.get("thinking"):
            out.append(ThinkingChunk(str(block["thinking"])))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            out.append(ToolCallChunk(index, block.get("id"), block.get("name"), arguments,
                                     done=True))
    if isinstance(data.get("usage"), dict):
        out.append(UsageChunk(parse_usage(data["usage"])))
    if isinstance(data.get("stop_reason"), str):
        out.append(FinishChunk(stop_reason(data["stop_reason"])))
    return out

