"""The concurrency benchmark keeps running (a small size) and prints its floors; the
state an agent call holds while it waits on its model stays small."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_concurrency.py"


@pytest.mark.timeout(180)
def test_the_concurrency_benchmark_runs_with_its_floors(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(BENCH), "--calls", "300", "--runs", "1",
                           "--latency", "0.01", "--json", str(out)],
                          check=False, capture_output=True, text=True, timeout=170)
    assert done.returncode == 0, done.stderr
    for row in ("per call concurrent / one call alone", "target <= 5x",
                "the floor: 300 bare calls, seven ticks each",
                "more tracked objects each (to an agent call's count mid-reply)",
                "a full collection, per object walked",
                "peak memory per in-flight call", "an idle cached session"):
        assert row in done.stdout, done.stdout
    figures = json.loads(out.read_text())
    # Waiting on a timer costs something, so no ratio is below about one call's wall.
    for name in ("latency_all_over_one", "floor_all_over_one", "floor_held_all_over_one"):
        assert figures[name] > 0.9, figures
    # What a call holds mid-reply (35 tracked objects when this test was written):
    # a regrowth toward the 50 of before shows here, not only in a benchmark run.
    assert 10 <= figures["objects_in_flight_per_call"] <= 42, figures
    # The held floor tops a bare call up to the agent's count: it holds fewer of its own.
    bare = figures["bare_objects_in_flight_per_call"]
    assert 3 <= bare < figures["objects_in_flight_per_call"], figures
    assert figures["floor_held_objects"] == round(figures["objects_in_flight_per_call"] - bare)
