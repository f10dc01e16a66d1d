"""The request-growth benchmark keeps running (its smoke size), alone and as a
section of the suite's ``--smoke`` run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_request_growth.py"


@pytest.mark.timeout(120)
def test_the_request_growth_benchmark_runs() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--smoke"], check=False,
                          capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr
    for section in ("[request building]", "[usage estimate]", "[tools]"):
        assert section in done.stdout
    for adapter in ("OpenAI", "Anthropic"):
        assert f"  {adapter} " in done.stdout
    assert "200/20" in done.stdout and "50/10 tools" in done.stdout
    assert "rebuilt -> kept" in done.stdout
