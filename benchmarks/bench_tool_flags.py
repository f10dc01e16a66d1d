"""What the tool flags cost per tool round, measured side by side in one run.

``@tool(interrupt="finish")`` and ``@tool(side_effect=True)`` put each call of their
batch in a task of its own; in a durable session a side-effect call is also journaled
(two more checkpoints per call: its start mark and its result). A batch of default
tools has no flags object at all. This prints, per variant, the wall time of one tool
round (a call of one async tool plus the model's next round) and its ratio to the
default tool's in the same kind of session; variants alternate, so drift on a busy
machine hits them all.

Run: python benchmarks/bench_tool_flags.py [--rounds 20] [--repeats 15]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from rx_agent import ReActAgent, RuntimeContext, ScriptedModel, Toolkit, ToolUseBlock, tool
from rx_agent.session import SqliteSessionStore


async def echo(value: int) -> int:
    """Return the value."""
    return value


VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "interrupt='finish'": {"interrupt": "finish"},
    "side_effect=True": {"side_effect": True},
}


def agent(flags: dict[str, Any], rounds: int, store: Any) -> ReActAgent:
    fn = tool(name="echo", **flags)(echo)
    script: list[Any] = [[ToolUseBlock(id=f"c{i}", name="echo", input={"value": i})]
                         for i in range(rounds)]
    script.append("done")
    return ReActAgent(name="bench", model=ScriptedModel(script), toolkit=Toolkit([fn]),
                      max_iters=rounds + 1, session_store=store)


async def per_round(flags: dict[str, Any], rounds: int, store: Any, session: str) -> float:
    built = agent(flags, rounds, store)
    ctx = RuntimeContext(session_id=session)
    start = time.perf_counter()
    await built.acall("go", ctx)
    return (time.perf_counter() - start) / rounds


async def main(rounds: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        durable = SqliteSessionStore(Path(folder) / "bench.db")
        stores: dict[str, Any] = {"memory": None, "sqlite": durable}
        samples: dict[tuple[str, str], list[float]] = {}
        names = list(VARIANTS)
        for i in range(repeats + 1):  # the first pass warms up
            for kind, store in stores.items():
                # A different variant goes first each pass: what follows the other
                # kind's runs (the store's threads settling) hits each in turn.
                for name in names[i % 3:] + names[:i % 3]:
                    gc.collect()
                    t = await per_round(VARIANTS[name], rounds, store, f"{kind}-{name}-{i}")
                    if i:
                        samples.setdefault((kind, name), []).append(t)
        await durable.aclose()
    print(f"one tool round (an async tool, then the next model round), {rounds} rounds "
          f"a call, median of {repeats}:")
    for kind in stores:
        base = median(samples[kind, "default"])
        for name in VARIANTS:
            us = median(samples[kind, name]) * 1e6
            print(f"  {kind:<7} {name:<20} {us:8.1f} us   {us / (base * 1e6):5.2f}x default")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.repeats))
