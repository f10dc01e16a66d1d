"""The core of ``on_compress_context``: replacing the session context, checked.

A middleware replaces the context by handing ``next`` an input with other messages.
The core stores them only if every tool call that had its result before still has it
after, and after it (a model rejects a result without its call, and a call without a
result), so a compaction can never leave the session unusable.
"""

from __future__ import annotations

from ..context import AgentState
from ..event import ContextCompressedEvent
from ..message import Msg, ToolResultBlock, ToolUseBlock
from ..middleware._plan import ExecutionPlan
from ..middleware.base import ExtensionPoint
from ..middleware.inputs import CompressContextInput

__all__ = ["replace_context"]


def replace_context(
    state: AgentState, cin: CompressContextInput, source: str | None, plan: ExecutionPlan
) -> ContextCompressedEvent | None:
    """Store ``cin.messages`` as the context when they differ from it; the event that
    tells the caller, or ``None`` when nothing changed."""
    new, old = cin.messages, state.context
    if len(new) == len(old) and all(a is b for a, b in zip(new, old, strict=True)):
        return None
    who = ", ".join(f"{label}.on_compress_context()"
                    for label in plan.labels(ExtensionPoint.ON_COMPRESS_CONTEXT))
    for i, m in enumerate(new):
        if not isinstance(m, Msg):
            raise TypeError(f"{who} replaced the context with {type(m).__name__} "
                            f"{m!r:.60} at #{i}, not a Msg")
    before, after = _pairs(old), _pairs(new)
    for call_id, (call_at, result_at) in before.items():
        if call_at is None or result_at is None:
            continue  # not a whole pair before: nothing to keep together
        now = after.get(call_id)
        if now is None:
            continue  # both dropped (summarized)
        new_call, new_result = now
        if new_call is None or new_result is None or new_result <= new_call:
            raise ValueError(
                f"{who} split tool call {call_id!r} from its result: keep a tool call "
                "and its result together (both kept, in order, or both summarized)"
            )
    count = len(old)
    state.context[:] = new
    return ContextCompressedEvent.make(source, iteration=cin.iteration,
                                       messages_before=count, messages_after=len(new))


def _pairs(messages: list[Msg] | tuple[Msg, ...]) -> dict[str, tuple[int | None, int | None]]:
    """Per tool-call id: the index of the message that calls it, and of its result."""
    out: dict[str, tuple[int | None, int | None]] = {}
    for i, m in enumerate(messages):
        for block in m.content:
            if isinstance(block, ToolUseBlock):
                out[block.id] = (i, out.get(block.id, (None, None))[1])
            elif isinstance(block, ToolResultBlock):
                out[block.id] = (out.get(block.id, (None, None))[0], i)
    return out
