"""Realistic event sequences for tests: what the runtime emits for one round.

The model rounds are produced by the runtime's own chunk converter (the one that
turns a model's chunks into block events), so their block ids, tool-call ids and
event order are exactly what an agent streams: ``text``, ``text-2`` ... for text
segments, ``thinking`` for thinking, a tool-call start closing the open block, and
``call_<reply_id>_<index>`` for a call the model gave no id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._record import new_id
from ..agent._blocks import ChunkConverter, MessageAccumulator
from ..agent._results import emit_result_events
from ..event import (
    AgentEndEvent,
    AgentEvent,
    AgentResultEvent,
    AgentStartEvent,
    ModelCallStartEvent,
)
from ..message import (
    ChatUsage,
    GenerateReason,
    Msg,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
)
from ..model.base import (
    FinishChunk,
    ModelChunk,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)

__all__ = [
    "DEFAULT_SOURCE",
    "agent_reply",
    "text_round",
    "thinking_round",
    "tool_results",
    "tool_round",
]

DEFAULT_SOURCE = "agent"
"""The ``source`` of the events the helpers build (the runtime uses the agent's name)."""

ToolCallSpec = ToolUseBlock | tuple[str, dict[str, Any]]


def _deltas(what: str, value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{what} must be a str or a list of str, got {value!r}")
    return list(value)


def _call(index: int, spec: ToolCallSpec) -> tuple[str | None, str, dict[str, Any]]:
    if isinstance(spec, ToolUseBlock):
        return (spec.id, spec.name, spec.input)
    if (
        isinstance(spec, tuple)
        and len(spec) == 2
        and isinstance(spec[0], str)
        and isinstance(spec[1], dict)
    ):
        return (None, spec[0], spec[1])
    raise TypeError(
        f"tool call #{index + 1} must be a ToolUseBlock or a (name, arguments) tuple, "
        f"got {spec!r}"
    )


def _round(
    chunks: list[ModelChunk],
    *,
    reply_id: str | None,
    source: str | None,
    model_name: str | None,
    usage: ChatUsage | None,
    finish_reason: str | None,
) -> list[AgentEvent]:
    rid = reply_id or new_id()
    src = DEFAULT_SOURCE if source is None else source
    if usage is None:  # like ScriptedModel: always non-zero counts
        produced = sum(
            len(c.text) if isinstance(c, TextChunk)
            else len(c.thinking) if isinstance(c, ThinkingChunk)
            else len(c.arguments) + len(c.name or "") if isinstance(c, ToolCallChunk)
            else 0
            for c in chunks
        )
        usage = ChatUsage(input_tokens=10, output_tokens=max(1, produced // 4))
    out: list[AgentEvent] = [ModelCallStartEvent(reply_id=rid, model_name=model_name,
                                                 source=src)]
    converter = ChunkConverter(rid, src, out.append)
    for chunk in (*chunks, UsageChunk(usage)):
        converter.feed(chunk)
    if finish_reason is not None:
        converter.feed(FinishChunk(finish_reason))
    converter.finish()
    return out


def text_round(
    *deltas: str,
    reply_id: str | None = None,
    source: str | None = None,
    model_name: str | None = "scripted",
    usage: ChatUsage | None = None,
    finish_reason: str | None = "stop",
) -> list[AgentEvent]:
    """The events of one model call that answers with text, one delta per argument.

    ``ModelCallStartEvent``, ``TextBlockStartEvent`` (block ``text``), the deltas,
    ``TextBlockEndEvent``, ``ModelCallEndEvent`` (with ``usage``; estimated when not
    given). ``reply_id`` defaults to a fresh id, as the runtime gives every call.
    """
    if not deltas:
        raise TypeError("text_round() needs at least one text delta")
    chunks: list[ModelChunk] = [TextChunk(t) for t in _deltas("a text delta", list(deltas))]
    return _round(chunks, reply_id=reply_id, source=source, model_name=model_name,
                  usage=usage, finish_reason=finish_reason)


def thinking_round(
    thinking: str | Sequence[str],
    *answer: str,
    reply_id: str | None = None,
    source: str | None = None,
    model_name: str | None = "scripted",
    usage: ChatUsage | None = None,
    finish_reason: str | None = "stop",
) -> list[AgentEvent]:
    """One model call that thinks (block ``thinking``), then answers with ``answer``
    (block ``text``; no text block when ``answer`` is empty)."""
    chunks: list[ModelChunk] = [ThinkingChunk(t) for t in _deltas("thinking", thinking)]
    chunks += [TextChunk(t) for t in _deltas("an answer delta", list(answer))]
    if not chunks:
        raise TypeError("thinking_round() needs some thinking")
    return _round(chunks, reply_id=reply_id, source=source, model_name=model_name,
                  usage=usage, finish_reason=finish_reason)


def tool_round(
    *calls: ToolCallSpec,
    text: str | Sequence[str] | None = None,
    thinking: str | Sequence[str] | None = None,
    reply_id: str | None = None,
    source: str | None = None,
    model_name: str | None = "scripted",
    usage: ChatUsage | None = None,
    finish_reason: str | None = "tool_calls",
) -> list[AgentEvent]:
    """One model call that makes tool calls (after optional ``thinking`` and ``text``).

    Each call is a ``ToolUseBlock`` (its id is kept) or a ``(name, arguments)`` tuple
    (the call gets the id the runtime gives a call without one,
    ``call_<reply_id>_<index>``). Each call streams ``ToolCallStartEvent``, one
    ``ToolCallDeltaEvent`` with its JSON arguments and ``ToolCallEndEvent``.
    """
    if not calls:
        raise TypeError("tool_round() needs at least one tool call")
    chunks: list[ModelChunk] = [ThinkingChunk(t) for t in _deltas("thinking", thinking)]
    chunks += [TextChunk(t) for t in _deltas("text", text)]
    for i, spec in enumerate(calls):
        call_id, name, args = _call(i, spec)
        chunks.append(ToolCallChunk(i, call_id, name, json.dumps(args), done=True))
    return _round(chunks, reply_id=reply_id, source=source, model_name=model_name,
                  usage=usage, finish_reason=finish_reason)


def tool_results(
    *calls: ToolUseBlock,
    output: str | Callable[[ToolUseBlock], str | ToolResultBlock] = "ok",
    state: ToolResultState = ToolResultState.SUCCESS,
    reply_id: str | None = None,
    source: str | None = None,
) -> list[AgentEvent]:
    """The events of one acting step (what ``on_acting``'s ``next`` streams): for each
    call in order ``ToolResultStartEvent``, ``ToolResultTextDeltaEvent`` (when the
    output has text) and ``ToolResultEndEvent``, all sharing the batch's ``reply_id``.

    ``output`` is the text of every result, or a function of the call returning the
    text or a whole ``ToolResultBlock``.
    """
    rid = reply_id or new_id()
    src = DEFAULT_SOURCE if source is None else source
    out: list[AgentEvent] = []
    for call in calls:
        if not isinstance(call, ToolUseBlock):
            raise TypeError(f"tool_results() takes ToolUseBlocks, got {call!r}")
        value = output(call) if callable(output) else output
        block = value if isinstance(value, ToolResultBlock) else ToolResultBlock(
            id=call.id, name=call.name, output=value, state=state)
        emit_result_events(out.append, src, rid, block)
    return out


def round_message(events: Iterable[AgentEvent], name: str | None = DEFAULT_SOURCE) -> Msg:
    """The assistant message the runtime would store for a round's events (the last
    model call's, as a retry leaves it)."""
    acc = MessageAccumulator()
    for event in events:
        acc.feed(event)
    return acc.build(name)


def agent_reply(
    *steps: Sequence[AgentEvent],
    session_id: str = DEFAULT_SOURCE,
    name: str = DEFAULT_SOURCE,
    reply_id: str | None = None,
    reason: GenerateReason = GenerateReason.MODEL_STOP,
) -> list[AgentEvent]:
    """A whole reply as ``agent.stream()`` emits it: ``AgentStartEvent``, the steps'
    events (model rounds and tool results, in order), ``AgentResultEvent`` with the
    message the last model round would store, and ``AgentEndEvent``."""
    rid = reply_id or new_id()
    body = [e for step in steps for e in step]
    last_call = max((i for i, e in enumerate(body) if isinstance(e, ModelCallStartEvent)),
                    default=None)
    if last_call is None:
        raise TypeError("agent_reply() needs at least one model round")
    result = round_message(body[last_call:], name)
    result.generate_reason = reason
    return [
        AgentStartEvent(session_id=session_id, reply_id=rid, name=name, source=name),
        *body,
        AgentResultEvent(result=result, source=name),
        AgentEndEvent(reply_id=rid, source=name),
    ]
