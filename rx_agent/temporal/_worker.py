"""``AgentWorker``: a Temporal worker that runs agents' calls on a task queue.

One worker process serves the agents its factories built: the workflows (each call's
steps and hooks) and the activities (model attempts, tool calls, session loads and
saves). Any number of workers may share a task queue; a call continues on another one
when its worker dies.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterable
from datetime import timedelta
from types import TracebackType

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ..agent.react import ReActAgent
from ._activities import Activities
from ._registry import register, unregister
from ._workflow import AgentWorkflow

__all__ = ["PASSTHROUGH", "AgentWorker"]

PASSTHROUGH = ("rx_agent", "reactivex", "pydantic", "pydantic_core", "typing_extensions",
               "annotated_types")
"""Modules the workflow sandbox shares with the worker instead of re-importing them:
the runtime and what its records are made of (the agent and its hooks were built by
the worker's factory, outside the sandbox)."""


class AgentWorker:
    """Runs the calls of ``agents`` that reach ``task_queue``.

    ``async with AgentWorker(client, "q", [agent]):`` runs it for the block;
    ``await worker.run()`` until cancelled. ``extra_passthrough`` names more modules
    the workflow sandbox must share (a middleware's module that imports inside a hook).
    ``max_cached_workflows``: workflows kept in memory between their tasks (``0``: each
    task replays its workflow's history, as after a crash: a test of determinism).
    """

    def __init__(self, client: Client, task_queue: str, agents: Iterable[ReActAgent], *,
                 extra_passthrough: Iterable[str] = (),
                 max_concurrent_activities: int = 100,
                 max_cached_workflows: int = 1000,
                 graceful_shutdown: float = 0.0) -> None:
        self.agents = list(agents)
        names = [a.name for a in self.agents]
        if len(set(names)) != len(names):
            raise ValueError(f"two agents of a worker share a name: {names}")
        if not self.agents:
            raise ValueError("a worker needs at least one agent")
        self.task_queue = task_queue
        self.activities = Activities({a.name: a for a in self.agents})
        restrictions = SandboxRestrictions.default.with_passthrough_modules(
            *PASSTHROUGH, *extra_passthrough)
        # One thread runs every workflow activation: the runtime ties a call to the
        # thread of its loop, and a workflow's loop must not change threads.
        self._executor = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="rx-agent-workflows")
        self.worker = Worker(
            client, task_queue=task_queue, workflows=[AgentWorkflow],
            activities=self.activities.all(),
            workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
            workflow_task_executor=self._executor,
            max_concurrent_activities=max_concurrent_activities,
            max_cached_workflows=max_cached_workflows,
            graceful_shutdown_timeout=timedelta(seconds=graceful_shutdown))

    def _register(self) -> None:
        for agent in self.agents:
            register(self.task_queue, agent)

    def _unregister(self) -> None:
        for agent in self.agents:
            unregister(self.task_queue, agent)

    async def run(self) -> None:
        """Serve until cancelled (or the worker fails)."""
        self._register()
        try:
            await self.worker.run()
        finally:
            self._unregister()
            self._executor.shutdown(wait=False)

    async def __aenter__(self) -> AgentWorker:
        self._register()
        await self.worker.__aenter__()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            await self.worker.__aexit__(kind, exc, tb)
        finally:
            self._unregister()
            await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown)
