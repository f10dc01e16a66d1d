"""Fixtures for the MCP tests: the toolbox server spawned over stdio, or served over
streamable HTTP on 127.0.0.1 by a subprocess; each test gets a fresh server and an
events file the server writes what it saw to."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from rx_agent import McpToolSource

SERVERS = Path(__file__).parent / "mcp_servers"


class Events:
    """The lines the server recorded (``started slow``, ``cancelled slow``...)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[str]:
        return self.path.read_text(encoding="utf-8").splitlines() if self.path.exists() else []

    def wait_for(self, line: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while line not in self.lines():
            if time.monotonic() > deadline:
                raise AssertionError(f"the server never recorded {line!r}: {self.lines()}")
            time.sleep(0.02)


@pytest.fixture
def events(tmp_path: Path) -> Events:
    return Events(tmp_path / "events.txt")


@pytest.fixture
def server_log(tmp_path: Path) -> Iterator[TextIO]:
    with (tmp_path / "server.log").open("w", encoding="utf-8") as log:
        yield log


@pytest.fixture
def stdio_source(events: Events, server_log: TextIO) -> Iterator[McpToolSource]:
    source = McpToolSource.stdio(sys.executable, [str(SERVERS / "toolbox.py")],
                                 env={"RX_MCP_EVENTS": str(events.path)}, errlog=server_log,
                                 name="toolbox")
    yield source
    source.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class HttpServer:
    """``http_server.py`` in a subprocess; :meth:`start` again after a crash."""

    def __init__(self, events: Events, log: TextIO) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.events = events
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> HttpServer:
        self.process = subprocess.Popen(
            [sys.executable, str(SERVERS / "http_server.py"), str(self.port)],
            env={"RX_MCP_EVENTS": str(self.events.path), "PATH": "/usr/bin:/bin"},
            stdout=self.log, stderr=self.log,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the MCP HTTP server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
def http_server(events: Events, server_log: TextIO) -> Iterator[HttpServer]:
    server = HttpServer(events, server_log).start()
    yield server
    server.stop()


@pytest.fixture
def http_source(http_server: HttpServer) -> Iterator[McpToolSource]:
    source = McpToolSource.http(http_server.url, headers={"X-Test-Token": "t0ken"},
                                name="toolbox-http")
    yield source
    source.close()
