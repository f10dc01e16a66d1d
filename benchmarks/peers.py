"""Every peer side by side: rx_agent, AgentScope Python, LangChain and pydantic-ai.

    python benchmarks/peers.py                 # the full suite (a few minutes)
    python benchmarks/peers.py --quick         # a smoke run (about a minute)
    python benchmarks/peers.py --peers langchain,pydantic_ai --json out.json

Each framework runs in a long-lived worker process (``benchmarks/peers/worker_*.py``);
every peer in its own venv, pinned from PyPI (``benchmarks/peers/setup.py``), ours with
this Python. Run by run, the driver sends the same request to every worker in an order
that rotates each repeat, so drift on a busy machine lands on all of them alike. Figures
are medians over the repeats of CPU time per call (``time.process_time`` in the worker)
and, for the concurrency workload, of wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from peers.client import Worker, WorkerError  # noqa: E402
from peers.setup import PEERS, SetupError, clean_env, ensure_venv  # noqa: E402

OURS = "rx_agent"
#: option -> (full, --quick): repeats, calls per timed batch, layers, concurrent calls.
SIZES = {"repeats": (15, 3), "calls": (40, 5), "layers": (10, 2), "concurrent": (1000, 100),
         "concurrent_repeats": (3, 1)}


BASELINE = "rx_agent@baseline"


def ours_env(tree: Path = HERE.parent) -> dict[str, str]:
    """This Python, with ``tree``'s ``rx_agent`` (default: this checkout's) first on
    the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree),
                                                      env.get("PYTHONPATH", "")]))
    return env


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu}), "
            f"CPython {platform.python_version()}")


def load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


class Suite:
    def __init__(self, args: argparse.Namespace, workers: dict[str, Worker]) -> None:
        self.args = args
        self.workers = workers
        self.names = list(workers)
        #: workload -> framework -> one figure per repeat
        self.samples: dict[str, dict[str, list[float]]] = {}

    def _add(self, workload: str, name: str, value: float) -> None:
        self.samples.setdefault(workload, {}).setdefault(name, []).append(value)

    def _round(self, r: int, workloads: list[tuple[str, dict[str, Any]]]) -> None:
        for workload, req in workloads:
            # Rotate who goes first: no framework always runs right after another.
            order = self.names[r % len(self.names):] + self.names[:r % len(self.names)]
            for name in order:
                reply = self.workers[name].request(**req)
                if req["op"] == "concurrent":
                    self._add(workload, name, reply["ratio"])
                    self._add("concurrent_cpu", name, reply["cpu_us_per_call"])
                else:
                    self._add(workload, name, reply["cpu_us"])

    def run(self) -> None:
        a = self.args
        per_call = [
            ("call", {"op": "measure", "calls": a.calls, "warmup": 1, "tools": 0, "layers": 0}),
            ("tool_call", {"op": "measure", "calls": a.calls, "warmup": 1, "tools": 1,
                           "layers": 0}),
            ("layered", {"op": "measure", "calls": a.calls, "warmup": 1, "tools": 1,
                         "layers": a.layers}),
        ]
        for name in self.names:  # warm every code path once, untimed
            for _, req in per_call:
                self.workers[name].request(**{**req, "calls": 2})
        for r in range(a.repeats):
            self._round(r, per_call)
            print(f"  repeat {r + 1}/{a.repeats} done", file=sys.stderr, flush=True)
        concurrent = [("concurrent", {"op": "concurrent", "calls": a.concurrent,
                                      "chunks": 5, "latency": a.latency})]
        for r in range(a.concurrent_repeats):
            self._round(r, concurrent)
            print(f"  concurrency {r + 1}/{a.concurrent_repeats} done", file=sys.stderr,
                  flush=True)

    def figures(self) -> dict[str, dict[str, float]]:
        return figures(self.samples, self.names, self.args.layers)


def figures(samples: dict[str, dict[str, list[float]]], names: list[str],
            layers: int) -> dict[str, dict[str, float]]:
    """Median per workload and framework, plus the derived per-round and per-layer
    figures: the median of the differences within each repeat (the two workloads ran
    seconds apart there), not the difference of two medians, which drift between
    repeats can move by more than a layer costs."""
    med = {w: {n: statistics.median(v) for n, v in per.items()} for w, per in samples.items()}

    def paired(minuend: str, subtrahend: str, n: str) -> float:
        return statistics.median(a - b for a, b in zip(samples[minuend][n],
                                                       samples[subtrahend][n], strict=True))

    med["tool_round"] = {n: paired("tool_call", "call", n) for n in names}
    med["per_layer"] = {n: paired("layered", "tool_call", n) / layers for n in names}
    return med


ROWS = [
    ("call", "CPU per call: 5-chunk reply, no tools, no middleware", "µs"),
    ("tool_round", "CPU per tool round (one async tool, then the same reply)", "µs"),
    ("per_layer", "CPU per layer (one pass-through per hook), one tool-round call", "µs"),
    ("concurrent", "{n} concurrent calls: wall / one call's wall", "x"),
    ("concurrent_cpu", "CPU per call with {n} in flight", "µs"),
]


def table(fig: dict[str, dict[str, float]], names: list[str], args: argparse.Namespace,
          versions: dict[str, str]) -> str:
    head = "| workload | " + " | ".join(f"{n} {versions[n]}" for n in names) + " |"
    lines = [head, "| --- |" + " --- |" * len(names)]
    for key, label, unit in ROWS:
        cells = []
        for n in names:
            value = fig[key][n]
            text = f"{value:.2f}x" if unit == "x" else f"{value:,.0f} µs"
            if n != OURS:
                ours = fig[key][OURS]
                text += f" ({value / ours:.1f}x)" if ours > 0 else " (n/a)"
            cells.append(text)
        lines.append(f"| {label.format(n=f'{args.concurrent:,}')} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a ~1 minute smoke run")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"comma-separated, from {','.join(PEERS)} (empty: ours only)")
    parser.add_argument("--cache-dir", default=None, help="venvs; default ~/.cache/rx_agent-bench")
    for name, (full, quick) in SIZES.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=None,
                            help=f"default {full} ({quick} with --quick)")
    parser.add_argument("--latency", type=float, default=0.02,
                        help="seconds the model waits before each chunk (concurrency)")
    parser.add_argument("--json", help="also write every sample and figure to this file")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout of rx_agent (the tree before a change): its "
                        f"worker runs beside ours, as {BASELINE!r}, this checkout's "
                        "worker script on that tree's package")
    args = parser.parse_args(argv)
    for name, (full, quick) in SIZES.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    peers = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        parser.error(f"unknown peer(s) {', '.join(unknown)}; expected {', '.join(PEERS)}")

    started = time.perf_counter()
    workers: dict[str, Worker] = {}
    try:
        workers[OURS] = Worker(OURS, sys.executable, env=ours_env())
        if args.baseline is not None:
            base = Worker(OURS, sys.executable, env=ours_env(args.baseline.resolve()))
            base.info["version"] += f" ({args.baseline})"
            workers[BASELINE] = base
        for peer in peers:
            try:
                python = ensure_venv(peer, args.cache_dir)
                workers[peer] = Worker(peer, python, env=clean_env())
            except (SetupError, WorkerError) as exc:
                print(f"{peer} unavailable, left out: {exc}", file=sys.stderr)
        versions = {n: w.info["version"] for n, w in workers.items()}
        print(f"machine: {machine()}; load average at start {load()}", flush=True)
        print("versions: " + ", ".join(f"{n} {v}" for n, v in versions.items()), flush=True)
        suite = Suite(args, workers)
        suite.run()
    finally:
        for w in workers.values():
            w.close()
    fig = suite.figures()
    print(f"\nmedians of {args.repeats} interleaved repeats of {args.calls} calls each "
          f"(concurrency: {args.concurrent_repeats}); (Nx) = peer / rx_agent; "
          f"load average at end {load()}; {time.perf_counter() - started:.0f} s\n")
    print(table(fig, list(workers), args, versions))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"machine": machine(), "versions": versions, "args": vars(args),
             "samples": suite.samples, "figures": fig}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
