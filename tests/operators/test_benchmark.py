"""The operator benchmark keeps running (its figures are on the benchmarks page)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "operators.py"


@pytest.mark.timeout(120)
def test_the_operator_benchmark_runs() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--smoke"], check=False,
                          capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr
    for name in ("map_text", "of_type"):
        for what in ("per event", "per hook invocation", "agent reply, whole"):
            assert f"  {name}: {what}" in done.stdout, done.stdout
    assert "ours/rx" in done.stdout and "async gen" in done.stdout
