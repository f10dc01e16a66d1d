"""The tool journal: what a durable session knows of a side-effect tool's call while
it runs, so a worker that dies mid-call never makes the effect happen twice.

It lives in the metadata of the assistant message that made the calls, under
:data:`JOURNAL_KEY`: one entry per call id of a ``side_effect=True`` tool,

* ``{"state": "started", "tool": name}``, written and checkpointed to the session
  right before the tool's function is entered (``BatchFlags.starting``), in the same
  save as the call's input: the message's tool call holds the arguments that run
  (a hook's edit is stored there first);
* ``{"state": "finished", "tool": name, "result": {...}}``, the result block,
  written and checkpointed when the tool returns, before its end event reaches
  anybody and before its result enters the context.

When the batch's results enter the context (the batch closes) the journal has
served: its entries go (:func:`forget`), saved with the results at the next
checkpoint, so a stored conversation keeps no journal of calls that were answered.

A session loaded with journal entries for calls that have no result was left by a
worker that stopped (:func:`recover_journaled`, run by ``DurableHold.recover``): a
finished call gets its journaled result back (the tool is not run again); a started
one gets :data:`MAY_HAVE_RUN_TEXT`, since nobody can know whether its effect took
place. Calls without an entry get the usual "interrupted" repair
(:func:`~._results.close_unanswered`).
"""

from __future__ import annotations

from typing import Any

from ..context import AgentState
from ..message import Msg, Role, ToolResultBlock, ToolResultState, ToolUseBlock
from ..session import mark_changed

__all__ = ["FINISHED", "JOURNAL_KEY", "MAY_HAVE_RUN_TEXT", "STARTED", "batch_message",
           "forget", "journal_of", "mark_finished", "mark_started", "recover_journaled"]

JOURNAL_KEY = "tool_journal"
STARTED = "started"
FINISHED = "finished"

MAY_HAVE_RUN_TEXT = (
    "Unknown outcome: the worker running this tool stopped before it reported a result. "
    "The tool has side effects, so it was not run again: it may have run, in full or in "
    "part. Check whether it took effect (or ask the user) before calling it again."
)
"""The result recovery writes for a side-effect call that started and never finished."""


def journal_of(msg: Msg) -> dict[str, dict[str, Any]] | None:
    """The journal kept in ``msg`` (an assistant message), if any."""
    metadata = msg.metadata
    if not metadata:
        return None
    journal = metadata.get(JOURNAL_KEY)
    return journal if isinstance(journal, dict) else None


def batch_message(state: AgentState, call_id: str) -> Msg | None:
    """The assistant message whose batch holds ``call_id``: the latest message that
    made calls (models reuse ids such as ``call_1`` across turns; an older one is
    never the running batch's)."""
    for msg in reversed(state.context):
        if msg.role is Role.ASSISTANT and msg.tool_calls:
            return msg if any(c.id == call_id for c in msg.tool_calls) else None
    return None


def _entries(msg: Msg) -> dict[str, dict[str, Any]]:
    metadata = msg.metadata
    if metadata is None:
        metadata = msg.metadata = {}
    journal = metadata.get(JOURNAL_KEY)
    if not isinstance(journal, dict):
        journal = metadata[JOURNAL_KEY] = {}
    return journal


def mark_started(state: AgentState, call: ToolUseBlock) -> bool:
    """Journal that ``call`` is about to enter its tool; whether its message was found."""
    msg = batch_message(state, call.id)
    if msg is None:
        return False
    _entries(msg)[call.id] = {"state": STARTED, "tool": call.name}
    return True


def mark_finished(state: AgentState, block: ToolResultBlock) -> bool:
    """Journal the result of a started call; whether its message was found."""
    msg = batch_message(state, block.id)
    if msg is None:
        return False
    _entries(msg)[block.id] = {"state": FINISHED, "tool": block.name,
                               "result": block.model_dump(mode="json")}
    return True


def forget(msg: Msg) -> None:
    """The batch's results are in the context: its journal goes (``metadata`` back to
    what it was without one)."""
    metadata = msg.metadata
    if metadata and JOURNAL_KEY in metadata:
        del metadata[JOURNAL_KEY]
        if not metadata:
            msg.metadata = None


def recover_journaled(state: AgentState, start: int = 0) -> list[ToolResultBlock]:
    """Answer the journaled calls a stopped worker left without a result; those
    results, in call order. ``start``: the first ``start`` messages are known to hold
    no open call (a journal there has served: it is only dropped).

    A finished call gets its journaled result (the tool ran; it is not run again), a
    started one :data:`MAY_HAVE_RUN_TEXT` (INTERRUPTED). Each result goes right after
    its batch's results, before whatever came next; every journal scanned is dropped.
    """
    context = state.context
    written: list[ToolResultBlock] = []
    i = start
    while i < len(context):
        msg = context[i]
        i += 1
        if msg.role is not Role.ASSISTANT:
            continue
        journal = journal_of(msg)
        if journal is None:
            continue
        answered: set[str] = set()
        end = i
        while end < len(context) and context[end].role is Role.TOOL:
            answered.update(b.id for b in context[end].tool_results)
            end += 1
        added: list[Msg] = []
        for call in msg.tool_calls:
            entry = journal.get(call.id)
            if entry is None or call.id in answered:
                continue
            block = _recovered(call, entry)
            written.append(block)
            added.append(Msg.make(Role.TOOL, [block], block.name))
        forget(msg)
        mark_changed(state, msg)  # edited in place: the next save rewrites it
        context[end:end] = added
        i = end + len(added)
    return written


def _recovered(call: ToolUseBlock, entry: Any) -> ToolResultBlock:
    if isinstance(entry, dict) and entry.get("state") == FINISHED:
        try:
            block = ToolResultBlock.model_validate(entry.get("result"))
        except ValueError:
            block = None  # an unreadable record: what is known is that it started
        if block is not None and block.id == call.id:
            return block
    return ToolResultBlock(id=call.id, name=call.name, output=MAY_HAVE_RUN_TEXT,
                           state=ToolResultState.INTERRUPTED)
