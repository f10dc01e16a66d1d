"""The activities a worker runs for its agents: one model attempt, one tool call,
loading and saving a session in the agent's own store, and appending to its journal.

Each runs on the worker that picks it up, against the agent the worker's factory built
(:class:`Activities` holds them by name). A model attempt and a tool call heartbeat
while they run, so a worker that dies is noticed after the heartbeat timeout and the
activity is scheduled again on another worker; a finished one is recorded in the
workflow's history and never runs again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from .._rx import aiter_observable
from ..agent._binding import load_state, save_state
from ..agent.react import ReActAgent
from ..context import RuntimeContext
from ..event import AgentEvent
from ..message import ToolUseBlock
from ..model.base import ChatModel
from ..session import SessionKey
from ..session._journal import RunJournal, journal_of
from ..tool import execute
from ._codec import (
    decode_msg,
    decode_options,
    decode_state,
    encode_block,
    encode_chunk,
    encode_event,
    encode_state,
)

__all__ = ["JOURNAL_APPEND", "MODEL_CALL", "NO_SUCH_AGENT", "SCHEDULE_GATE", "SESSION_LOAD",
           "SESSION_SAVE", "TOOL_CALL", "Activities"]

MODEL_CALL = "rx_agent.model_call"
TOOL_CALL = "rx_agent.tool_call"
SESSION_LOAD = "rx_agent.session_load"
SESSION_SAVE = "rx_agent.session_save"
SCHEDULE_GATE = "rx_agent.schedule_gate"
JOURNAL_APPEND = "rx_agent.journal_append"
NO_JOURNAL = "NoRunJournal"
NO_SUCH_AGENT = "NoSuchAgent"
MODEL_FAILED = "ModelCallFailed"

T = TypeVar("T")
Json = dict[str, Any]


async def _beating(work: Awaitable[T]) -> T:
    """Await ``work`` with heartbeats: at a third of the heartbeat timeout (a dead
    worker is noticed after one timeout) and so that cancellation reaches it."""
    timeout = activity.info().heartbeat_timeout
    interval = timeout.total_seconds() / 3 if timeout else 10.0
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait((task,), timeout=interval)
            if done:
                return task.result()
            activity.heartbeat()
    except BaseException:
        task.cancel()
        raise


class Activities:
    """The activities of one worker, for the agents its factories built."""

    def __init__(self, agents: Mapping[str, ReActAgent]) -> None:
        self.agents = dict(agents)

    def all(self) -> list[Any]:
        """The activity functions to register on the worker."""
        return [self.model_call, self.tool_call, self.session_load, self.session_save,
                self.schedule_gate, self.journal_append]

    def agent(self, name: str) -> ReActAgent:
        agent = self.agents.get(name)
        if agent is None:
            raise ApplicationError(
                f"this worker serves no agent {name!r} (it serves {sorted(self.agents)})",
                type=NO_SUCH_AGENT, non_retryable=True)
        return agent

    @staticmethod
    def _journal(agent: ReActAgent) -> RunJournal:
        journal = journal_of(agent.session_store)
        if journal is None or not agent.config.durable:
            raise ApplicationError(
                f"agent {agent.name!r} is built on a session store its callers cannot share "
                f"({type(agent.session_store).__name__}), so they cannot read its run journal: "
                "build it on a SQLite file, Redis or PostgreSQL (rx-agent worker --store URL), "
                "or call it without store=", type=NO_JOURNAL, non_retryable=True)
        return journal

    @staticmethod
    def model(agent: ReActAgent, which: str) -> ChatModel:
        if which == "model":
            return agent.model
        if which == "fallback" and agent.fallback_model is not None:
            return agent.fallback_model
        for model in (agent.model, agent.fallback_model):
            if model is not None and model.name == which:
                return model
        raise ApplicationError(
            f"agent {agent.name!r} has no model {which!r} on this worker (a middleware that "
            "swaps models must swap in the agent's model or its fallback_model)",
            type=NO_SUCH_AGENT, non_retryable=True)

    @activity.defn(name=MODEL_CALL)
    async def model_call(self, request: Json) -> list[Json]:
        """One attempt of a model call: every chunk the model streamed."""
        agent = self.agent(request["agent"])
        model = self.model(agent, request["model"])
        messages = [decode_msg(m) for m in request["messages"]]
        options = decode_options(request["options"])
        stream = model.stream(messages, request["tools"], options)

        async def collect() -> list[Json]:  # the runtime's one bridge (disposed on cancel)
            return [encode_chunk(chunk) async for chunk in aiter_observable(stream)]

        try:
            return await _beating(collect())
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # The runtime's own retry policy decides (the activity is never retried by
            # Temporal): it needs the failure's retryability and retry_after.
            raise ApplicationError(
                str(exc) or type(exc).__name__,
                {"type": type(exc).__name__,
                 "retryable": bool(getattr(exc, "retryable", True)),
                 "retry_after": getattr(exc, "retry_after", None)},
                type=MODEL_FAILED, non_retryable=True) from exc

    @activity.defn(name=TOOL_CALL)
    async def tool_call(self, request: Json) -> Json:
        """One tool call, with the tool's own middlewares: its result and its events."""
        agent = self.agent(request["agent"])
        call = ToolUseBlock.model_validate(request["call"])
        ctx = RuntimeContext(request.get("session_id"), request.get("user_id"),
                             request.get("run_id"), attributes=request.get("attributes")
                             )._with_fallback(agent.tool_execution_context)
        events: list[AgentEvent] = []  # list.append is safe from a sync tool's thread
        block = await _beating(execute(agent.toolkit, call, ctx, events.append,
                                       request.get("source"), request["reply_id"],
                                       request.get("timeout")))
        return {"result": encode_block(block), "events": [encode_event(e) for e in events]}

    @activity.defn(name=SESSION_LOAD)
    async def session_load(self, request: Json) -> Json | None:
        """The session's stored state in the agent's store (``None``: a new session);
        with ``journal``, first that the store keeps the run journal the caller reads."""
        agent = self.agent(request["agent"])
        if request.get("journal"):
            self._journal(agent)
        key = SessionKey(request["user_id"], request["session_id"])
        return encode_state(await load_state(agent.session_store, key))

    @activity.defn(name=SESSION_SAVE)
    async def session_save(self, request: Json) -> None:
        """Store the state a reply left in the agent's store."""
        agent = self.agent(request["agent"])
        state = decode_state(request["state"])
        if state is None:
            return
        saved = save_state(agent.session_store, SessionKey(request["user_id"],
                                                           request["session_id"]), state)
        if saved is not None:
            await saved

    @activity.defn(name=JOURNAL_APPEND)
    async def journal_append(self, request: Json) -> int:
        """Append a workflow's batch to the session's journal in the agent's store: per
        run, its next entries. A batch already there is skipped: a worker that died after
        appending, before the workflow recorded it, leaves it to be appended again."""
        journal = self._journal(self.agent(request["agent"]))
        key = SessionKey(request["user_id"], request["session_id"])
        seq = 0
        for run_id, items in request["runs"]:
            # A batch is appended in one atomic step, so its first entry tells.
            if await journal.locate(key, run_id, items[0][0]) is None:
                seq = await journal.append(key, run_id, [tuple(item) for item in items])
        return seq

    @activity.defn(name=SCHEDULE_GATE)
    async def schedule_gate(self, request: Json) -> int:
        """How many other runs of the schedule are going (Temporal's visibility)."""
        query = (f'TemporalScheduledById = "{request["schedule"]}" AND '
                 f'ExecutionStatus = "Running" AND WorkflowId != "{request["workflow_id"]}"')
        counted = await activity.client().count_workflows(query)
        return int(counted.count)
