"""rx_agent's side of the benchmark workloads (run in-process)."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import reactivex
from reactivex import Observable
from reactivex import operators as ops

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    MiddlewareBase,
    ReActAgent,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
)

STREAM_POINTS = {ExtensionPoint.ON_AGENT, ExtensionPoint.ON_REASONING,
                 ExtensionPoint.ON_MODEL_CALL}
ROUND_POINTS = STREAM_POINTS | {ExtensionPoint.ON_ACTING}


def _identity(event: AgentEvent) -> AgentEvent:
    return event


class PassThrough(MiddlewareBase):
    """Takes part in the points; each hook is written out as ``return next(input)``
    (a hook left at its default builds no layer at all, which would flatter us)."""

    def __init__(self, points: set[ExtensionPoint]) -> None:
        self._points = points

    def active_points(self) -> set[ExtensionPoint]:
        return self._points

    def on_agent(self, agent: Any, ctx: Any, input: Any, next: Any) -> Observable[AgentEvent]:
        return next(input)  # type: ignore[no-any-return]

    def on_reasoning(self, agent: Any, ctx: Any, input: Any, next: Any) -> Observable[AgentEvent]:
        return next(input)  # type: ignore[no-any-return]

    def on_model_call(self, agent: Any, ctx: Any, input: Any,
                      next: Any) -> Observable[AgentEvent]:
        return next(input)  # type: ignore[no-any-return]

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Observable[AgentEvent]:
        return next(input)  # type: ignore[no-any-return]


class OneOperator(PassThrough):
    """One ``map`` operator per hook: ``next(inp).pipe(ops.map(lambda e: e))``."""

    def on_agent(self, agent: Any, ctx: Any, input: Any, next: Any) -> Observable[AgentEvent]:
        return next(input).pipe(ops.map(_identity))

    def on_reasoning(self, agent: Any, ctx: Any, input: Any, next: Any) -> Observable[AgentEvent]:
        return next(input).pipe(ops.map(_identity))

    def on_model_call(self, agent: Any, ctx: Any, input: Any,
                      next: Any) -> Observable[AgentEvent]:
        return next(input).pipe(ops.map(_identity))

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Observable[AgentEvent]:
        return next(input).pipe(ops.map(_identity))


def middlewares(flavour: str, n: int, points: set[ExtensionPoint]) -> list[MiddlewareBase]:
    cls = OneOperator if flavour == "op" else PassThrough
    return [cls(points) for _ in range(n)]


def echo(value: int) -> str:
    """Echo a number."""
    return str(value)


async def drain(source: Observable[AgentEvent]) -> int:
    """Subscribe, count events, wait for completion (no operators of our own)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    count = 0

    def on_next(_: AgentEvent) -> None:
        nonlocal count
        count += 1

    def on_error(exc: Exception) -> None:
        done.set_exception(exc)

    source.subscribe(on_next, on_error, lambda: done.set_result(None))
    await done
    return count


def stream_agent(n: int, flavour: str, events: int,
                 points: set[ExtensionPoint] | None = None) -> ReActAgent:
    model = ScriptedModel([["tok "] * events])
    return ReActAgent(name="bench", model=model,
                      middlewares=middlewares(flavour, n, points or STREAM_POINTS))


def rounds_agent(n: int, flavour: str, rounds: int) -> ReActAgent:
    script: list[Any] = [[ToolUseBlock(id=f"c{i}", name="echo", input={"value": i})]
                         for i in range(rounds)]
    script.append(["The ", "answer ", "is 42."])
    return ReActAgent(name="bench", model=ScriptedModel(script), toolkit=Toolkit([echo]),
                      middlewares=middlewares(flavour, n, ROUND_POINTS),
                      max_iters=rounds + 1)


def echo_sync(value: int) -> str:
    """Echo a number (a synchronous tool: it runs on a worker thread)."""
    return str(value)


async def echo_async(value: int) -> str:
    """Echo a number (an async tool: it runs on the loop)."""
    return str(value)


def tool_agent(kind: str, rounds: int) -> ReActAgent:
    """``rounds`` rounds of one call to a sync (``kind="sync"``) or async tool."""
    fn = echo_sync if kind == "sync" else echo_async
    script: list[Any] = [[ToolUseBlock(id=f"c{i}", name=fn.__name__, input={"value": i})]
                         for i in range(rounds)]
    script.append(["The ", "answer."])
    return ReActAgent(name="bench", model=ScriptedModel(script), toolkit=Toolkit([fn]),
                      max_iters=rounds + 1)


async def hop_seconds(kind: str, hops: int) -> float:
    """Wall seconds per round trip from the running loop to a parked thread and back.

    ``"tools"``: through the runtime's tool threads (what a sync tool round pays);
    ``"bare"``: the floor, one ``threading.Lock`` handoff out and one
    ``call_soon_threadsafe`` back (no queue, no pool, no rx_agent)."""
    loop = asyncio.get_running_loop()
    if kind == "tools":
        from rx_agent.tool._threads import tool_threads

        pool, context = tool_threads(), contextvars.copy_context()
        await pool.run(loop, context, _identity_value, 0)
        start = time.perf_counter()
        for i in range(hops):
            await pool.run(loop, context, _identity_value, i)
        return (time.perf_counter() - start) / hops
    go = threading.Lock()
    go.acquire()
    slot: list[asyncio.Future[None]] = []
    stop = False

    def parked() -> None:
        while True:
            go.acquire()
            if stop:
                return
            loop.call_soon_threadsafe(slot[0].set_result, None)

    thread = threading.Thread(target=parked, daemon=True)
    thread.start()
    try:
        start = time.perf_counter()
        for _ in range(hops):
            slot[:] = [loop.create_future()]
            go.release()
            await slot[0]
        return (time.perf_counter() - start) / hops
    finally:
        stop = True
        go.release()
        thread.join()


def _identity_value(value: Any) -> Any:
    return value


async def time_runs(make: Callable[[], ReActAgent], repeats: int, warmup: int = 1) -> list[float]:
    """Seconds per run (agent built outside the timed region)."""
    times = []
    for i in range(warmup + repeats):
        agent = make()
        start = time.perf_counter()
        await drain(agent.stream("go"))
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return times


def floor_seconds(items: int, depth: int, repeats: int) -> list[float]:
    """A bare reactivex chain: from_iterable + ``depth`` identity maps."""
    times = []
    data = list(range(items))
    for i in range(repeats + 1):
        source: Observable[Any] = reactivex.from_iterable(data)
        for _ in range(depth):
            source = source.pipe(ops.map(_identity))
        count = 0

        def on_next(_: Any) -> None:
            nonlocal count
            count += 1

        start = time.perf_counter()
        source.subscribe(on_next)
        if i:
            times.append(time.perf_counter() - start)
    return times


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class ConcurrencyResult:
    calls: int
    one_call_s: float
    all_calls_s: float
    peak_rss_per_call_bytes: float
    max_threads: int


async def concurrency(calls: int, chunks: int, latency: float) -> ConcurrencyResult:
    """``calls`` concurrent calls on one loop, ``latency`` s before each of ``chunks``."""

    def make() -> ReActAgent:
        model = ScriptedModel([["word "] * chunks] * calls, delay=latency)
        return ReActAgent(name="c", model=model)

    agent = make()
    start = time.perf_counter()
    await agent.acall("hi")
    one = time.perf_counter() - start

    agent = make()
    gc.collect()
    base = rss_bytes()
    peak = base
    max_threads = threading.active_count()
    stop = False

    async def sample() -> None:
        nonlocal peak, max_threads
        while not stop:
            peak = max(peak, rss_bytes())
            max_threads = max(max_threads, threading.active_count())
            await asyncio.sleep(latency / 4)

    from rx_agent import RuntimeContext

    sampler = asyncio.create_task(sample())
    start = time.perf_counter()
    await asyncio.gather(*(agent.acall("hi", RuntimeContext(session_id=f"s{i}"))
                           for i in range(calls)))
    elapsed = time.perf_counter() - start
    stop = True
    await sampler
    return ConcurrencyResult(calls, one, elapsed, (peak - base) / calls, max_threads)


# -- the Observable-to-consumer bridges (astream, call_sync, the CLI's pump) ---------


async def astream_seconds(events: int) -> float:
    """Wall seconds of one ``async for`` over ``agent.astream`` of ``events`` deltas."""
    agent = stream_agent(0, "pass", events)
    start = time.perf_counter()
    async for _ in agent.astream("go"):
        pass
    return time.perf_counter() - start


def call_sync_seconds(calls: int) -> float:
    """Wall seconds per ``call_sync`` of a 5-chunk reply, from a thread without a loop."""
    agent = ReActAgent(name="bench", model=ScriptedModel([["word "] * 5] * (calls + 1)))
    agent.call_sync("warm")
    start = time.perf_counter()
    for _ in range(calls):
        agent.call_sync("hi")
    return (time.perf_counter() - start) / calls


def cli_pump_seconds(events: int) -> float:
    """Wall seconds of the CLI's ``pump`` over a reply of ``events`` deltas, from a
    thread without a loop (the events cross from the runtime's loop)."""
    from rx_agent.cli._pump import pump

    agent = stream_agent(0, "pass", events)
    count = 0

    def handle(_: AgentEvent) -> None:
        nonlocal count
        count += 1

    start = time.perf_counter()
    pump(agent.stream("go"), handle)
    return time.perf_counter() - start
