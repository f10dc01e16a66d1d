"""Tool results the runtime writes itself: denials, and answers for unanswered calls.

Every path that ends a reply (stop, interrupt, error, dispose, a new message instead of
a HITL answer) closes the calls it leaves open through :func:`close_unanswered`, so
the stored context never holds a tool call without its result (models reject that).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from ..context import AgentState
from ..event import AgentEvent, ToolResultEndEvent, ToolResultStartEvent, ToolResultTextDeltaEvent
from ..message import Msg, Role, ToolResultBlock, ToolResultState, ToolUseBlock

__all__ = ["close_unanswered", "closed_prefix", "denied_result", "emit_result_events",
           "record_result"]


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
    start: int = 0,
) -> list[ToolResultBlock]:
    """Give every tool call without a result a synthesized one (only the calls in
    ``only`` when given, which must belong to the last batch) and return those results
    in call order.

    ``start``: the first ``start`` messages are known to hold no open call (see
    :func:`closed_prefix`), so only the messages from there on are scanned.

    A result answers a call only inside its batch: the tool messages right after the
    assistant message that made the call (models reuse ids such as ``call_1`` across
    turns). A synthesized result goes where the model expects it: after its batch's
    results, before whatever came next.
    """
    context = state.context
    if only is not None:
        return _close_last_batch(state, result_state, text, only)
    # The scan builds nothing until a call turns out open: the tail it rewrites is
    # the messages from the first open batch on.
    out: list[Msg] | None = None
    written: list[ToolResultBlock] = []
    waiting: list[ToolUseBlock] = []
    n = len(context)

    def flush(at: int) -> list[Msg]:
        tail = out if out is not None else context[start:at]
        for call in waiting:
            block = ToolResultBlock(id=call.id, name=call.name, output=text, state=result_state)
            written.append(block)
            tail.append(Msg.make(Role.TOOL, [block], block.name))
        waiting.clear()
        return tail

    for i in range(start, n):
        msg = context[i]
        if msg.role is Role.TOOL:
            answered = {b.id for b in msg.tool_results}
            waiting[:] = [c for c in waiting if c.id not in answered]
        else:
            if waiting:
                out = flush(i)
            if msg.role is Role.ASSISTANT:
                waiting.extend(msg.tool_calls)
        if out is not None:
            out.append(msg)
    if waiting:
        out = flush(n)
    if out is not None:
        context[start:] = out
    return written


def closed_prefix(context: Sequence[Msg], start: int = 0) -> int:
    """How many leading messages hold no open tool call, given that the first
    ``start`` hold none: a scan of ``context[start:]`` only.

    A call is open when its batch (its assistant message and the tool messages right
    after it) holds no result for it. The prefix ends where a batch with an open call
    begins; from that point, :func:`close_unanswered` (``start=``) finds every open
    call, since nothing before it waits for a result."""
    waiting: set[str] = set()
    clean = start
    n = len(context)
    for i in range(start, n):
        msg = context[i]
        if msg.role is Role.TOOL:
            if waiting:
                waiting.difference_update(b.id for b in msg.tool_results)
                if not waiting:
                    clean = i + 1
            else:
                clean = i + 1
            continue
        if waiting:
            return clean  # the batch before this message left a call open
        if msg.role is Role.ASSISTANT:
            waiting.update(c.id for c in msg.tool_calls)
        if not waiting:
            clean = i + 1
    return clean if waiting else n


def _close_last_batch(
    state: AgentState, result_state: ToolResultState, text: str, only: Collection[str]
) -> list[ToolResultBlock]:
    # The batch's calls and results sit at the end: scan back to its message instead
    # of the whole conversation.
    context = state.context
    answered: set[str] = set()
    start = len(context)
    for i in range(len(context) - 1, -1, -1):
        msg = context[i]
        if msg.role is Role.TOOL:
            answered.update(b.id for b in msg.tool_results)
        elif msg.role is Role.ASSISTANT and any(c.id in only for c in msg.tool_calls):
            start = i
            break
        else:
            return []  # not the last batch: nothing here to answer
    written = [
        ToolResultBlock(id=call.id, name=call.name, output=text, state=result_state)
        for call in (context[start].tool_calls if start < len(context) else [])
        if call.id in only and call.id not in answered
    ]
    for block in written:
        record_result(state, block)
    return written
