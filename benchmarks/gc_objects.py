"""GC-tracked objects per call: in flight, and left for the cyclic collector.

    python benchmarks/gc_objects.py            # 5-chunk replies, no tools, no middleware
    python benchmarks/gc_objects.py --tools    # one sync tool round, then the answer
    python benchmarks/gc_objects.py --calls 500 --json out.json

Figures (deterministic counts, not timings, so they compare across trees):

- *in flight*: ``len(gc.get_objects())`` growth per call while ``calls`` calls wait on
  their model (each call's first chunk is pending), and the part of it still alive
  after the calls ended (the session's stored messages, the scripted model's log);
- *left for the cyclic collector*: what ``gc.collect()`` frees per call after the calls
  finished with the collector disabled (0 means reference counting freed everything);
- *collections*: generation-0/1/2 collections the default-threshold collector ran per
  1,000 calls, and CPU per call (``time.process_time``) with the default GC settings.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from collections import Counter
from typing import Any

from rx_agent import ReActAgent, RuntimeContext, ScriptedModel, Toolkit, ToolUseBlock


def echo(value: int) -> str:
    """Echo a number."""
    return str(value)


def make_agent(calls: int, chunks: int, delay: float, tools: bool) -> ReActAgent:
    if tools:
        script: list[Any] = []
        for i in range(calls):
            script.append([ToolUseBlock(id=f"c{i}", name="echo", input={"value": i})])
            script.append(["word "] * chunks)
        return ReActAgent(name="g", model=ScriptedModel(script, delay=delay),
                          toolkit=Toolkit([echo]), max_iters=3)
    return ReActAgent(name="g", model=ScriptedModel([["word "] * chunks] * calls, delay=delay))


def _ctx(i: int) -> RuntimeContext:
    return RuntimeContext(session_id=f"s{i}")


async def in_flight(
    calls: int, chunks: int, tools: bool, top: int
) -> tuple[float, float, list[Any]]:
    """Objects per call while every call waits for its model's first chunk, and how
    many stay once the calls ended (what the session store and the model keep)."""
    delay = 0.2
    agent = make_agent(calls + 1, chunks, delay, tools)
    contexts = [_ctx(i) for i in range(calls)]
    await agent.acall("warm-up", RuntimeContext(session_id="warm"))  # one-off caches
    gc.collect()
    before = gc.get_objects()
    before_ids = {id(o) for o in before}
    n_before = len(before)
    del before
    tasks = [asyncio.ensure_future(agent.acall("hi", c)) for c in contexts]
    await asyncio.sleep(delay / 2)
    gc.collect()  # only what the calls still hold
    now = gc.get_objects()
    per_call = (len(now) - n_before) / calls
    kinds = Counter(type(o).__name__ for o in now if id(o) not in before_ids)
    del now
    await asyncio.gather(*tasks)
    del tasks
    gc.collect()
    kept = (len(gc.get_objects()) - n_before) / calls  # the sessions' state, the script's log
    return per_call, kept, [(k, round(v / calls, 2)) for k, v in kinds.most_common(top)]


async def left_over(calls: int, chunks: int, tools: bool, top: int) -> tuple[float, list[Any]]:
    """Objects per finished call that only the cyclic collector frees."""
    agent = make_agent(calls + 1, chunks, 0.0, tools)
    contexts = [_ctx(i) for i in range(calls)]
    await agent.acall("warm-up", RuntimeContext(session_id="warm"))
    gc.collect()
    gc.disable()
    try:
        for c in contexts:
            await agent.acall("hi", c)
        await asyncio.sleep(0)  # callbacks scheduled at the end run
        await asyncio.sleep(0)
        gc.set_debug(gc.DEBUG_SAVEALL)
        found = gc.collect()
        kinds = Counter(type(o).__name__ for o in gc.garbage)
        gc.garbage.clear()
        gc.set_debug(0)
    finally:
        gc.enable()
    return found / calls, [(k, round(v / calls, 2)) for k, v in kinds.most_common(top)]


async def cpu(calls: int, chunks: int, tools: bool) -> tuple[float, dict[int, float]]:
    """CPU µs per call with the default GC settings, and collections per 1,000 calls."""
    agent = make_agent(calls + 1, chunks, 0.0, tools)
    contexts = [_ctx(i) for i in range(calls)]
    await agent.acall("warm-up", RuntimeContext(session_id="warm"))
    gc.collect()
    counts = dict.fromkeys(range(3), 0)

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            counts[info["generation"]] += 1

    gc.callbacks.append(count)
    try:
        start = time.process_time()
        await asyncio.gather(*(agent.acall("hi", c) for c in contexts))
        spent = time.process_time() - start
    finally:
        gc.callbacks.remove(count)
    return spent / calls * 1e6, {g: n * 1000 / calls for g, n in counts.items()}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    flight, kept, flight_kinds = await in_flight(args.calls, args.chunks, args.tools, args.top)
    left, left_kinds = await left_over(args.calls, args.chunks, args.tools, args.top)
    cpu_us, collections = await cpu(args.calls, args.chunks, args.tools)
    return {"in_flight_per_call": flight, "kept_after_per_call": kept,
            "in_flight_kinds": flight_kinds,
            "left_for_gc_per_call": left, "left_kinds": left_kinds,
            "cpu_us_per_call": cpu_us, "collections_per_1000_calls": collections}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=5)
    parser.add_argument("--tools", action="store_true", help="one tool round per call")
    parser.add_argument("--top", type=int, default=12, help="object kinds to list")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    out = asyncio.run(main_async(args))
    what = "one tool round + answer" if args.tools else f"{args.chunks}-chunk reply"
    print(f"GC-tracked objects per call ({args.calls} calls, {what}, Python "
          f"{sys.version.split()[0]})")
    print(f"  in flight (waiting on the model)   {out['in_flight_per_call']:8.1f}")
    print(f"    of which kept after the call     {out['kept_after_per_call']:8.1f}"
          "  (session state, the scripted model's log)")
    print(f"  left for the cyclic collector      {out['left_for_gc_per_call']:8.1f}")
    print(f"  CPU per call, default GC (us)      {out['cpu_us_per_call']:8.1f}")
    gens = out["collections_per_1000_calls"]
    print("  collections per 1,000 calls        " +
          " / ".join(f"gen{g} {n:.1f}" for g, n in gens.items()))
    print("  in flight by kind: " + ", ".join(f"{k} {v}" for k, v in out["in_flight_kinds"]))
    print("  left over by kind: " + ", ".join(f"{k} {v}" for k, v in out["left_kinds"]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
