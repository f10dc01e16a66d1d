"""Tool results the runtime writes itself: denials, and answers for unanswered calls.

Every path that ends a reply (stop, interrupt, error, dispose, a new message instead of
a HITL answer) closes the calls it leaves open through :func:`close_unanswered`, so
the stored context never holds a tool call without its result (models reject that).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from ..context import AgentState
from ..event import AgentEvent, ToolResultEndEvent, ToolResultStartEvent, ToolResultTextDeltaEvent
from ..message import Msg, Role, ToolResultBlock, ToolResultState, ToolUseBlock

__all__ = ["close_unanswered", "denied_result", "emit_result_events", "record_result"]


def denied_result(call: ToolUseBlock, reason: str) -> ToolResultBlock:
    """The DENIED result of a call a rule or the user refused."""
    return ToolResultBlock(id=call.id, name=call.name, output=reason,
                           state=ToolResultState.DENIED)


def record_result(state: AgentState, block: ToolResultBlock) -> None:
    state.context.append(Msg.make(Role.TOOL, [block], block.name))


def emit_result_events(
    emit: Callable[[AgentEvent], None], source: str, reply_id: str, block: ToolResultBlock
) -> None:
    """The start / text delta / end events of a result that did not stream."""
    common = {"reply_id": reply_id, "tool_call_id": block.id, "tool_call_name": block.name}
    emit(ToolResultStartEvent.make(source, **common))
    if block.text:
        emit(ToolResultTextDeltaEvent.make(source, delta=block.text, **common))
    emit(ToolResultEndEvent.make(source, state=block.state, **common))


def close_unanswered(
    state: AgentState,
    result_state: ToolResultState,
    text: str,
    only: Collection[str] | None = None,
) -> list[ToolResultBlock]:
    """Append a synthesized result for every tool call in the context that has none
    (only the calls in ``only`` when given) and return those results in call order."""
    context = state.context
    answered: set[str] = set()
    start = 0
    if only is not None:
        # The calls and results of one batch sit at the end: scan back to its message
        # instead of the whole conversation.
        for i in range(len(context) - 1, -1, -1):
            msg = context[i]
            if msg.role is Role.TOOL:
                answered.update(b.id for b in msg.tool_results)
            elif msg.role is Role.ASSISTANT and any(c.id in only for c in msg.tool_calls):
                start = i
                break
    else:
        answered = {b.id for m in context if m.role is Role.TOOL for b in m.tool_results}
    written: list[ToolResultBlock] = []
    for msg in context[start:]:
        if msg.role is not Role.ASSISTANT:
            continue
        for call in msg.tool_calls:
            if call.id not in answered and (only is None or call.id in only):
                answered.add(call.id)
                written.append(ToolResultBlock(id=call.id, name=call.name, output=text,
                                               state=result_state))
    for block in written:
        record_result(state, block)
    return written
