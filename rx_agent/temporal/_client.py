"""``TemporalAgent``: call an agent whose calls run as workflows on a task queue.

The caller's side of :mod:`._workflow`: a call starts the session's workflow (or, when
the session is paused for an answer, answers it with the ``resume`` update), then reads
the reply's events until the reply ends: from the run journal of the store the workers
share (``store=``; the reply is the run ``ctx.run_id``, and any process sharing the store
can follow it too), or else from the workflow itself with the ``poll`` update, a long
poll. The events are the agent's own, as ``agent.stream`` gives them; model chunks
arrive when their model call finished (each attempt is one activity). After the reply,
``ctx.agent_state`` is the session's state, as after a local call.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, NoReturn

from reactivex import Observable
from reactivex import abc as rxabc
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from .._rx import from_coroutine
from ..agent._binding import load_state
from ..agent._checks import AgentInputLike
from ..context import RuntimeContext
from ..event import AgentEvent, AgentResultEvent
from ..message import Msg
from ..session import ANONYMOUS_USER, JournalEntry, SessionBusyError, SessionKey, SessionStore
from ..session._journal import RunJournal, journal_of
from ._codec import attributes_of, decode_event, decode_state, encode_input
from ._driver import Timeouts
from ._errors import TemporalCallError
from ._workflow import WORKFLOW, workflow_id

__all__ = ["TemporalAgent"]

Json = dict[str, Any]


def _kind(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    return cause.type if isinstance(cause, ApplicationError) and cause.type else ""


class TemporalAgent:
    """An agent (by name) served by the workers of ``task_queue``.

    ``stream``, ``astream`` and ``acall`` take what ``ReActAgent``'s do (messages, a
    string, a resume event; a :class:`RuntimeContext` with the session) and give what
    they give; ``interrupt`` ends the session's running reply (or closes a paused one).
    ``timeouts`` bound the activities (:class:`Timeouts`).

    ``store``: the session store the workers' agents are built on (a SQLite file,
    Redis, PostgreSQL: shared by the callers and the workers). The replies' events then
    go through its run journal: each reply is the run ``ctx.run_id`` there, which any
    process sharing the store can follow (``subscribe_durable_events``, a server's
    resume routes), and the workflow keeps none of them. Without it the workflow keeps
    the events and the caller polls them; ``grace`` is then how long a finished
    workflow waits for a caller that has not read its last events.
    """

    idle = 2.0
    """Seconds without a journal entry after which a caller checks that the workflow
    still runs (one that ended without the reply's end is an error, not a hang)."""

    def __init__(self, client: Client, name: str, task_queue: str, *,
                 timeouts: Timeouts | None = None, grace: float = 60.0,
                 store: SessionStore | None = None) -> None:
        self.client = client
        self.name = name
        self.task_queue = task_queue
        self.timeouts = timeouts or Timeouts()
        self.grace = grace
        self.store = store
        self.journal: RunJournal | None = None
        if store is not None:
            self.journal = journal_of(store)
            if self.journal is None:
                raise TypeError(f"{type(store).__name__} keeps no run journal: pass the "
                                "built-in store the workers share (SQLite, Redis, "
                                "PostgreSQL), or no store to poll the workflow")

    def workflow_id(self, ctx: RuntimeContext | None) -> str:
        """The id of the workflow of ``ctx``'s session."""
        return workflow_id(self.name, ctx.user_id if ctx else None,
                           ctx.session_id if ctx else None)

    # -- calling -------------------------------------------------------------------------

    def stream(self, msgs: AgentInputLike = None,
               ctx: RuntimeContext | None = None) -> Observable[AgentEvent]:
        """A cold Observable of the call's events (each subscription is one call)."""

        async def body(observer: rxabc.ObserverBase[AgentEvent]) -> None:
            async for event in self.astream(msgs, ctx):
                observer.on_next(event)

        return from_coroutine(body)

    async def acall(self, msgs: AgentInputLike = None,
                    ctx: RuntimeContext | None = None) -> Msg:
        """Run one call; its final message."""
        result: Msg | None = None
        async for event in self.astream(msgs, ctx):
            if isinstance(event, AgentResultEvent):
                result = event.result
        if result is None:
            raise TemporalCallError(f"agent {self.name!r}'s reply ended without a result",
                                    workflow_id=self.workflow_id(ctx))
        return result

    async def astream(self, msgs: AgentInputLike = None,
                      ctx: RuntimeContext | None = None) -> AsyncIterator[AgentEvent]:
        """``async for event in agent.astream(...)``: the call's events."""
        ctx = ctx if ctx is not None else RuntimeContext()
        if ctx.session_id is None:  # as a local call: the agent's name is the session
            ctx.session_id = self.name
        if self.journal is not None:
            async for event in self._journaled(self.journal, encode_input(msgs), ctx):
                yield event
            return
        handle, reply, after = await self._begin(encode_input(msgs), ctx)
        while True:
            out = await self._poll(handle, reply, after)
            for event in out["events"]:
                yield decode_event(event)
            after = out["next"]
            end = out["end"]
            if end is not None:
                ctx.agent_state = decode_state(end["state"])
                error = end["error"]
                if error is not None:
                    raise TemporalCallError(f"{error['type']}: {error['message']}",
                                            kind=error["type"], workflow_id=handle.id)
                return

    async def _journaled(self, journal: RunJournal, given: Json,
                         ctx: RuntimeContext) -> AsyncIterator[AgentEvent]:
        """The reply's events from the journal: its run's entries past the head the
        journal had before the reply began, until the run's end."""
        key = SessionKey(ctx.user_id or ANONYMOUS_USER, ctx.session_id or self.name)
        last = await journal.head(key)
        handle, _, _ = await self._begin(given, ctx)
        async for entry in journal.follow_idle(key, last, run_id=ctx.run_id, idle=self.idle):
            if entry is None:
                if not await self._ended(handle):
                    continue
                # What it appended before it ended, then the end (or an error: none).
                async for late in journal.follow(key, last, run_id=ctx.run_id, live=False):
                    if late.is_end:
                        await self._end(late, handle, ctx, key)
                        return
                    yield late.event
                await self._ended_without_end(handle, ctx)
            last = entry.seq
            if entry.is_end:
                await self._end(entry, handle, ctx, key)
                return
            yield entry.event

    async def _end(self, entry: JournalEntry, handle: WorkflowHandle[Any, Any],
                   ctx: RuntimeContext, key: SessionKey) -> None:
        assert self.store is not None
        ctx.agent_state = await load_state(self.store, key)  # saved before the end
        end = json.loads(entry.data)
        if end.get("status") != "completed":
            raise TemporalCallError(str(end.get("error")), kind=end.get("kind") or "",
                                    workflow_id=handle.id)

    @staticmethod
    async def _ended(handle: WorkflowHandle[Any, Any]) -> bool:
        try:
            status = (await handle.describe()).status
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return True
            raise
        return status is not None and status is not WorkflowExecutionStatus.RUNNING

    async def _ended_without_end(self, handle: WorkflowHandle[Any, Any],
                                 ctx: RuntimeContext) -> NoReturn:
        try:
            await handle.result()
            why = "it completed"
        except Exception as exc:  # its failure is the reason
            why = f"it failed: {getattr(exc, 'cause', None) or exc}"
        raise TemporalCallError(
            f"the workflow of session {ctx.session_id!r} ended before the end of run "
            f"{ctx.run_id!r} reached the run journal ({why}); are the workers built on the "
            "same store as this caller?", kind="NoRunEnd", workflow_id=handle.id)

    async def interrupt(self, ctx: RuntimeContext | None = None,
                        msg: str | None = None) -> bool:
        """End the running reply of ``ctx``'s session with ``INTERRUPTED`` (a paused
        session is closed); whether its workflow was running."""
        handle = self.client.get_workflow_handle(self.workflow_id(ctx))
        try:
            await handle.signal("interrupt", msg)
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True

    # -- the workflow --------------------------------------------------------------------

    async def _begin(self, given: Json, ctx: RuntimeContext) -> tuple[WorkflowHandle[Any, Any],
                                                                      int, int]:
        """Start the session's workflow, or answer its pause: the handle, the reply's
        number and where its events start."""
        wid = self.workflow_id(ctx)
        start = {"agent": self.name, "input": given, "session_id": ctx.session_id,
                 "user_id": ctx.user_id, "run_id": ctx.run_id,
                 "timeouts": self.timeouts.to_json(), "grace": self.grace,
                 "journal": self.journal is not None,
                 "attributes": attributes_of(ctx, warn=True)}
        for _ in range(100):
            try:
                handle = await self.client.start_workflow(
                    WORKFLOW, start, id=wid, task_queue=self.task_queue,
                    id_conflict_policy=WorkflowIDConflictPolicy.FAIL)
                return handle, 0, 0
            except WorkflowAlreadyStartedError:
                pass
            handle = self.client.get_workflow_handle(wid)
            try:
                answer = await handle.execute_update(
                    "resume", args=[given, ctx.run_id, start["attributes"]])
                return handle, answer["reply"], answer["after"]
            except WorkflowUpdateFailedError as exc:
                if _kind(exc) != "Finishing":
                    raise SessionBusyError(ctx.session_id or self.name,
                                           user_id=ctx.user_id) from exc
            except RPCError as exc:
                if exc.status is not RPCStatusCode.NOT_FOUND:
                    raise
            # The session's last workflow is ending (its caller read everything).
            with contextlib.suppress(Exception):  # its outcome is its caller's
                await handle.result()
        raise SessionBusyError(ctx.session_id or self.name, user_id=ctx.user_id)

    async def _poll(self, handle: WorkflowHandle[Any, Any], reply: int, after: int) -> Json:
        try:
            out: Json = await handle.execute_update("poll", args=[reply, after])
            return out
        except RPCError as exc:
            if exc.status is not RPCStatusCode.NOT_FOUND:
                raise
        # The workflow ended meanwhile (its grace passed): read what it kept.
        kept: Json = await handle.query("read", args=[reply, after])
        return kept
