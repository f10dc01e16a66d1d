"""``AgentWorkflow``: one session's call (and the replies that resume it) as a workflow.

The workflow builds a copy of the worker's agent with an in-memory store (its history is
its checkpoint), loads the session from the agent's own store (an activity), runs the
reply with :class:`~._driver.TemporalDriver` and saves the state back (an activity).
A reply that pauses (a confirmation, external tools) leaves the workflow waiting for the
``resume`` update: no worker is busy meanwhile, and the wait survives any worker.

The event relay, two ways (the caller chooses, :mod:`._client`):

- **the run journal** (a caller given the store the workers share): each reply is a run
  of the session's journal, its events appended in batches by a local activity as the
  reply makes them, its end after the state is saved. Any process sharing the store
  reads them (``subscribe_durable_events``, a server's resume routes); the workflow
  keeps none of them.
- **in the workflow** (no shared store): every event of every reply is kept, in order,
  in the workflow; the caller reads them with the ``poll`` update, a long poll that
  answers as soon as there is something past what it read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from .._record import STAMPS
    from ..agent._calling import stream_driven
    from ..agent._slots import SessionSlots
    from ..agent.react import ReActAgent
    from ..context import AgentState, RuntimeContext
    from ..event import AgentEvent, AgentResultEvent
    from ..message import GenerateReason, Msg
    from ..session import ANONYMOUS_USER, InMemorySessionStore, SessionKey
    from ..session._journal_writer import end_item
    from ._activities import (
        JOURNAL_APPEND,
        NO_SUCH_AGENT,
        SCHEDULE_GATE,
        SESSION_LOAD,
        SESSION_SAVE,
    )
    from ._codec import decode_input, decode_state, encode_event, encode_state
    from ._driver import TemporalDriver, Timeouts
    from ._registry import registered

__all__ = ["PAUSES", "WORKFLOW", "AgentWorkflow", "workflow_id"]

WORKFLOW = "rx_agent.AgentWorkflow"
PAUSES = frozenset({GenerateReason.TOOL_SUSPENDED, GenerateReason.PERMISSION_ASKING})
"""The ends of a reply that wait for the caller's answer (human in the loop)."""

Json = dict[str, Any]


def workflow_id(agent: str, user_id: str | None, session_id: str | None) -> str:
    """One session, one workflow id: two calls of a session never run at once."""
    return f"rx-agent/{agent}/{user_id or ANONYMOUS_USER}/{session_id or agent}"


class _Stamps:
    """Ids, the clock and random draws from the workflow, so a replay makes the same
    events and the same retry delays."""

    __slots__ = ("counter", "draws", "prefix")

    def __init__(self) -> None:
        self.prefix = workflow.uuid4().hex[:12]
        self.counter = itertools.count(1)
        self.draws = workflow.random()

    def new_id(self) -> str:
        return f"{self.prefix}{next(self.counter):06x}"

    def now(self) -> float:
        return workflow.time()

    def random(self) -> float:
        return self.draws.random()


def _workflow_agent(agent: ReActAgent) -> ReActAgent:
    """The worker's agent for one workflow: the same settings, hooks and tools, an
    in-memory store and slots of its own, no loop-lag watchdog (no threads here)."""
    copy = type(agent).__new__(type(agent))
    copy._plugins = agent._plugins
    copy._config = dataclasses.replace(agent._config, session_store=InMemorySessionStore(),
                                       durable=False, loop_lag=None)
    copy._slots = SessionSlots()
    return copy


async def _save(ref: Json, state: AgentState | None, timeout: timedelta) -> None:
    """Store the session's state in the agent's own store (a local activity: it runs
    on the workflow's worker, with no round trip through the task queue)."""
    await workflow.execute_local_activity(SESSION_SAVE, {**ref, "state": encode_state(state)},
                                    start_to_close_timeout=timeout)


@workflow.defn(name=WORKFLOW)
class AgentWorkflow:
    """A session's call: its replies, their events, the pause between them."""

    def __init__(self) -> None:
        self.events: list[Json] = []
        self.ends: list[Json] = []  # per reply: where its events end, how it ended
        self.waiting = False  # paused, for the ``resume`` update
        self.answer: Any = None
        self.read = 0  # how far the caller read (the workflow ends once it read all)
        self.agent: ReActAgent | None = None
        self.ctx: RuntimeContext | None = None
        self.stop = False
        self.finished = False
        # The journal relay: the current reply's run, its next event's index, the entries
        # the flusher has yet to append (per run), and whether the last reply ended.
        self.journaled = False
        self.run_id = ""
        self.index = 0
        self.count = 0  # events of every reply (the ``state`` query)
        self.pending: list[list[Any]] = []
        self.closed = False

    @workflow.run
    async def run(self, start: Json) -> Json:
        STAMPS.set(_Stamps())
        name = start["agent"]
        found = registered(workflow.info().task_queue, name)
        if found is None:
            raise ApplicationError(f"no worker of task queue {workflow.info().task_queue!r} "
                                   f"serves agent {name!r}", type=NO_SUCH_AGENT,
                                   non_retryable=True)
        agent = self.agent = _workflow_agent(found)
        timeouts = Timeouts.from_json(start["timeouts"])
        session_id = start.get("session_id")
        scheduled = start.get("schedule")
        if scheduled is not None:
            # A scheduled run: a session of its own unless the schedule names one.
            info = workflow.info()
            session_id = session_id or info.workflow_id
            most = scheduled.get("max_parallel")
            if most is not None:
                others = await workflow.execute_local_activity(
                    SCHEDULE_GATE, {"schedule": scheduled["id"],
                                    "workflow_id": info.workflow_id},
                    start_to_close_timeout=timedelta(seconds=timeouts.model))
                if others >= most:
                    return {"error": None, "replies": 0,
                            "skipped": f"{others} runs of the schedule going (at most {most})"}
        ctx = self.ctx = RuntimeContext(session_id, start.get("user_id"), start.get("run_id"),
                                        attributes=start.get("attributes"))
        session = SessionKey(ctx.user_id or ANONYMOUS_USER, ctx.session_id or agent.name)
        ref = {"agent": name, "user_id": session.user_id, "session_id": session.session_id}
        brief = timedelta(seconds=timeouts.model)  # a session load or save
        self.journaled = bool(start.get("journal"))
        stored = decode_state(await workflow.execute_local_activity(
            SESSION_LOAD, {**ref, "journal": self.journaled}, start_to_close_timeout=brief))
        if stored is not None:
            agent.session_store.save(session, stored)
        driver = TemporalDriver(name, agent.config, timeouts)
        given: Any = decode_input(start["input"])
        flusher = (asyncio.get_running_loop().create_task(self._flush(ref, brief))
                   if self.journaled else None)
        while True:
            self.run_id, self.index = ctx.run_id, 0
            final, error = await self._reply(agent, driver, given, ctx)
            state = ctx.agent_state
            await _save(ref, state, brief)
            paused = final is not None and final.generate_reason in PAUSES
            self.ends.append({"at": len(self.events), "error": error, "paused": paused,
                              "state": encode_state(state)})
            if self.journaled:  # after the save: a reader of the end finds the state stored
                self._end_run(error)
            if error is not None or not paused:
                break
            self.waiting = True
            await workflow.wait_condition(lambda: self.answer is not None or self.stop)
            self.waiting = False
            if self.answer is None:  # interrupted while paused: the session is closed
                agent.interrupt(ctx)
                closed = agent.session_store.load(session)
                await _save(ref, closed if isinstance(closed, AgentState) else None, brief)
                break
            given, self.answer = self.answer, None
        self.finished = True
        if flusher is not None:
            self.closed = True
            await flusher
        # The caller reads the last events; a caller that went away is not waited for.
        grace = start.get("grace", 60.0)
        if grace > 0 and not self.journaled:
            await workflow.wait_condition(lambda: self.read >= len(self.events),
                                          timeout=timedelta(seconds=grace))
        await workflow.wait_condition(workflow.all_handlers_finished)
        last = self.ends[-1]
        kept: Json = last["state"] or {}
        context = kept.get("context") or [{}]
        return {"error": last["error"], "replies": len(self.ends), "final": context[-1]}

    async def _reply(self, agent: ReActAgent, driver: TemporalDriver, given: Any,
                     ctx: RuntimeContext) -> tuple[Msg | None, Json | None]:
        """Run one reply; its final message, or the error it ended with."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        final: list[Msg] = []
        events = self.events
        journaled = self.journaled

        def on_next(event: AgentEvent) -> None:
            if isinstance(event, AgentResultEvent):
                final[:] = [event.result]
            self.count += 1
            if journaled:
                self._note(event)
            else:
                events.append(encode_event(event))

        def on_error(exc: Exception) -> None:
            if not done.done():
                done.set_exception(exc)

        def on_completed() -> None:
            if not done.done():
                done.set_result(None)

        subscription = stream_driven(agent, driver, given, ctx).subscribe(
            on_next, on_error, on_completed)
        try:
            await done
        except Exception as exc:
            return None, {"type": type(exc).__name__, "message": str(exc)}
        finally:
            subscription.dispose()
        if not final:
            return None, {"type": "NoResultError", "message": "the reply ended without a result"}
        return final[0], None

    # -- the journal relay ---------------------------------------------------------------

    def _queue(self, item: list[Any]) -> None:
        pending = self.pending
        if pending and pending[-1][0] == self.run_id:
            pending[-1][1].append(item)
        else:
            pending.append([self.run_id, [item]])

    def _note(self, event: AgentEvent) -> None:
        # The JSON a server sends for the event (``model_dump_json``), the workflow's clock.
        data = type(event).__pydantic_serializer__.to_json(event).decode()
        self._queue([self.index, event.type, data, workflow.time()])
        self.index += 1

    def _end_run(self, error: Json | None) -> None:
        if error is None:
            end = end_item(self.index, "completed", at=workflow.time())
        else:
            end = end_item(self.index, "failed", f"{error['type']}: {error['message']}",
                           kind=error["type"], at=workflow.time())
        self._queue(list(end))

    async def _flush(self, ref: Json, timeout: timedelta) -> None:
        """Append what the replies made, a batch per turn of the workflow (the events
        between two effects), one append at a time, in order, until the last reply ended."""
        while True:
            await workflow.wait_condition(lambda: bool(self.pending) or self.closed)
            if not self.pending:
                return
            runs, self.pending = self.pending, []
            # Retried while the journal is unreachable, up to ``timeout``; then the
            # workflow fails (at its end: the session's state is saved meanwhile).
            await workflow.execute_local_activity(JOURNAL_APPEND, {**ref, "runs": runs},
                                                  start_to_close_timeout=timeout,
                                                  schedule_to_close_timeout=timeout)

    # -- the caller's side --------------------------------------------------------------

    @workflow.update(name="poll")
    async def poll(self, reply: int, after: int) -> Json:
        """The events of reply ``reply`` past position ``after`` (a long poll: it answers
        when there is at least one, or the reply ended); ``end`` once it ended."""
        await workflow.wait_condition(
            lambda: len(self.events) > after or len(self.ends) > reply)
        out = self._slice(reply, after)
        self.read = max(self.read, out["next"])
        return out

    @workflow.query(name="read")
    def read_events(self, reply: int, after: int) -> Json:
        """What ``poll`` answers, without waiting (a workflow that already ended)."""
        return self._slice(reply, after)

    def _slice(self, reply: int, after: int) -> Json:
        if len(self.ends) > reply:
            end = self.ends[reply]
            stop = end["at"]
        else:
            end, stop = None, len(self.events)
        return {"events": self.events[after:stop], "end": end, "next": stop}

    @workflow.update(name="resume")
    async def resume(self, given: Json, run_id: str | None = None,
                     attributes: Json | None = None) -> Json:
        """Answer the paused reply: the next reply's number and where its events start
        (``run_id``: the next reply's run in the journal, the answering call's; its
        context's ``attributes`` are put in the workflow's)."""
        self.answer = decode_input(given)
        if self.ctx is not None:
            if run_id:
                self.ctx.run_id = run_id
            for key, value in (attributes or {}).items():
                self.ctx.put(key, value)
        return {"reply": len(self.ends), "after": len(self.events)}

    @resume.validator
    def _resume_ok(self, given: Json, run_id: str | None = None,
                   attributes: Json | None = None) -> None:
        if self.finished:
            raise ApplicationError("the session's last call is ending", type="Finishing",
                                   non_retryable=True)
        if not self.waiting or self.answer is not None:
            raise ApplicationError("the session's call is running, not paused for an answer",
                                   type="SessionBusy", non_retryable=True)

    @workflow.signal(name="interrupt")
    def interrupt(self, note: str | None = None) -> None:
        """``agent.interrupt()``: the running reply ends INTERRUPTED; a paused one closes."""
        if self.waiting:
            self.stop = True
        elif self.agent is not None:
            self.agent.interrupt(self.ctx, note)

    @workflow.query(name="state")
    def state(self) -> Json:
        return {"replies": len(self.ends), "events": self.count, "waiting": self.waiting}
