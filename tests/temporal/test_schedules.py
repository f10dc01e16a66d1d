"""Scheduled runs (issue #27, item 5): an agent called on an interval by a Temporal
Schedule, a fresh agent and session per trigger, the overlap policy and max_parallel,
managed with ``rx-agent schedule``; on the real dev server and worker processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from model.openai_server import OpenAIServer, Reply, text, tool_call

from rx_agent.temporal import connect
from rx_agent.temporal._schedule import describe_schedule

from .conftest import Workers

pytestmark = pytest.mark.timeout(180)

_ROOT = Path(__file__).resolve().parents[2]


def _cli(workers: Workers, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rx_agent", "schedule", *args, "--temporal", workers.address],
        env={**os.environ, "PYTHONPATH": str(_ROOT)}, capture_output=True, text=True,
        check=False, timeout=60)


def _lines(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


async def _until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def test_an_interval_schedule_runs_a_fresh_call_each_time_until_paused(
    workers: Workers, model_server: OpenAIServer,
) -> None:
    model_server.default = Reply([text("All quiet.")])
    workers.start("temporal_agents:build")
    sid = f"report-{time.time_ns()}"
    made = _cli(workers, "create", sid, "--agent", "crashy", "--message", "report",
                "--every", "1s", "--task-queue", workers.queue)
    assert made.returncode == 0, made.stderr
    assert f"created schedule {sid!r}" in made.stdout
    await _until(lambda: len(model_server.requests) >= 2)
    # Each run is a new call on a session of its own: the model sees only its message.
    for request in model_server.requests[:2]:
        assert [m["content"] for m in request.body["messages"]] == ["report"]
    listed = _cli(workers, "list")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith(sid))
    assert "agent crashy" in line and "overlap skip" in line and "active" in line

    assert _cli(workers, "pause", sid, "--note", "holiday").returncode == 0
    await asyncio.sleep(1.5)  # a run already started may still end
    seen = len(model_server.requests)
    await asyncio.sleep(2.5)
    assert len(model_server.requests) == seen
    assert "paused (holiday)" in _cli(workers, "list").stdout

    deleted = _cli(workers, "delete", sid)
    assert deleted.returncode == 0, deleted.stderr
    assert sid not in _cli(workers, "list").stdout
    gone = _cli(workers, "pause", sid)
    assert gone.returncode == 1 and sid in gone.stderr


async def test_overlap_skip_keeps_one_run_and_max_parallel_caps_allow_all(
    workers: Workers, model_server: OpenAIServer,
) -> None:
    counts = Path(workers.env["RX_TEST_COUNTS"])
    slow = Reply([tool_call(0, id="s1", name="slow", arguments='{"x": 1}')],
                 finish_reason="tool_calls")
    model_server.script(slow, slow)
    model_server.default = Reply([text("Done.")])
    workers.start("temporal_agents:build")
    client = await connect(workers.address)
    capped = f"capped-{time.time_ns()}"
    made = _cli(workers, "create", capped, "--agent", "crashy", "--message", "go",
                "--every", "1s", "--overlap", "allow_all", "--max-parallel", "2",
                "--task-queue", workers.queue)
    assert made.returncode == 0, made.stderr
    await _until(lambda: len(_lines(counts / "slow.start")) == 2)
    # Two runs hold their tool; the triggers after them find two going and skip.
    await _until(lambda: len(model_server.requests) == 2, timeout=5)
    await asyncio.sleep(3)
    described = await describe_schedule(client, capped)
    assert described.started >= 4 and described.max_parallel == 2
    assert len(model_server.requests) == 2  # the skipped runs never called the model
    assert len(_lines(counts / "slow.start")) == 2
    assert _cli(workers, "pause", capped).returncode == 0

    # overlap skip: while its one run holds the tool, the schedule skips the triggers.
    model_server.script(slow)
    skipping = f"skip-{time.time_ns()}"
    made = _cli(workers, "create", skipping, "--agent", "crashy", "--message", "go",
                "--every", "1s", "--task-queue", workers.queue)
    assert made.returncode == 0, made.stderr
    await _until(lambda: len(_lines(counts / "slow.start")) == 3)
    await asyncio.sleep(3)
    held = await describe_schedule(client, skipping)
    assert held.running == 1 and held.skipped >= 2 and held.overlap == "skip"
    (counts / "release").touch()
    await _until(lambda: len(_lines(counts / "slow.finish")) == 3)
    for sid in (capped, skipping):
        assert _cli(workers, "delete", sid).returncode == 0
