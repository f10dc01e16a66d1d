"""The runtime's threads for synchronous tools (rx_agent/tool/_threads.py): a job per
call through a queue, results as futures of the calling loop, never blocking it."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from rx_agent import Toolkit, ToolUseBlock
from rx_agent.tool._execute import execute
from rx_agent.tool._threads import ToolThreads

WHO = contextvars.ContextVar("WHO", default="nobody")


async def _run(pool: ToolThreads, fn, *args):  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    return await asyncio.wait_for(pool.run(loop, contextvars.copy_context(), fn, *args), 5)


async def test_a_job_runs_on_a_worker_with_the_callers_contextvars() -> None:
    pool = ToolThreads(max_workers=2)
    WHO.set("caller")
    name, who = await _run(pool, lambda: (threading.current_thread().name, WHO.get()))
    assert name.startswith("rx-agent-tool-") and who == "caller"


async def test_a_jobs_exception_is_the_futures() -> None:
    def boom() -> None:
        raise KeyError("nope")

    with pytest.raises(KeyError, match="nope"):
        await _run(ToolThreads(max_workers=1), boom)


async def test_workers_are_reused_and_grow_only_when_all_are_busy() -> None:
    pool = ToolThreads(max_workers=3)
    for _ in range(20):  # one at a time: the first worker serves them all
        await _run(pool, lambda: None)
    assert pool.workers == 1
    gate = threading.Event()
    loop = asyncio.get_running_loop()
    busy = [pool.run(loop, contextvars.copy_context(), gate.wait, 5) for _ in range(5)]
    await asyncio.sleep(0.05)
    assert pool.workers == 3  # capped; the other jobs wait for a free worker
    gate.set()
    assert await asyncio.wait_for(asyncio.gather(*busy), 5) == [True] * 5


async def test_the_loop_keeps_running_while_a_tool_blocks() -> None:
    release = threading.Event()
    pool = ToolThreads(max_workers=1)
    loop = asyncio.get_running_loop()
    pending = pool.run(loop, contextvars.copy_context(), release.wait, 5)
    ticks = 0
    for _ in range(5):
        await asyncio.sleep(0.005)
        ticks += 1
    assert ticks == 5 and not pending.done()
    release.set()
    assert await asyncio.wait_for(pending, 5) is True


async def test_a_job_cancelled_before_it_started_never_runs() -> None:
    pool = ToolThreads(max_workers=1)
    loop = asyncio.get_running_loop()
    gate = threading.Event()
    ran: list[str] = []
    first = pool.run(loop, contextvars.copy_context(), gate.wait, 5)
    second = pool.run(loop, contextvars.copy_context(), ran.append, "second")
    second.cancel()
    gate.set()
    await asyncio.wait_for(first, 5)
    await _run(pool, lambda: None)  # the queue has moved past the cancelled job
    assert ran == []


def test_a_result_after_the_loop_closed_is_dropped_quietly() -> None:
    pool = ToolThreads(max_workers=1)
    gate, finished = threading.Event(), threading.Event()

    def slow() -> str:
        gate.wait(5)
        finished.set()
        return "late"

    async def start() -> None:
        pool.run(asyncio.get_running_loop(), contextvars.copy_context(), slow)

    asyncio.run(start())  # the loop closes with the job still running
    gate.set()
    assert finished.wait(5)
    assert pool.workers == 1


async def test_a_toolkits_own_executor_still_runs_its_sync_tools() -> None:
    names: list[str] = []

    def where() -> str:
        """Say where."""
        names.append(threading.current_thread().name)
        return "ok"

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mine") as executor:
        kit = Toolkit([where], executor=executor)
        events: list[object] = []
        block = await execute(kit, ToolUseBlock(id="c1", name="where", input={}), None,
                              events.append, "t", "r1")
    assert block.output == "ok" and names[0].startswith("mine")


async def test_sync_tools_default_to_the_runtime_tool_threads() -> None:
    names: list[str] = []

    def where() -> str:
        """Say where."""
        names.append(threading.current_thread().name)
        return "ok"

    events: list[object] = []
    await execute(Toolkit([where]), ToolUseBlock(id="c1", name="where", input={}), None,
                  events.append, "t", "r1")
    assert names[0].startswith("rx-agent-tool-")
