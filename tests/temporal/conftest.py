"""Fixtures for the Temporal tests: a real dev server (``tests/_services.py``), the
loopback OpenAI-compatible model server of ``tests/model``, and worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _services import temporal_address
from model.openai_server import OpenAIServer  # tests/ is on sys.path

__all__ = ["Workers", "model_server", "temporal_address", "workers"]

_HERE = Path(__file__).parent
_ROOT = _HERE.parent.parent


@pytest.fixture
def model_server() -> Iterator[OpenAIServer]:
    server = OpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


class Workers:
    """``rx-agent worker`` processes of one test (killed at its end)."""

    def __init__(self, address: str, queue: str, env: dict[str, str], logs: Path) -> None:
        self.address = address
        self.queue = queue
        self.env = env
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, target: str, *args: str) -> subprocess.Popen[bytes]:
        """A worker of ``target`` (``args``: more of the command's options)."""
        log = (self.logs / f"worker{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "rx_agent", "worker", target, "--temporal", self.address,
             "--task-queue", self.queue, "--log-level", "warning", *args],
            cwd=_HERE, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        path = Path(log.name)
        deadline = time.monotonic() + 60
        while b"serving" not in path.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the worker did not start: {path.read_text()}")
            time.sleep(0.05)
        return proc

    def kill(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)
        for proc in self.procs:
            if proc.pid == pid:
                proc.wait()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def workers(temporal_address: str, model_server: OpenAIServer, tmp_path: Path,
            request: pytest.FixtureRequest) -> Iterator[Workers]:
    counts = tmp_path / "counts"
    counts.mkdir()
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(_ROOT), str(_HERE)]),
           "RX_TEST_MODEL_URL": model_server.url,
           "RX_TEST_COUNTS": str(counts)}
    queue = f"q-{request.node.name}-{time.time_ns()}"
    group = Workers(temporal_address, queue, env, tmp_path)
    try:
        yield group
    finally:
        group.stop()
