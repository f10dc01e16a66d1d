#!/usr/bin/env python3
"""Concurrency of OpenAIChatModel: N concurrent calls against a slow local server.

The local OpenAI-compatible test server (tests/model/openai_server.py, run in a child
process so that its work does not compete with the client for the GIL) streams every
answer with a fixed latency before each SSE event. N concurrent calls, all on one
client event loop, should then take about as long as one call: the adapter holds no
thread and no lock while it waits for the network. What remains above 1x is the CPU
the client spends per call (printed), which one loop does serially. The benchmark
prints wall(N) / wall(1), the client's CPU time and the threads the client side used.

Modes:

``agent`` (default)
    ``await agent.acall(...)`` of a ``ReActAgent`` whose model is ``OpenAIChatModel``;
    each call gets its own session (calls on one session run one after another by
    design).
``model``
    Each call consumes ``model.stream(...)`` directly (no agent).

Usage: ``python benchmarks/bench_openai_concurrency.py [--n 200] [--latency 0.05]``
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import reactivex.operators as ops

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rx_agent._rx import await_observable  # noqa: E402
from rx_agent.message import Msg  # noqa: E402
from rx_agent.model.openai import OpenAIChatModel  # noqa: E402


def start_server(chunks: int, latency: float) -> tuple[subprocess.Popen[str], str]:
    """The test server in a child process; it prints its URL and stops when its stdin
    closes."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.model.openai_server",
         "--chunks", str(chunks), "--latency", str(latency)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    url = child.stdout.readline().strip()
    if not url.startswith("http://"):
        child.kill()
        raise SystemExit(f"the test server did not start (said {url!r})")
    return child, url


class ThreadSampler:
    """Records every thread alive on the client side while a run is in progress."""

    def __init__(self) -> None:
        self.seen: dict[int, str] = {}

    def sample(self) -> None:
        for thread in threading.enumerate():
            if thread.ident is not None:
                self.seen[thread.ident] = thread.name

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.sample()
            await asyncio.sleep(0.01)


async def timed(
    call: Callable[[int], Awaitable[str]], n: int, sampler: ThreadSampler
) -> tuple[float, float]:
    """Wall and CPU seconds of ``n`` concurrent calls."""
    stop = asyncio.Event()
    watcher = asyncio.create_task(sampler.run(stop))
    cpu = time.process_time()
    started = time.perf_counter()
    answers = await asyncio.gather(*(call(i) for i in range(n)))
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    stop.set()
    await watcher
    expected = answers[0]
    if not expected or any(a != expected for a in answers):
        raise SystemExit(f"unexpected answers: {set(answers)!r}")
    return wall, cpu


async def main(args: argparse.Namespace) -> None:
    server, url = start_server(args.chunks, args.latency)
    model = OpenAIChatModel("bench-model", base_url=url, api_key="sk-bench")
    try:
        call: Callable[[int], Awaitable[str]]
        if args.mode == "agent":
            from rx_agent import ReActAgent, RuntimeContext

            agent = ReActAgent(name="bench", sys_prompt="Be brief.", model=model)

            async def call(i: int) -> str:
                result = await agent.acall("hi", RuntimeContext(session_id=f"s{i}"))
                return result.text

        else:
            hi = [Msg(role="user", content="hi")]

            async def call(i: int) -> str:
                chunks = await await_observable(model.stream(hi).pipe(ops.to_list()))
                return "".join(getattr(c, "text", "") for c in chunks)

        sampler = ThreadSampler()
        await timed(call, 1, ThreadSampler())  # warm-up: imports, first connection
        wall_1 = min([(await timed(call, 1, sampler))[0] for _ in range(3)])
        # The first wave also opens its connections; later waves reuse them.
        walls = [await timed(call, args.n, sampler) for _ in range(args.rounds)]
        events = args.chunks + 3  # text chunks, finish, usage, [DONE]
        print(f"mode={args.mode} n={args.n} latency={args.latency * 1000:.0f}ms/chunk "
              f"({events} SSE events per answer)")
        print(f"wall(1)   = {wall_1 * 1000:8.1f} ms")
        for i, (wall_n, cpu_n) in enumerate(walls):
            label = "new connections" if i == 0 else "reused connections"
            print(f"wall({args.n}) = {wall_n * 1000:8.1f} ms   "
                  f"wall({args.n})/wall(1) = {wall_n / wall_1:.2f}   "
                  f"client CPU {cpu_n * 1000:.0f} ms = {cpu_n / args.n * 1000:.2f} ms/call   "
                  f"({label})")
        clients = sum(len(pool.clients) for pool in model._pools.values())
        print(f"client event loops used: {len(model._pools)} (HTTP connections: {clients})")
        names = sorted(sampler.seen.values())
        print(f"client-side threads seen during the runs: {len(names)} ({', '.join(names)})")
    finally:
        await model.aclose()
        if server.stdin is not None:
            server.stdin.close()
        server.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="concurrent calls")
    parser.add_argument("--chunks", type=int, default=5, help="text chunks per answer")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds before each event")
    parser.add_argument("--mode", choices=["agent", "model"], default="agent")
    parser.add_argument("--rounds", type=int, default=3, help="waves of n concurrent calls")
    asyncio.run(main(parser.parse_args()))
