"""The driver side of the peers protocol: start a worker, send requests (stdlib only)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
WORKERS = {
    "rx_agent": HERE / "worker_rx_agent.py",
    "agentscope": HERE / "worker_agentscope.py",
    "langchain": HERE / "worker_langchain.py",
    "pydantic_ai": HERE / "worker_pydantic_ai.py",
}


class WorkerError(RuntimeError):
    """A worker failed to start, answered with an error, or died."""


class Worker:
    """One long-lived worker process; ``request`` sends a JSON line and reads one back."""

    def __init__(self, framework: str, python: str | os.PathLike[str],
                 env: dict[str, str] | None = None) -> None:
        if framework not in WORKERS:
            raise ValueError(f"unknown framework {framework!r}; expected one of "
                             f"{', '.join(WORKERS)}")
        self.framework = framework
        # stderr goes to ours: a worker's warnings stay visible and never fill a pipe.
        self._proc = subprocess.Popen(
            [os.fspath(python), "-X", "frozen_modules=on", os.fspath(WORKERS[framework])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, bufsize=1)
        self.info = self._read()
        if not self.info.get("ready"):
            raise WorkerError(f"{framework} worker did not start: {self.info}")

    def _read(self) -> dict[str, Any]:
        out: IO[str] | None = self._proc.stdout
        assert out is not None
        line = out.readline()
        if not line:
            code = self._proc.wait()
            raise WorkerError(f"{self.framework} worker exited (code {code}) without a reply")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise WorkerError(f"{self.framework} worker failed:\n{reply['error']}")
        return reply

    def request(self, **req: Any) -> dict[str, Any]:
        inp = self._proc.stdin
        assert inp is not None
        inp.write(json.dumps(req) + "\n")
        inp.flush()
        return self._read()

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(WorkerError, OSError, ValueError):
                self.request(op="quit")
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
