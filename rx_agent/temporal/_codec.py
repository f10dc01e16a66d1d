"""What crosses Temporal: messages, events, chunks, options and states as JSON data.

Workflow inputs, activity arguments and results, update answers: every value is plain
JSON (the SDK's default converter), built and read here only, so the wire shapes are
in one place.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from ..context import AgentState, RuntimeContext
from ..event import AgentEvent, ExternalExecutionResultEvent, UserConfirmResultEvent, parse_event
from ..message import ChatUsage, Msg, ToolResultBlock, ToolUseBlock
from ..model.base import (
    FinishChunk,
    ModelChunk,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from ..options import GenerateOptions

__all__ = [
    "attributes_of",
    "decode_block",
    "decode_chunk",
    "decode_event",
    "decode_input",
    "decode_msg",
    "decode_options",
    "decode_state",
    "encode_block",
    "encode_chunk",
    "encode_event",
    "encode_input",
    "encode_msg",
    "encode_options",
    "encode_state",
]

Json = dict[str, Any]


def encode_msg(msg: Msg) -> Json:
    return msg.model_dump(mode="json")


def decode_msg(data: Json) -> Msg:
    return Msg.model_validate(data)


def encode_event(event: AgentEvent) -> Json:
    return event.model_dump(mode="json")


def decode_event(data: Json) -> AgentEvent:
    return parse_event(data)


def encode_block(block: ToolResultBlock | ToolUseBlock) -> Json:
    return block.model_dump(mode="json")


def decode_block(data: Json) -> ToolResultBlock:
    return ToolResultBlock.model_validate(data)


def encode_state(state: AgentState | None) -> Json | None:
    return None if state is None else state.model_dump(mode="json")


def decode_state(data: Json | None) -> AgentState | None:
    return None if data is None else AgentState.model_validate(data)


def encode_input(msgs: Any) -> Json:
    """A call's input: messages, or a resume event (what ``agent.stream`` accepts)."""
    if isinstance(msgs, (UserConfirmResultEvent, ExternalExecutionResultEvent)):
        return {"resume": encode_event(msgs)}
    if msgs is None:
        return {"messages": []}
    if isinstance(msgs, str):
        return {"text": msgs}
    if isinstance(msgs, Msg):
        return {"messages": [encode_msg(msgs)]}
    return {"messages": [encode_msg(m) for m in msgs]}


def decode_input(data: Json) -> Any:
    if "resume" in data:
        return decode_event(data["resume"])
    if "text" in data:
        return data["text"]
    return [decode_msg(m) for m in data["messages"]]


def encode_options(options: GenerateOptions) -> Json:
    out: Json = {}
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if f.name == "extra" or (f.name == "response_schema" and value is not None):
            value = dict(value)
        out[f.name] = value
    return out


def decode_options(data: Json) -> GenerateOptions:
    values = dict(data)
    if values.get("stop") is not None:
        values["stop"] = tuple(values["stop"])
    return GenerateOptions(**values)


def encode_chunk(chunk: ModelChunk) -> Json:
    kind = type(chunk)
    if kind is TextChunk:
        return {"k": "text", "text": chunk.text}  # type: ignore[union-attr]
    if kind is ThinkingChunk:
        return {"k": "thinking", "thinking": chunk.thinking}  # type: ignore[union-attr]
    if kind is ToolCallChunk:
        return {"k": "tool", **dataclasses.asdict(chunk)}
    if kind is UsageChunk:
        return {"k": "usage", "usage": chunk.usage.model_dump(mode="json")}  # type: ignore[union-attr]
    if kind is FinishChunk:
        return {"k": "finish", "reason": chunk.reason}  # type: ignore[union-attr]
    raise TypeError(f"a model streamed a {kind.__name__}, not a model chunk")


def decode_chunk(data: Json) -> ModelChunk:
    kind = data["k"]
    if kind == "text":
        return TextChunk(data["text"])
    if kind == "thinking":
        return ThinkingChunk(data["thinking"])
    if kind == "tool":
        return ToolCallChunk(data["index"], data["id"], data["name"], data["arguments"],
                             data["done"])
    if kind == "usage":
        return UsageChunk(ChatUsage.model_validate(data["usage"]))
    return FinishChunk(data["reason"])


log = logging.getLogger("rx_agent.temporal")


def attributes_of(ctx: RuntimeContext | None, *, warn: bool = False) -> Json:
    """``ctx``'s attributes that can travel (string keys, JSON values): what a workflow
    and its tool activities get of the caller's context. With ``warn``, the others are
    named in a warning (a typed key, an object that is not JSON): they stay behind."""
    if ctx is None:
        return {}
    out: Json = {}
    left: list[str] = []
    for key, value in ctx.attributes.items():
        if isinstance(key, str):
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                left.append(key)
                continue
            out[key] = value
        else:
            left.append(key.__name__)
    if warn and left:
        log.warning("context attributes %s do not travel to the workflow (only string keys "
                    "with JSON values do); its hooks and tools will not see them", left,
                    extra={"session_id": ctx.session_id, "run_id": ctx.run_id})
    return out
