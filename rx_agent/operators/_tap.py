"""Side effects that leave the stream unchanged: ``tap_usage``, ``on_tool_call``, ``on_text``.

Like Reactor's ``doOnNext``: an exception raised by the callback ends the stream with
that error (and disposes the source), nothing after it is forwarded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..event import (
    AgentEvent,
    ModelCallEndEvent,
    TextBlockDeltaEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ..message import ChatUsage, ToolUseBlock
from ._base import Operator, Relay, relay_op

__all__ = ["on_text", "on_tool_call", "tap", "tap_usage"]


def _callable(who: str, fn: Any) -> None:
    if not callable(fn):
        raise TypeError(f"{who}() takes a callable, not {type(fn).__name__}")


def tap(
    name: str, make: Callable[[], Callable[[AgentEvent], None]]
) -> Operator[AgentEvent, AgentEvent]:
    """An operator that forwards every event after ``inspect(event)`` (a fresh one per
    subscription from ``make``) has seen it; ``inspect`` raising fails the stream."""

    def start(relay: Relay) -> Callable[[AgentEvent], None]:
        inspect = make()
        forward = relay.forward

        def on_next(event: AgentEvent) -> None:
            if relay.stopped:
                return
            try:
                inspect(event)
            except Exception as exc:
                relay.fail(exc)
                return
            forward(event)

        return on_next

    return relay_op(name, start)


def tap_usage(fn: Callable[[ChatUsage], Any]) -> Operator[AgentEvent, AgentEvent]:
    """Call ``fn(usage)`` with each model call's token usage (the ``usage`` of its
    ``ModelCallEndEvent``, when the model reported one); events pass unchanged."""
    _callable("tap_usage", fn)

    def make() -> Callable[[AgentEvent], None]:
        def inspect(event: AgentEvent) -> None:
            if type(event) is ModelCallEndEvent:
                usage = event.usage
                if usage is not None:
                    fn(usage)

        return inspect

    return tap("tap_usage()", make)


def on_text(fn: Callable[[str], Any]) -> Operator[AgentEvent, AgentEvent]:
    """Call ``fn(delta)`` with each text delta as it streams; events pass unchanged."""
    _callable("on_text", fn)

    def make() -> Callable[[AgentEvent], None]:
        def inspect(event: AgentEvent) -> None:
            if type(event) is TextBlockDeltaEvent:
                fn(event.delta)

        return inspect

    return tap("on_text()", make)


def _tool_use(call_id: str, name: str, arguments: str) -> ToolUseBlock:
    # The arguments as the runtime reads them: a JSON object, else kept raw.
    if arguments.strip():
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return ToolUseBlock(id=call_id, name=name, input=parsed)
        return ToolUseBlock(id=call_id, name=name, input={}, raw_input=arguments)
    return ToolUseBlock(id=call_id, name=name, input={})


def on_tool_call(fn: Callable[[ToolUseBlock], Any]) -> Operator[AgentEvent, AgentEvent]:
    """Call ``fn(call)`` with each complete tool call, a :class:`~rx_agent.ToolUseBlock`
    assembled from its start, argument deltas and end event (called at the end
    event, before it is forwarded); events pass unchanged."""
    _callable("on_tool_call", fn)

    def make() -> Callable[[AgentEvent], None]:
        open_calls: dict[str, tuple[str, list[str]]] = {}

        def inspect(event: Any) -> None:  # exact-type dispatch below
            kind = type(event)
            if kind is ToolCallStartEvent:
                open_calls[event.tool_call_id] = (event.tool_call_name, [])
            elif kind is ToolCallDeltaEvent:
                call = open_calls.get(event.tool_call_id)
                if call is None:
                    call = open_calls[event.tool_call_id] = (event.tool_call_name, [])
                call[1].append(event.delta)
            elif kind is ToolCallEndEvent:
                name, parts = open_calls.pop(event.tool_call_id, (event.tool_call_name, []))
                fn(_tool_use(event.tool_call_id, name or event.tool_call_name, "".join(parts)))

        return inspect

    return tap("on_tool_call()", make)
