"""10,000 concurrent calls on one event loop against one call alone, and their memory.

    python benchmarks/bench_concurrency.py              # 10,000 calls, 5 runs
    python benchmarks/bench_concurrency.py --calls 1000 --runs 3 --json out.json
    python benchmarks/bench_concurrency.py --collector off      # or tuned: the same runs

Every call is ``agent.acall`` of a 5-chunk reply from ``ScriptedModel`` (seven model
signals: five text chunks, the usage and the finish reason), each on its own session
of one agent, with the collector at its default settings. Printed:

- **one call**: wall time of one call run alone (the median of 20, after a warm-up);
- **per call, N concurrent**: the wall time of N calls gathered at once, divided by N;
- **the ratio** of the two: how much dearer a call is when N others are in flight,
  and the cyclic collector's share of the N calls' time per call and generation
  (``gc.callbacks``);
- with ``--latency`` (default 20 ms, as run.py's workload 5) the same with the model
  waiting before each chunk, where the figure is N calls' wall over one call's (the
  target: at most 5x);
- **the floor** beside it, the same way: N bare calls that each await one future while
  a step object is played seven times by one shared loop timer (as ScriptedModel plays
  its seven signals) and does nothing else: asyncio's own cost of N calls in flight;
  then the same bare calls each holding as many more tracked objects as it takes to
  reach an agent call's count mid-reply (both counted first with ``gc.get_objects``
  mid-reply, over the objects before; a bare call's own task, coroutine, future and
  step count toward it): what the collector charges for that much in-flight state
  alone, with no work;
- **a full collection per object walked**, the agent's calls against that floor (a run
  of each with a ``gc.callbacks`` hook that counts the heap at each full collection),
  and the references an agent call's in-flight objects hold (``gc.get_referents``):
  a full collection visits those too;
- **peak memory per in-flight call**: the RSS peak during the N calls over the RSS
  before them, divided by N (measured first, before the process has grown), and the
  traced (``tracemalloc``) peak the same way (a run of its own: tracing slows calls);
- **an idle cached session's memory**: what the N finished calls leave traced
  (their sessions in the agent's store and cache), divided by N.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import statistics
import sys
import time
import tracemalloc
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from workloads import rss_bytes  # noqa: E402

from rx_agent import ReActAgent, RuntimeContext, ScriptedModel  # noqa: E402

CHUNKS = 5
SIGNALS = CHUNKS + 2  # the text chunks, the usage and the finish reason


def make(calls: int, latency: float) -> ReActAgent:
    model = ScriptedModel([["word "] * CHUNKS] * calls, delay=latency)
    return ReActAgent(name="c", model=model)


async def one_call(latency: float, repeats: int = 20) -> float:
    agent = make(repeats + 1, latency)
    await agent.acall("hi")  # warm-up
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        await agent.acall("hi", RuntimeContext(session_id=f"one{i}"))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class GCTime:
    """Seconds the cyclic collector ran, per generation (``gc.callbacks``); with
    ``walk``, also the objects each full collection walked (counting the heap costs
    time: a diagnostic run of its own)."""

    def __init__(self, walk: bool = False) -> None:
        self.spent = [0.0, 0.0, 0.0]
        self.runs = [0, 0, 0]
        self.walk = walk
        self.walked = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            if self.walk and info["generation"] == 2:
                self.walked += len(gc.get_objects())
            self._started = time.perf_counter()
        else:
            self.spent[info["generation"]] += time.perf_counter() - self._started
            self.runs[info["generation"]] += 1

    def full_ns_per_object(self) -> float:
        """A full collection's time per object walked (``walk``)."""
        return self.spent[2] / max(1, self.walked) * 1e9


@contextlib.contextmanager
def watching(gc_time: GCTime | None) -> Iterator[None]:
    """``gc_time`` sees the collector while the block runs (after a full collection
    that it does not see)."""
    gc.collect()
    if gc_time is None:
        yield
        return
    gc.callbacks.append(gc_time)
    try:
        yield
    finally:
        gc.callbacks.remove(gc_time)


async def concurrent(calls: int, latency: float, gc_time: GCTime | None = None) -> float:
    agent = make(calls, latency)
    with watching(gc_time):
        start = time.perf_counter()
        await asyncio.gather(*(agent.acall("hi", RuntimeContext(session_id=f"s{i}"))
                               for i in range(calls)))
        return time.perf_counter() - start


class _Held:
    """A tracked object of the floor's in-flight state (slotted: no ``__dict__``)."""

    __slots__ = ("ref",)

    def __init__(self, ref: object) -> None:
        self.ref = ref


class _FloorTicker:
    """One loop timer for every bare call's steps (as ScriptedModel's playback)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self.loop, self.delay = loop, delay
        self.queue: deque[tuple[float, _FloorStep]] = deque()
        self.armed = False

    def add(self, step: _FloorStep) -> None:
        due = self.loop.time() + self.delay
        self.queue.append((due, step))
        if not self.armed:
            self.armed = True
            self.loop.call_at(due, self.fire)

    def fire(self) -> None:
        queue, end = self.queue, self.loop.time()
        while queue and queue[0][0] <= end:
            queue.popleft()[1].step()
        if queue:
            self.loop.call_at(queue[0][0], self.fire)
        else:
            self.armed = False


class _FloorStep:
    """A bare call's playback: ``SIGNALS`` steps, then the awaiting future's result."""

    def __init__(self, ticker: _FloorTicker, future: asyncio.Future[None]) -> None:
        self.ticker, self.future, self.left = ticker, future, SIGNALS

    def step(self) -> None:
        self.left -= 1
        if self.left:
            self.ticker.add(self)
        else:
            self.future.set_result(None)


async def _bare_call(ticker: _FloorTicker, held: int) -> None:
    state = [_Held(None) for _ in range(held)]
    future = ticker.loop.create_future()
    ticker.add(_FloorStep(ticker, future))
    await future
    del state


async def floor(calls: int, latency: float, held: int,
                gc_time: GCTime | None = None) -> float:
    """The wall time of ``calls`` bare calls gathered at once (see the module doc)."""
    if latency <= 0:  # no wait: the calls would run one after another, none in flight
        raise ValueError(f"the floor needs a latency > 0, got {latency}")
    ticker = _FloorTicker(asyncio.get_running_loop(), latency)
    with watching(gc_time):
        start = time.perf_counter()
        await asyncio.gather(*(_bare_call(ticker, held) for _ in range(calls)))
        return time.perf_counter() - start


async def _in_flight(start: Any, calls: int, latency: float) -> tuple[float, float]:
    """Tracked objects per call ``start(i)`` mid-flight (``calls`` of them gathered),
    and the references they hold."""
    gc.collect()
    before = {id(o) for o in gc.get_objects()}
    tasks = [asyncio.ensure_future(start(i)) for i in range(calls)]
    await asyncio.sleep(latency * 3.5)  # every call waits, mid-reply
    gc.collect()
    new = [o for o in gc.get_objects()
           if id(o) not in before and o is not tasks and o is not before]
    objects, references = len(new), sum(len(gc.get_referents(o)) for o in new)
    del new
    await asyncio.gather(*tasks)
    return objects / calls, references / calls


async def objects_in_flight(calls: int, latency: float) -> dict[str, float]:
    """What an agent call holds mid-reply (the caller's task, its context and the
    call's ``RuntimeContext`` included, as every call brings them), what a bare call of
    the floor holds of its own (its task, coroutine, future and step), and the
    references of each: a full collection visits those too."""
    agent = make(calls + 1, latency)
    await agent.acall("hi", RuntimeContext(session_id="warm"))
    objects, references = await _in_flight(
        lambda i: agent.acall("hi", RuntimeContext(session_id=f"o{i}")), calls, latency)
    ticker = _FloorTicker(asyncio.get_running_loop(), latency)
    bare, bare_references = await _in_flight(lambda i: _bare_call(ticker, 0), calls, latency)
    return {"objects_in_flight_per_call": objects,
            "references_in_flight_per_call": references,
            "bare_objects_in_flight_per_call": bare,
            "bare_references_in_flight_per_call": bare_references}


async def full_collections(calls: int, latency: float, held: int) -> dict[str, float]:
    """What one full collection costs per object walked, the agent's calls in flight
    against the floor's bare calls holding as many objects."""
    agent, bare = GCTime(walk=True), GCTime(walk=True)
    await concurrent(calls, latency, agent)
    await floor(calls, latency, held, bare)
    return {"agent_full_collections": agent.runs[2],
            "agent_full_collection_ns_per_object": agent.full_ns_per_object(),
            "floor_full_collections": bare.runs[2],
            "floor_full_collection_ns_per_object": bare.full_ns_per_object()}


async def memory(calls: int, latency: float) -> dict[str, float]:
    """The RSS peak per in-flight call (first, in a process that has not grown yet),
    then in a traced run the traced peak per in-flight call and what stays traced
    per idle session."""
    agent = make(calls, latency)
    gc.collect()
    rss_base = rss_bytes()
    rss_peak = rss_base
    stop = False

    async def sample() -> None:
        nonlocal rss_peak
        while not stop:
            rss_peak = max(rss_peak, rss_bytes())
            await asyncio.sleep(0.002)

    sampler = asyncio.create_task(sample())
    await asyncio.gather(*(agent.acall("hi", RuntimeContext(session_id=f"r{i}"))
                           for i in range(calls)))
    rss_peak = max(rss_peak, rss_bytes())
    stop = True
    await sampler
    del agent
    gc.collect()

    agent = make(calls, latency)
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    await asyncio.gather(*(agent.acall("hi", RuntimeContext(session_id=f"m{i}"))
                           for i in range(calls)))
    _, peak = tracemalloc.get_traced_memory()
    gc.collect()
    left, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"traced_peak_per_call_bytes": (peak - base) / calls,
            "rss_peak_per_call_bytes": (rss_peak - rss_base) / calls,
            "idle_session_bytes": (left - base) / calls}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    n = args.calls
    memory_figures = await memory(n, 0.0)  # first: RSS grows only once
    counts = await objects_in_flight(min(n, 2000), args.latency or 0.02)
    # The floor's calls hold their own task, coroutine and future already: the rest.
    held = max(0, round(counts["objects_in_flight_per_call"]
                        - counts["bare_objects_in_flight_per_call"]))
    floor_ones: list[float] = []
    floor_alls: list[float] = []
    held_alls: list[float] = []
    ones: list[float] = []
    alls: list[float] = []
    ones_lat: list[float] = []
    alls_lat: list[float] = []
    gc_time = GCTime()
    for _ in range(args.runs):  # one call and N calls by turns: drift hits both
        ones.append(await one_call(0.0))
        alls.append(await concurrent(n, 0.0, gc_time))
        if args.latency:
            ones_lat.append(await one_call(args.latency, 3))
            alls_lat.append(await concurrent(n, args.latency))
            floor_ones.append(await floor(1, args.latency, 0))
            floor_alls.append(await floor(n, args.latency, 0))
            held_alls.append(await floor(n, args.latency, held))
    one = statistics.median(ones)
    per = statistics.median(alls) / n
    result: dict[str, Any] = {
        "calls": n,
        "one_call_us": one * 1e6,
        "per_call_concurrent_us": per * 1e6,
        "ratio": per / one,
        # The collector's share of the N calls' wall, per call and generation.
        "gc_us_per_call": [t / (n * args.runs) * 1e6 for t in gc_time.spent],
        "gc_runs_per_batch": [r / args.runs for r in gc_time.runs],
    }
    if args.latency:
        result["latency_one_call_ms"] = statistics.median(ones_lat) * 1e3
        result["latency_all_calls_ms"] = statistics.median(alls_lat) * 1e3
        result["latency_all_over_one"] = statistics.median(alls_lat) / statistics.median(
            ones_lat)
        floor_one = statistics.median(floor_ones)
        result["floor_all_over_one"] = statistics.median(floor_alls) / floor_one
        result["floor_held_all_over_one"] = statistics.median(held_alls) / floor_one
    result.update(counts)
    result["floor_held_objects"] = held
    if args.latency:
        result.update(await full_collections(n, args.latency, held))
    result.update(memory_figures)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.02,
                        help="also run with the model waiting this long before each "
                        "chunk (0: skip)")
    parser.add_argument("--collector", choices=("default", "off", "tuned"), default="default",
                        help="the cyclic collector: its default settings (the figure), "
                        "disabled, or a service's tuning (gc.freeze() after start-up, then "
                        "gc.set_threshold(50_000, 20, 20), as rx-agent serve does)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.collector == "off":
        gc.disable()
    elif args.collector == "tuned":
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)
    r = asyncio.run(main_async(args))
    n = f"{args.calls:,}"
    settings = {"default": "default GC settings", "off": "the collector disabled",
                "tuned": "the collector tuned as rx-agent serve does"}[args.collector]
    print(f"{n} concurrent calls, 5-chunk reply, ScriptedModel, {settings} "
          f"(medians of {args.runs})")
    print(f"  one call alone, wall                          {r['one_call_us']:10.1f} us")
    print(f"  {n} concurrent, wall / {n}              {r['per_call_concurrent_us']:10.1f} us")
    print(f"  per call concurrent / one call alone          {r['ratio']:10.2f}x")
    gc_us = r["gc_us_per_call"]
    print(f"    of which the cyclic collector, per call       {sum(gc_us):10.1f} us   "
          f"(gen0 / gen1 / gen2: {gc_us[0]:.1f} / {gc_us[1]:.1f} / {gc_us[2]:.1f} us; "
          f"collections {' / '.join(f'{c:.0f}' for c in r['gc_runs_per_batch'])})")
    if args.latency:
        print(f"  with {args.latency * 1e3:.0f} ms before each chunk: one call "
              f"{r['latency_one_call_ms']:.1f} ms, {n} calls {r['latency_all_calls_ms']:.1f} ms, "
              f"{r['latency_all_over_one']:.2f}x   target <= 5x")
        print(f"    the floor: {n} bare calls, seven ticks each, nothing else       "
              f"{r['floor_all_over_one']:10.2f}x")
        held = r["floor_held_objects"]
        print(f"    the floor holding {held} more tracked objects each (to an agent "
              f"call's count mid-reply)  {r['floor_held_all_over_one']:5.2f}x")
        print(f"  a full collection, per object walked: agent "
              f"{r['agent_full_collection_ns_per_object']:.0f} ns "
              f"({r['agent_full_collections']:.0f} collections), the floor holding {held} "
              f"{r['floor_full_collection_ns_per_object']:.0f} ns "
              f"({r['floor_full_collections']:.0f})")
    print(f"  in flight per call: {r['objects_in_flight_per_call']:.1f} tracked objects "
          f"holding {r['references_in_flight_per_call']:.0f} references; a bare call "
          f"{r['bare_objects_in_flight_per_call']:.1f} holding "
          f"{r['bare_references_in_flight_per_call']:.0f} (and one per held object)")
    print(f"  peak memory per in-flight call (tracemalloc)  "
          f"{r['traced_peak_per_call_bytes'] / 1024:10.2f} KB")
    print(f"  peak RSS per in-flight call                   "
          f"{r['rss_peak_per_call_bytes'] / 1024:10.2f} KB")
    print(f"  an idle cached session (tracemalloc)          "
          f"{r['idle_session_bytes'] / 1024:10.2f} KB")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
