"""An agent whose calls run as workflows, in the place of the agent: what ``rx-agent
serve --engine temporal`` serves.

:func:`temporal_engine` gives a copy of the agent (the same name, plan, tools and store,
for what a server shows and checks) whose ``stream`` starts the call on the task queue
(:class:`~._client.TemporalAgent`) and whose ``interrupt`` signals the session's
workflow. The workers run the calls; this process only relays their events: from the
run journal of the agent's store when it is a durable one the workers share (the
workflow journals each call itself, so the server does not, and a client reconnects to
any server with ``Last-Event-ID``), else from the workflow.
"""

from __future__ import annotations

import asyncio
import dataclasses
import weakref
from typing import Any

from pydantic import BaseModel
from reactivex import Observable
from reactivex import abc as rxabc

from .._rx import from_coroutine, running_loop
from ..agent._checks import AgentInputLike
from ..agent._slots import SessionSlots
from ..agent.react import ReActAgent
from ..context import RuntimeContext
from ..event import AgentEvent
from ..message import Msg
from ..session import ANONYMOUS_USER, SessionKey
from ..session._journal import journal_of
from ._client import TemporalAgent
from ._connect import connect
from ._driver import Timeouts

__all__ = ["TemporalEngineAgent", "check_reachable", "temporal_engine"]


class TemporalEngineAgent(ReActAgent):
    """``agent`` with its calls started as workflows (see the module docstring)."""

    _address: str
    _task_queue: str
    _namespace: str
    _timeouts: Timeouts
    _remote: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TemporalAgent]

    async def _caller(self) -> TemporalAgent:
        """The caller of this loop (a Temporal client belongs to the loop it made)."""
        loop = asyncio.get_running_loop()
        remote = self._remote.get(loop)
        if remote is None:
            client = await connect(self._address, namespace=self._namespace)
            remote = self._remote[loop] = TemporalAgent(
                client, self.name, self._task_queue, timeouts=self._timeouts,
                store=self.session_store if self.journals_runs else None)
        return remote

    @property
    def journals_runs(self) -> bool:
        """Whether each call's events reach the store's run journal without the server
        (the workflow appends them): a durable store with a journal."""
        return self.config.durable and journal_of(self.session_store) is not None

    def stream(self, msgs: AgentInputLike = None, ctx: RuntimeContext | None = None, *,
               structured_model: type[BaseModel] | None = None) -> Observable[AgentEvent]:
        if structured_model is not None:
            raise NotImplementedError("a call on Temporal takes no structured_model yet")
        ctx = ctx if ctx is not None else RuntimeContext()

        async def body(observer: rxabc.ObserverBase[AgentEvent]) -> None:
            remote = await self._caller()
            async for event in remote.astream(msgs, ctx):
                observer.on_next(event)
            self._mirror(ctx)

        return from_coroutine(body)

    def _mirror(self, ctx: RuntimeContext) -> None:
        """Keep the reply's state in this process's store when it is its own (in memory):
        what the server reads of the session (a paused reply's id) is then there."""
        store = self.session_store
        if ctx.agent_state is not None and not self.config.durable:
            key = SessionKey(ctx.user_id or ANONYMOUS_USER, ctx.session_id or self.name)
            store.save(key, ctx.agent_state)

    def interrupt(self, ctx: RuntimeContext | None = None, msg: Msg | str | None = None) -> bool:
        note = msg.text if isinstance(msg, Msg) else msg
        if running_loop() is not None:
            raise RuntimeError("interrupt() of a Temporal-run agent blocks; call it on a "
                               "thread (asyncio.to_thread)")

        async def signal() -> bool:
            return await (await self._caller()).interrupt(ctx, note)

        return asyncio.run(signal())


def temporal_engine(agent: ReActAgent, address: str, task_queue: str, *,
                    namespace: str = "default",
                    timeouts: Timeouts | None = None) -> TemporalEngineAgent:
    """``agent`` with each call started as a workflow on ``task_queue`` at ``address``
    (workers started with the same factory run them)."""
    engine = TemporalEngineAgent.__new__(TemporalEngineAgent)
    engine._plugins = agent._plugins
    engine._config = dataclasses.replace(agent._config)
    engine._slots = SessionSlots()
    engine._address = address
    engine._task_queue = task_queue
    engine._namespace = namespace
    engine._timeouts = timeouts or Timeouts()
    engine._remote = weakref.WeakKeyDictionary()
    return engine


def check_reachable(address: str, namespace: str = "default") -> None:
    """Raise :class:`~._errors.TemporalUnavailableError` unless a server answers."""

    async def probe() -> Any:
        return await connect(address, namespace=namespace)

    asyncio.run(probe())
