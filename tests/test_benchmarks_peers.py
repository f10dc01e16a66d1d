"""The peers benchmark's protocol, driven against our own worker (no peer is installed)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import rx_agent

ROOT = Path(__file__).resolve().parents[1]


def _load(relative: str, name: str) -> object:
    # By path, so benchmarks/ never lands on sys.path (its module names are generic).
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_client = _load("peers/client.py", "rx_agent_bench_peers_client")
Worker = _client.Worker  # type: ignore[attr-defined]
WorkerError = _client.WorkerError  # type: ignore[attr-defined]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker("rx_agent", sys.executable, env=_env())
    try:
        yield w
    finally:
        w.close()


@pytest.mark.timeout(60)
def test_the_worker_announces_itself_and_measures_calls(worker: Worker) -> None:
    assert worker.info == {"ready": True, "framework": "rx_agent",
                           "version": rx_agent.__version__, "python": worker.info["python"]}
    plain = worker.request(op="measure", calls=3, warmup=1, tools=0, layers=0, chunks=5)
    layered = worker.request(op="measure", calls=3, warmup=1, tools=1, layers=2, chunks=5)
    for reply in (plain, layered):
        assert set(reply) == {"cpu_us", "wall_us"}
        assert reply["cpu_us"] > 0 and reply["wall_us"] > 0


@pytest.mark.timeout(60)
def test_concurrent_calls_wait_on_the_model_and_report_the_ratio(worker: Worker) -> None:
    reply = worker.request(op="concurrent", calls=20, chunks=5, latency=0.01)
    # Five text chunks, usage and finish: seven waits of 10 ms for one call.
    assert reply["one_s"] >= 0.07
    assert reply["all_s"] >= 0.07
    assert reply["ratio"] == pytest.approx(reply["all_s"] / reply["one_s"])
    assert reply["cpu_us_per_call"] > 0


@pytest.mark.timeout(60)
def test_a_bad_request_is_an_error_and_the_worker_keeps_serving(worker: Worker) -> None:
    with pytest.raises(WorkerError, match="unknown op 'nope'"):
        worker.request(op="nope")
    with pytest.raises(WorkerError, match="needs calls >= 1"):
        worker.request(op="measure", calls=0)
    assert worker.request(op="measure", calls=1, warmup=0)["cpu_us"] > 0


def test_quit_ends_the_worker(worker: Worker) -> None:
    assert worker.request(op="quit") == {"bye": True}
    assert worker._proc.wait(timeout=10) == 0
    with pytest.raises(WorkerError, match="exited"):
        worker._read()


def test_an_unknown_framework_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown framework 'crewai'"):
        Worker("crewai", sys.executable)


@pytest.mark.timeout(120)
def test_the_driver_prints_one_table_for_ours_alone() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "peers.py"), "--quick", "--peers", "",
         "--repeats", "1", "--concurrent", "10", "--latency", "0.005"],
        capture_output=True, text=True, timeout=110, env=_env(), check=False)
    assert done.returncode == 0, done.stderr
    assert f"| workload | rx_agent {rx_agent.__version__} |" in done.stdout
    for row in ("CPU per call: 5-chunk reply", "CPU per tool round", "CPU per layer",
                "10 concurrent calls: wall / one call's wall", "CPU per call with 10 in flight"):
        assert f"| {row}" in done.stdout, done.stdout


def test_derived_figures_pair_the_workloads_of_each_repeat() -> None:
    driver = _load("peers.py", "rx_agent_bench_peers_driver")
    # Repeat 2 ran 3,000 µs slower throughout, repeat 3 sped up during its layered
    # batch. Each repeat's own gap is 100 µs per layer in two of three repeats; the
    # difference of the two medians would say 90.
    samples = {
        "call": {"x": [1000.0, 4000.0, 1100.0]},
        "tool_call": {"x": [1500.0, 4500.0, 1600.0]},
        "layered": {"x": [2500.0, 5500.0, 1700.0]},
    }
    fig = driver.figures(samples, ["x"], 10)  # type: ignore[attr-defined]
    assert fig["call"]["x"] == 1100.0
    assert fig["tool_round"]["x"] == 500.0
    assert fig["per_layer"]["x"] == 100.0
