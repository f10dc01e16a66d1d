"""A second driver runs the same steps and may run a call's two effects, model calls
and tool calls, elsewhere (issue #25, item 1: the seam a workflow driver plugs into).

``Elsewhere`` runs every model attempt and every tool call on another thread's event
loop, as a workflow engine runs activities in a worker, and hands the results back to
the call's loop: the hooks and the steps run where the call runs, and the caller sees
what the default driver gives.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import reactivex
from reactivex import abc as rxabc
from reactivex.disposable import Disposable

from rx_agent import (
    ExtensionPoint,
    MiddlewareBase,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
)
from rx_agent.agent._calling import stream_driven
from rx_agent.agent._driver import Driver
from rx_agent.testing import collect
from rx_agent.tool import execute


class Worker:
    """An event loop on its own thread: where the activities run."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> asyncio.Future[Any]:
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


async def _chunks(source: Any) -> list[Any]:
    done: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
    items: list[Any] = []
    source.subscribe(items.append, done.set_exception, lambda: done.set_result(items))
    return await done


class Elsewhere(Driver):
    """Runs each model attempt and each tool call on the worker, then replays what it
    produced on the call's loop."""

    __slots__ = ("models", "tools", "worker")

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.models = 0
        self.tools: list[str] = []

    def model_stream(self, model: Any, mci: Any) -> Any:
        def subscribe(observer: rxabc.ObserverBase[Any], scheduler: Any = None) -> Any:
            self.models += 1

            async def activity() -> None:
                try:
                    chunks = await self.worker.run(
                        _chunks(model.stream(mci.messages, mci.tools, mci.options)))
                except Exception as exc:
                    observer.on_error(exc)
                    return
                for chunk in chunks:
                    observer.on_next(chunk)
                observer.on_completed()

            task = asyncio.get_running_loop().create_task(activity())
            return Disposable(task.cancel)

        return reactivex.create(subscribe)

    async def execute_tool(self, toolkit: Any, call: ToolUseBlock, ctx: Any, emit: Any,
                           source: Any, reply_id: str, timeout: Any = None, owner: Any = None,
                           starting: Any = None) -> Any:
        go = True if starting is None else starting(call)  # decided where the call runs
        if go is not True and go is not False:
            go = await go
        events: list[Any] = []

        async def activity() -> Any:
            self.tools.append(threading.current_thread().name)
            return await execute(toolkit, call, ctx, events.append, source, reply_id, timeout,
                                 owner, lambda c: go)

        block = await self.worker.run(activity())
        for event in events:
            emit(event)
        return block


@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker()
    yield w
    w.close()


async def slow_add(a: int, b: int) -> int:
    """Add, after a moment."""
    await asyncio.sleep(0.01)
    return a + b


class Tag(MiddlewareBase):
    """A hook at every point the effects sit under: it must run where the call runs."""

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_ACTING}

    def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        self.threads.add(threading.current_thread().name)
        return next(input)

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        self.threads.add(threading.current_thread().name)
        return next(input)


def _script() -> list[Any]:
    return [
        ["Adding. ", ToolUseBlock(id="c1", name="slow_add", input={"a": 1, "b": 2})],
        [ToolUseBlock(id="c2", name="slow_add", input={"a": 3, "b": 4}),
         ToolUseBlock(id="c3", name="slow_add", input={"a": 5, "b": 6})],
        ["3, 7 and ", "11."],
    ]


def _shape(events: list[Any]) -> list[tuple[Any, ...]]:
    keep = ("delta", "tool_call_id", "state", "result")
    out = []
    for e in events:
        values = [getattr(e, k, None) for k in keep]
        values[3] = values[3].text if values[3] is not None else None
        out.append((type(e).__name__, *values))
    return out


def _run(stream: Any) -> tuple[list[Any], list[Any]]:
    ctx = RuntimeContext(session_id="s")
    events = collect(stream(ctx))
    assert ctx.agent_state is not None
    return events, [(m.role, m.text, [b.model_dump() for b in m.tool_results])
                    for m in ctx.agent_state.context]


def test_a_driver_runs_model_and_tool_calls_elsewhere_with_the_same_steps(
    worker: Worker,
) -> None:
    def agent(tag: Tag) -> ReActAgent:
        return ReActAgent(name="a", model=ScriptedModel(_script()),
                          toolkit=Toolkit([slow_add]), middlewares=[tag])

    here, there = Tag(), Tag()
    expected = _run(lambda ctx: agent(here).stream("add", ctx))
    driver = Elsewhere(worker)
    events, context = _run(lambda ctx: stream_driven(agent(there), driver, "add", ctx))
    assert _shape(events) == _shape(expected[0])
    assert context == expected[1]
    # Every effect ran on the worker; every hook where the call runs.
    assert driver.models == 3
    assert driver.tools == [worker.thread.name] * 3
    assert worker.thread.name not in there.threads
    assert there.threads == here.threads


def test_a_model_failure_elsewhere_is_retried_like_any_model_failure(worker: Worker) -> None:
    model = ScriptedModel([ConnectionError("worker lost"), "fine"])
    agent = ReActAgent(name="a", model=model, max_retries=2)
    driver = Elsewhere(worker)
    events = collect(stream_driven(agent, driver, "hi"))
    assert events[-2].result.text == "fine"
    assert driver.models == 2  # the failed attempt and the retry
