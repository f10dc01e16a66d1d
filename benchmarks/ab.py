"""Two checkouts of rx_agent side by side: one benchmark script, run by turns.

    git archive main | tar -x -C /tmp/base     # the tree before a change
    python benchmarks/ab.py --before /tmp/base --runs 5 -- run.py --no-peer --only bridges

Runs ``benchmarks/<script> <args> --json FILE`` in a subprocess per run, with
``PYTHONPATH`` set to the ``--before`` tree and to the ``--after`` one (default: this
checkout) by turns, so drift on a busy machine lands on both; the script itself is this
checkout's (it must use only what both trees have). Prints, per figure of the JSON, the
median before, the median after and after / before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _leaves(value: Any, prefix: str = "") -> dict[str, float]:
    """Every number in a JSON document, keyed by its path."""
    found: dict[str, float] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            found.update(_leaves(item, f"{prefix}{key}/"))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.update(_leaves(item, f"{prefix}{i}/"))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        found[prefix.rstrip("/")] = float(value)
    return found


def _run(tree: Path, script: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "figures.json"
        env = {**os.environ, "PYTHONPATH": str(tree)}
        done = subprocess.run([sys.executable, str(HERE / script[0]), *script[1:],
                               "--json", str(out)], env=env, stdout=subprocess.DEVNULL)
        # A script exits 1 when a figure misses its target: its figures still count.
        if not out.exists():
            raise SystemExit(f"{script[0]} on {tree} wrote no figures (exit {done.returncode})")
        return _leaves(json.loads(out.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, type=Path, help="the tree before")
    parser.add_argument("--after", type=Path, default=HERE.parent, help="the tree after")
    parser.add_argument("--runs", type=int, default=5, help="runs of each tree")
    parser.add_argument("script", nargs=argparse.REMAINDER,
                        help="-- SCRIPT ARGS: a script of benchmarks/ that takes --json")
    args = parser.parse_args(argv)
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        parser.error("name the benchmark script after --")
    samples: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for i in range(args.runs):
        # The order flips every run: neither tree always runs first.
        order = ("before", "after") if i % 2 == 0 else ("after", "before")
        for side in order:
            tree = args.before if side == "before" else args.after
            for key, value in _run(tree.resolve(), script).items():
                samples[side].setdefault(key, []).append(value)
        print(f"  run {i + 1}/{args.runs} done", file=sys.stderr, flush=True)
    print(f"{' '.join(script)}: medians of {args.runs} runs each, interleaved")
    print(f"  before: {args.before}\n  after:  {args.after}")
    print(f"  {'figure':<58} {'before':>12} {'after':>12} {'after/before':>13}")
    for key in sorted(set(samples["before"]) & set(samples["after"])):
        before = statistics.median(samples["before"][key])
        after = statistics.median(samples["after"][key])
        ratio = f"{after / before:.3f}" if before else "-"
        print(f"  {key:<58} {before:>12.4g} {after:>12.4g} {ratio:>13}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
