"""Fixtures for the session store tests: a real redis-server, the durable stores.

The Redis tests run against a real ``redis-server`` (``tests/_services.py``, shared
with the agent tests): without one they skip, saying what to install, except under
``RX_AGENT_REQUIRE_SERVICES=1`` (CI), where they fail.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _services
import pytest
from _services import redis_server_binary, service_missing  # noqa: F401  (test_services.py)

from rx_agent.session import SessionKey, SqliteSessionStore
from rx_agent.testing.store_contract import KEY, round_msgs, state_with, texts

DURABLE = ("sqlite", "redis")

redis_url = _services.redis_url  # the real server, shared with tests/agent
postgres_url = _services.postgres_url


def make_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if kind == "sqlite":
        return SqliteSessionStore(tmp_path / "sessions.db")
    from rx_agent.session import RedisSessionStore

    url = request.getfixturevalue("redis_url")
    return RedisSessionStore(url, prefix=f"t{uuid.uuid4().hex[:10]}")


@pytest.fixture(params=DURABLE)
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    made = make_store(request.param, request, tmp_path)
    yield made
    made.close()


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


# -- states: the store contract's helpers (KEY, round_msgs, state_with, texts) ---------------

__all__ = ["KEY", "round_msgs", "state_with", "stored_count", "texts"]


def stored_count(store: Any, key: SessionKey) -> int:
    """Message rows (SQLite) or list items (Redis) stored for ``key``."""
    if isinstance(store, SqliteSessionStore):
        conn = store._conn()
        row = conn.execute("SELECT COUNT(*) FROM rx_message WHERE user_id = ? AND "
                           "session_id = ?", key).fetchone()
        return int(row[0])
    client, _ = store._client()
    return int(client.llen(store._session_keys(key)[1]))
