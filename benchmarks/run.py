"""rx_agent benchmark suite: ours, the bare-reactivex floor and AgentScope Python,
measured side by side in one run. Prints a table of ratios.

    python benchmarks/run.py            # full suite (installs AgentScope into a venv)
    python benchmarks/run.py --no-peer  # ours and the floor only
    python benchmarks/run.py --smoke    # tiny sizes, no peer, no targets: CI keeps it alive
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_request_growth  # noqa: E402
import gc_objects  # noqa: E402
import workloads as w  # noqa: E402
from peer.setup_peer import PeerSetupError, ensure_peer_venv, run_peer  # noqa: E402

from rx_agent import ExtensionPoint  # noqa: E402

NS = (0, 1, 5, 10)
FLAVOURS = ("pass", "op")


def median(xs: list[float]) -> float:
    return statistics.median(xs)


class Suite:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.events = args.events
        self.repeats = args.repeats
        self.n_rounds = args.rounds
        self.peer_python: Path | None = None
        self.results: dict[str, Any] = {}
        self.rows: list[tuple[str, str, str]] = []

    def row(self, what: str, value: str, target: str = "") -> None:
        self.rows.append((what, value, target))
        print(f"  {what:<58} {value:>14}  {target}", flush=True)

    def peer(self, **params: Any) -> dict[str, Any] | None:
        if self.peer_python is None:
            return None
        return run_peer(self.peer_python, **params)

    # 1-3: streaming overhead, the floor, the peer ---------------------------------
    async def streaming(self) -> None:
        print("\n[1-3] streaming: one reply of E text deltas, N middlewares on "
              "on_agent+on_reasoning+on_model_call", flush=True)
        ours: dict[tuple[str, int], float] = {}
        theirs: dict[tuple[str, int], float] = {}
        depths = [3 * n for n in NS]  # the floor: one map per hook, three hooks a layer
        samples: dict[tuple[str, int], list[float]] = {(f, n): [] for f in FLAVOURS for n in NS}
        floor_samples: dict[int, list[float]] = {d: [] for d in depths}
        # Ours and the floor alternate run by run, so drift on a busy machine hits all.
        for _ in range(self.repeats):
            for n, depth in zip(NS, depths, strict=True):
                for flavour in FLAVOURS:
                    samples[flavour, n] += await w.time_runs(
                        lambda n=n, flavour=flavour: w.stream_agent(n, flavour, self.events),
                        1, warmup=0 if samples[flavour, n] else 1)
                floor_samples[depth] += w.floor_seconds(self.events, depth, 1)
        for flavour in FLAVOURS:
            for n in NS:
                ours[flavour, n] = median(samples[flavour, n]) / self.events * 1e6
                report = self.peer(workload="stream", n_mw=n, flavour=flavour,
                                   events=self.events, repeats=self.repeats)
                if report is not None:
                    theirs[flavour, n] = report["us_per_event"]
                peer_txt = f"  agentscope {theirs[flavour, n]:.2f}" if report else ""
                print(f"    {flavour:<4} N={n:<2} ours {ours[flavour, n]:.3f} us/event{peer_txt}",
                      flush=True)
        floor = [median(floor_samples[d]) / self.events * 1e6 for d in depths]
        floor_layer = w.slope(list(NS), floor)
        slope_ours = {f: w.slope(list(NS), [ours[f, n] for n in NS]) for f in FLAVOURS}
        self.results["stream"] = {"ours": {f"{f}/{n}": v for (f, n), v in ours.items()},
                                  "agentscope": {f"{f}/{n}": v for (f, n), v in theirs.items()},
                                  "floor_us_per_event": dict(zip(depths, floor, strict=True)),
                                  "slope_us_per_layer": slope_ours,
                                  "floor_us_per_layer": floor_layer}
        print()
        self.row("E2E, no middleware: ours us/event", f"{ours['pass', 0]:.3f}")
        if theirs:
            ratio = theirs["pass", 0] / ours["pass", 0]
            self.row("E2E, no middleware: agentscope / ours", f"{ratio:.1f}x", ">= 5x")
        self.row("per layer, pass-through: ours ns/event/layer",
                 f"{slope_ours['pass'] * 1000:.1f}", "~0 (noise)")
        self.row("per layer, one op/hook: ours ns/event/layer",
                 f"{slope_ours['op'] * 1000:.1f}")
        self.row("per layer, floor (3 bare maps) ns/event/layer", f"{floor_layer * 1000:.1f}")
        self.row("per layer, one op/hook: ours / floor",
                 f"{slope_ours['op'] / floor_layer:.2f}x", "<= 1.5x")
        if theirs:
            peer_slope = {f: w.slope(list(NS), [theirs[f, n] for n in NS]) for f in FLAVOURS}
            self.results["stream"]["agentscope_slope_us_per_layer"] = peer_slope
            self.row("per layer, one op/hook: agentscope / ours",
                     f"{peer_slope['op'] / slope_ours['op']:.1f}x", ">= 5x")
            self.row("per layer, pass-through: agentscope ns/event/layer",
                     f"{peer_slope['pass'] * 1000:.0f}")

    # 4: ReAct rounds ---------------------------------------------------------------
    async def rounds(self) -> None:
        print(f"\n[4] ReAct: {self.n_rounds} tool rounds + an answer, N middlewares also on "
              "on_acting", flush=True)
        reps = self.args.round_repeats
        ours: dict[tuple[str, int], float] = {}
        theirs: dict[tuple[str, int], float] = {}
        for flavour in FLAVOURS:
            # Ours: N=0 and N=10 runs alternate, so drift on a busy machine hits both.
            samples: dict[int, list[float]] = {0: [], 10: []}
            for _ in range(reps):
                for n in (0, 10):
                    samples[n] += await w.time_runs(
                        lambda n=n, flavour=flavour: w.rounds_agent(n, flavour, self.n_rounds),
                        1, warmup=0)
            for n in (0, 10):
                ours[flavour, n] = median(samples[n]) / self.n_rounds * 1e6
                report = self.peer(workload="rounds", n_mw=n, flavour=flavour,
                                   rounds=self.n_rounds, repeats=reps)
                if report is not None:
                    theirs[flavour, n] = report["us_per_round"]
                peer_txt = f"  agentscope {theirs[flavour, n]:.1f}" if report else ""
                print(f"    {flavour:<4} N={n:<2} ours {ours[flavour, n]:.1f} us/round{peer_txt}",
                      flush=True)
        self.results["rounds"] = {"ours": {f"{f}/{n}": v for (f, n), v in ours.items()},
                                  "agentscope": {f"{f}/{n}": v for (f, n), v in theirs.items()}}
        print()
        for flavour, target in (("pass", ">= 10x"), ("op", ">= 2x")):
            layer = (ours[flavour, 10] - ours[flavour, 0]) / 10
            self.row(f"per round per layer, {flavour}: ours us", f"{layer:.2f}")
            if theirs:
                peer_layer = (theirs[flavour, 10] - theirs[flavour, 0]) / 10
                ratio = peer_layer / layer if layer > 0 else float("inf")
                self.row(f"per round per layer, {flavour}: agentscope us", f"{peer_layer:.2f}")
                self.row(f"per round per layer, {flavour}: agentscope / ours",
                         f"{ratio:.1f}x", target)
        self.row("per round, no middleware: ours us", f"{ours['pass', 0]:.1f}")
        if theirs:
            self.row("per round, no middleware: agentscope / ours",
                     f"{theirs['pass', 0] / ours['pass', 0]:.1f}x")

    # 5: concurrency and memory -----------------------------------------------------
    async def concurrency(self) -> None:
        calls = self.args.calls
        print(f"\n[5] concurrency: {calls} concurrent calls on one loop, 20 ms before each "
              "chunk", flush=True)
        self.results["concurrency"] = {}
        # A 20-token reply is the headline; a 5-token one (7 chunks with usage and the
        # finish reason) is the stress case: least waiting to hide the runtime's CPU in.
        for chunks, label in ((20, "20-chunk reply"), (5, "5-chunk reply")):
            result = await w.concurrency(calls, chunks=chunks, latency=0.02)
            self.results["concurrency"][chunks] = result.__dict__
            self.row(f"{calls} calls wall / one call wall ({label})",
                     f"{result.all_calls_s / result.one_call_s:.2f}x", "<= 2x")
            self.row(f"peak RSS per in-flight call ({label}, KB)",
                     f"{result.peak_rss_per_call_bytes / 1024:.1f}", "< 50 KB")
            self.row(f"threads alive at most ({label})", f"{result.max_threads}")
        big = self.args.big_calls
        if big:
            # Not a target: how far one loop goes (CPU per call bounds it, not threads).
            result = await w.concurrency(big, chunks=5, latency=0.02)
            self.results["concurrency"][f"{big} calls, 5 chunks"] = result.__dict__
            self.row(f"{big} calls wall / one call wall (5-chunk reply)",
                     f"{result.all_calls_s / result.one_call_s:.2f}x")
            self.row(f"peak RSS per in-flight call ({big} calls, KB)",
                     f"{result.peak_rss_per_call_bytes / 1024:.1f}")
            self.row(f"threads alive at most ({big} calls)", f"{result.max_threads}")

    # 7: synchronous tools ----------------------------------------------------------
    async def sync_tools(self) -> None:
        print(f"\n[7] tools: {self.n_rounds} rounds of a sync tool vs an async one, "
              "interleaved", flush=True)
        reps = self.args.round_repeats
        samples: dict[str, list[float]] = {"sync": [], "async": []}
        for _ in range(reps):
            for kind in ("sync", "async"):
                samples[kind] += await w.time_runs(
                    lambda kind=kind: w.tool_agent(kind, self.n_rounds), 1, warmup=0)
        # The hop alone, next to its floor (two bare threads): what is left of a sync
        # round's extra wall time once the runtime's own work is gone is the OS waking
        # a parked thread twice, which no executor design avoids.
        hops: dict[str, list[float]] = {"tools": [], "bare": []}
        for _ in range(max(3, reps // 4)):
            for kind in ("tools", "bare"):
                hops[kind].append(await w.hop_seconds(kind, 200))
        per = {k: median(v) / self.n_rounds * 1e6 for k, v in samples.items()}
        hop = {k: median(v) * 1e6 for k, v in hops.items()}
        self.results["tools"] = {**per, "hop_tools": hop["tools"], "hop_bare": hop["bare"]}
        self.row("per round, async tool: ours us", f"{per['async']:.1f}")
        self.row("per round, sync tool (thread hop): ours us", f"{per['sync']:.1f}")
        self.row("sync tool round / async tool round", f"{per['sync'] / per['async']:.2f}x",
                 "<= 1.5x")
        self.row("  sync round - async round (the hop in a round): us",
                 f"{per['sync'] - per['async']:.1f}")
        self.row("  loop -> tool thread -> loop, alone: us", f"{hop['tools']:.1f}")
        self.row("  the floor: bare lock + call_soon_threadsafe: us", f"{hop['bare']:.1f}")
        self.row("  tool-thread hop / floor", f"{hop['tools'] / hop['bare']:.2f}x")

    # 8: objects per call -------------------------------------------------------------
    async def objects(self) -> None:
        print("\n[8] GC-tracked objects per call (5-chunk reply, no tools)", flush=True)
        calls = min(self.args.calls, 500)
        flight, kept, _ = await gc_objects.in_flight(calls, 5, False, 0)
        left, _ = await gc_objects.left_over(calls, 5, False, 0)
        self.results["objects"] = {"in_flight": flight, "kept_after": kept,
                                   "left_for_gc": left}
        self.row("objects per in-flight call (of which kept after it)",
                 f"{flight:.0f} ({kept:.0f})", "< 60")
        self.row("objects per finished call left for the cyclic GC", f"{left:.0f}", "0")

    # 6: inactive points ------------------------------------------------------------
    async def inactive(self) -> None:
        print("\n[6] inactive points: 10 middlewares active only at on_model_call", flush=True)
        only_model = {ExtensionPoint.ON_MODEL_CALL}
        agent = w.stream_agent(10, "pass", 1, only_model)
        built = {p.value: len(agent.plan.participants(p)) for p in ExtensionPoint}
        reps = self.repeats * 2
        base, model_only = [], []
        for _ in range(3):  # interleaved
            base += await w.time_runs(lambda: w.stream_agent(0, "op", self.events), reps)
            model_only += await w.time_runs(
                lambda: w.stream_agent(10, "op", self.events, only_model), reps)
        # Ten one-op layers at on_model_call only; the other points must cost nothing:
        # compare with N=0 plus the floor of 10 maps.
        floor10 = median(w.floor_seconds(self.events, 10, self.repeats)) - median(
            w.floor_seconds(self.events, 0, self.repeats))
        extra = (median(model_only) - median(base)) / self.events * 1e9
        self.results["inactive"] = {"participants": built, "extra_ns_per_event": extra,
                                    "floor_10_maps_ns_per_event": floor10 / self.events * 1e9}
        self.row("participants at the other points",
                 str(sum(v for k, v in built.items() if k != "on_model_call")), "0")
        self.row("extra ns/event (10 one-op layers at on_model_call only)", f"{extra:.0f}")
        self.row("floor of 10 bare maps ns/event", f"{floor10 / self.events * 1e9:.0f}",
                 "extra ~= floor")

    # 9: request building as the conversation and the toolkit grow -------------------
    async def request_growth(self) -> None:
        print("\n[9] request growth: kept wire forms and tool schemas vs rebuilt every call "
              "(benchmarks/bench_request_growth.py)", flush=True)
        rows, _ = await bench_request_growth.run(self.args.smoke)
        for what, value, target in rows:
            self.row(what, value, target)

    async def run(self) -> None:
        gc.collect()
        gc.freeze()  # as the peer does: import garbage never lands in a timed run
        await self.streaming()
        await self.rounds()
        await self.concurrency()
        await self.inactive()
        await self.sync_tools()
        await self.objects()
        await self.request_growth()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, no peer: checks the suite runs (CI)")
    parser.add_argument("--no-peer", action="store_true", help="skip AgentScope")
    parser.add_argument("--peer-venv", default=str(HERE / ".peer-venv"))
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--round-repeats", type=int, default=40)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--big-calls", type=int, default=10_000,
                        help="the large concurrency run (0 skips it)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.smoke:
        args.events, args.repeats, args.round_repeats, args.calls = 300, 2, 2, 50
        args.big_calls = 200
        args.no_peer = True
    suite = Suite(args)
    if not args.no_peer:
        try:
            suite.peer_python = ensure_peer_venv(args.peer_venv)
        except PeerSetupError as exc:
            print(f"AgentScope peer unavailable, measuring ours only: {exc}", file=sys.stderr)
    started = time.perf_counter()
    asyncio.run(suite.run())
    print(f"\nSummary ({time.perf_counter() - started:.0f} s)")
    for what, value, target in suite.rows:
        print(f"  {what:<58} {value:>14}  {target}")
    if args.json:
        Path(args.json).write_text(json.dumps(suite.results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
