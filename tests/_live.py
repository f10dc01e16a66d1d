"""An ASGI app on a real uvicorn at a loopback port, for the tests of the server and
the protocols.

The server runs in a thread with its own event loop, as a deployed one does; requests
go through a real TCP socket. A test folder gets the ``live`` fixture by importing it
into its conftest: ``from _live import LiveServer, live  # noqa: F401``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn

__all__ = ["LiveServer", "live"]


class LiveServer:
    """An ASGI app on uvicorn at ``http://127.0.0.1:<free port>``."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = ""

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def live() -> Iterator[Callable[[Any], LiveServer]]:
    """``server = live(app)``: the app served until the test ends (outside a fixture,
    ``with LiveServer(app) as server:``)."""
    started: list[LiveServer] = []

    def start(app: Any) -> LiveServer:
        server = LiveServer(app).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__()
