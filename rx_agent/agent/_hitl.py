"""Human in the loop: permission decisions and checks on resume input.

The flow itself (pausing a batch, resuming it) lives in :mod:`._acting`; these are
the pure parts it relies on. Permission decisions are in :mod:`rx_agent.permissions`.
"""

from __future__ import annotations

from collections import Counter
from typing import TypeAlias

from ..context import AgentState
from ..errors import RxAgentError
from ..event import ExternalExecutionResultEvent, UserConfirmResultEvent
from ..message import Role, ToolResultState, ToolUseBlock
from ._results import close_unanswered

__all__ = [
    "ResumeError",
    "ResumeEvent",
    "apply_edits",
    "check_resume",
    "close_pending",
]

ResumeEvent: TypeAlias = UserConfirmResultEvent | ExternalExecutionResultEvent


class ResumeError(RxAgentError, ValueError):
    """A resume input does not fit the paused reply (wrong ids, kind or reply id)."""


def check_resume(state: AgentState, event: ResumeEvent, session_id: str) -> None:
    """Validate a resume input against the paused reply; raise before any change."""
    confirm = isinstance(event, UserConfirmResultEvent)
    pending = state.pending
    what = "user confirmation" if confirm else "external tool results"
    if pending is None:
        raise ResumeError(f"session {session_id!r} is not paused: it is not waiting for {what}")
    if pending.kind != ("confirm" if confirm else "external"):
        waiting = "user confirmation" if pending.kind == "confirm" else "external results"
        raise ResumeError(f"session {session_id!r} is waiting for {waiting}, not for {what}")
    if event.reply_id != pending.reply_id:
        raise ResumeError(
            f"reply_id {event.reply_id!r} does not match the paused reply {pending.reply_id!r}"
        )
    if isinstance(event, UserConfirmResultEvent):
        ids = [c.tool_call.id for c in event.confirm_results]
    else:
        ids = [r.id for r in event.tool_results]
    if not ids:
        raise ResumeError(f"the {type(event).__name__} has no results")
    seen = set(ids)
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise ResumeError(f"duplicate tool call ids: {', '.join(duplicates)}")
    waiting_ids = [c.id for c in pending.tool_calls]
    unknown = [i for i in ids if i not in waiting_ids]
    if unknown:
        raise ResumeError(
            f"tool call ids not pending: {', '.join(unknown)} (pending: {', '.join(waiting_ids)})"
        )
    missing = [i for i in waiting_ids if i not in seen]
    if missing:
        raise ResumeError(f"no answer for pending tool calls: {', '.join(missing)}")
    if isinstance(event, UserConfirmResultEvent):
        names = {c.id: c.name for c in pending.tool_calls}
        for result in event.confirm_results:
            if result.tool_call.name != names[result.tool_call.id]:
                raise ResumeError(
                    f"tool call {result.tool_call.id!r} is a call to "
                    f"{names[result.tool_call.id]!r}; the confirmation names "
                    f"{result.tool_call.name!r}"
                )


def apply_edits(state: AgentState, edited: dict[str, ToolUseBlock]) -> None:
    """Store the arguments the user approved, so the history shows what ran."""
    for msg in reversed(state.context):
        if msg.role is not Role.ASSISTANT:
            continue
        for i, block in enumerate(msg.content):
            if isinstance(block, ToolUseBlock) and block.id in edited:
                new = edited[block.id]
                if new.input != block.input:
                    msg.content[i] = block.model_copy(
                        update={"input": dict(new.input), "raw_input": None}
                    )


def close_pending(state: AgentState) -> None:
    """Close a paused reply's calls with INTERRUPTED results (no stream to tell)."""
    pending = state.pending
    if pending is None:
        return
    state.pending = None
    close_unanswered(state, ToolResultState.INTERRUPTED,
                     "Interrupted while waiting for an answer.",
                     only={c.id for c in pending.batch})
