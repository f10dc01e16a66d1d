"""`/metrics` through prometheus_client: the same names and labels as before, one
registry per app in a single process, and with `rx-agent serve --workers 2` any
worker's answer covers both (its multiprocess mode, in a private directory that is
removed at exit)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from rx_agent import ReActAgent
from rx_agent.serve import create_app

from .conftest import EchoModel
from .test_workers import AUTH, JSON, Worker, _reply

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of a Prometheus text answer: (name, labels) -> value."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def test_one_app_counts_calls_errors_tokens_and_latency_in_its_own_registry(
    live: Any,
) -> None:
    servers = [live(create_app(ReActAgent(name=f"a{i}", model=EchoModel()))) for i in (1, 2)]
    events = 0
    for text in ("a", "b"):
        run = httpx.post(servers[0].url + "/v1/sessions/s1/messages", json={"message": text},
                         headers={"Accept": "application/json"}).headers["x-run-id"]
        events += httpx.get(servers[0].url + f"/v1/sessions/s1/runs/{run}").json()["events"]
    httpx.post(servers[0].url + "/v1/sessions/s1/messages", content=b"{nope")
    answer = httpx.get(servers[0].url + "/metrics")
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = samples(answer.text)
    assert value(found, "rx_agent_serve_calls_total", kind="message", outcome="completed") == 2
    assert value(found, "rx_agent_serve_tokens_total", kind="input") == 6
    assert value(found, "rx_agent_serve_tokens_total", kind="output") == 4
    assert value(found, "rx_agent_serve_errors_total", code="bad_json", status="400") == 1
    assert value(found, "rx_agent_serve_call_duration_seconds_count", outcome="completed") == 2
    assert value(found, "rx_agent_serve_call_duration_seconds_bucket", outcome="completed",
                 le="+Inf") == 2
    assert value(found, "rx_agent_serve_first_event_seconds_count") == 2
    assert events > 10 and value(found, "rx_agent_serve_events_total") == events
    assert value(found, "rx_agent_serve_active_calls") == 0
    # Buckets are cumulative, bounds as before.
    bounds = sorted((float(dict(labels)["le"]), v) for (name, labels), v in found.items()
                    if name == "rx_agent_serve_first_event_seconds_bucket")
    assert [b for b, _ in bounds] == [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                                      120.0, float("inf")]
    assert [v for _, v in bounds] == sorted(v for _, v in bounds)
    # The other app in this process counted nothing.
    other = samples(httpx.get(servers[1].url + "/metrics").text)
    assert value(other, "rx_agent_serve_calls_total", kind="message",
                 outcome="completed") is None
    assert value(other, "rx_agent_serve_tokens_total", kind="input") == 0


def _metrics(worker: Worker) -> Samples:
    # A new connection each time: the kernel hands it to either worker.
    r = httpx.get(worker.url + "/metrics", headers=AUTH, timeout=10)
    assert r.status_code == 200, r.text
    return samples(r.text)


def test_with_two_workers_every_scrape_covers_both(store_url: str, tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    server = Worker(store_url, tmp_path, "--workers", "2", env={"TMPDIR": str(temp)})
    try:
        server.wait_ready()
        [metrics_dir] = temp.glob("rx-agent-metrics-*")  # private to this server
        pids: set[str] = set()
        calls = 0
        deadline = time.monotonic() + 30
        while (len(pids) < 2 or calls < 4) and time.monotonic() < deadline:
            pids.add(_reply(server, "m", f"m{calls}").split("@")[1].split(":")[0])
            calls += 1
        assert len(pids) == 2, "both workers should have served calls"
        bad = httpx.post(server.url + "/v1/sessions/m/messages", content=b"{", headers=JSON)
        assert bad.status_code == 400
        for _ in range(8):  # whichever worker answers, it counts every worker's calls
            found = _metrics(server)
            assert value(found, "rx_agent_serve_calls_total", kind="message",
                         outcome="completed") == calls
            assert value(found, "rx_agent_serve_call_duration_seconds_count",
                         outcome="completed") == calls
            assert value(found, "rx_agent_serve_tokens_total", kind="input") == 3 * calls
            assert value(found, "rx_agent_serve_errors_total", code="bad_json",
                         status="400") == 1
            assert value(found, "rx_agent_serve_active_calls") == 0

        # A running call is active in every worker's answer (a live gauge, summed).
        slow = threading.Thread(target=lambda: httpx.post(
            server.url + "/v1/sessions/s/messages", json={"message": "slow please"},
            headers=JSON, timeout=30))
        slow.start()
        try:
            deadline = time.monotonic() + 10
            while value(_metrics(server), "rx_agent_serve_active_calls") != 1:
                assert time.monotonic() < deadline, "the slow call never counted as active"
            for _ in range(6):
                assert value(_metrics(server), "rx_agent_serve_active_calls") == 1
        finally:
            httpx.post(server.url + "/v1/sessions/s/interrupt", headers=AUTH, timeout=10)
            slow.join(20)
        assert value(_metrics(server), "rx_agent_serve_active_calls") == 0
        assert list(metrics_dir.glob("*.db"))
    finally:
        server.stop()
    assert server.proc.returncode == 0
    assert not metrics_dir.exists(), "the metrics directory outlived the server"


def test_a_killed_workers_active_calls_stop_counting(tmp_path: Path) -> None:
    """A worker killed mid-call leaves its live gauge behind; the next worker to start
    drops it (the counters stay: those calls did happen)."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    killed = ("import os\n"
              "from rx_agent.serve._metrics import Metrics\n"
              "m = Metrics(); assert m.multiprocess\n"
              "m.call_started(); m.error('bad_json', 400)\n"
              "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", killed], env=env, check=True, timeout=60)
    assert list(tmp_path.glob("gauge_livesum_*.db"))
    fresh = ("from rx_agent.serve._metrics import Metrics\n"
             "print(Metrics().render().decode())\n")
    done = subprocess.run([sys.executable, "-c", fresh], env=env, check=True, timeout=60,
                          capture_output=True, text=True)
    found = samples(done.stdout)
    assert value(found, "rx_agent_serve_errors_total", code="bad_json", status="400") == 1
    assert value(found, "rx_agent_serve_active_calls") == 0
