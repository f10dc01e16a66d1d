"""The load benchmark keeps running (its smoke size: 10 clients, one call each)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "serve_load.py"


@pytest.mark.timeout(120)
def test_the_serve_load_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(BENCH), "--smoke", "--json", str(out)],
                          check=False, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr
    rows = re.findall(r"^\| (HTTP/SSE[^|]*|in-process[^|]*) \|.*\| (\d+) \|$", done.stdout,
                      re.MULTILINE)
    assert [calls for _, calls in rows] == ["10", "10"], done.stdout
    # Every call streamed its whole reply: start, 5 deltas, result, end and the rest.
    assert "events per call: 12" in done.stdout
    assert "the floor 12)" in done.stdout, done.stdout
    # The OpenAI-compatible route, loaded side by side on the same server.
    assert re.search(r"^\| HTTP/OpenAI [^|]* stream[^|]*\|.*\| 10 \|$", done.stdout,
                     re.MULTILINE), done.stdout
    # The floor beside them: a bare ASGI app replaying the route's frames, every call
    # answered whole (its frames counted by the same client).
    assert re.search(r"^\| the floor: a bare ASGI app[^|]*\|.*\| 10 \|$", done.stdout,
                     re.MULTILINE), done.stdout
    assert "the floor's CPU per event over in-process" in done.stdout
    # Every mode's figures are written (their values: clock ticks at this size).
    figures = json.loads(out.read_text())
    assert set(figures) == {"sse", "openai", "in_process", "floor"}, figures
    for mode in figures.values():
        assert mode["first_event_p50_ms"] > 0 and mode["cpu_per_event_us"] >= 0, figures
