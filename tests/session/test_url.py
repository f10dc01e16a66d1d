"""session_store_from_url for every scheme, and clear errors for bad URLs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rx_agent.session import (
    InMemorySessionStore,
    RedisSessionStore,
    SqliteSessionStore,
    session_store_from_url,
)


def test_memory() -> None:
    assert isinstance(session_store_from_url("memory://"), InMemorySessionStore)
    assert isinstance(session_store_from_url("MEMORY://"), InMemorySessionStore)


def test_sqlite_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = session_store_from_url("sqlite:///data/sessions.db")
    assert isinstance(store, SqliteSessionStore)
    assert store.path == tmp_path / "data" / "sessions.db"
    store.close()


def test_sqlite_absolute(tmp_path: Path) -> None:
    target = tmp_path / "abs dir" / "s.db"
    store = session_store_from_url(f"sqlite:///{target.as_posix().replace(' ', '%20')}")
    assert isinstance(store, SqliteSessionStore) and store.path == target
    store.close()
    assert target.exists()


def test_redis_with_and_without_a_prefix(redis_url: str) -> None:
    store = session_store_from_url(redis_url)
    assert isinstance(store, RedisSessionStore)
    assert (store.url, store.prefix) == (redis_url, "rx_agent")
    named = session_store_from_url(f"{redis_url}?prefix=myapp&socket_timeout=5")
    assert isinstance(named, RedisSessionStore)
    assert named.prefix == "myapp" and named.url == f"{redis_url}?socket_timeout=5"
    assert named.list_sessions() == []  # the remaining options reach redis-py
    named.close()
    assert isinstance(session_store_from_url("rediss://localhost:6380/0"), RedisSessionStore)


@pytest.mark.parametrize(("url", "message"), [
    ("postgres://db/x", "unknown session store URL scheme 'postgres'"),
    ("sessions.db", "not a session store URL: 'sessions.db' \\(a file\\? write sqlite:///"),
    ("", "not a session store URL"),
    ("memory://x", "memory:// takes nothing after it"),
    ("sqlite://host/x.db", "sqlite URLs have no host"),
    ("sqlite:///", "no database file"),
    ("sqlite:////tmp/dir/", "no database file"),
    ("sqlite:///x.db?mode=ro", "no query"),
    ("sqlite:///:memory:", "use memory://"),
    ("mysql://root:hunter2@db/x", "'mysql://root:\\*\\*\\*@db/x'"),
])
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        session_store_from_url(url)
    assert "hunter2" not in str(info.value)


def test_not_a_string() -> None:
    with pytest.raises(TypeError, match="is a str"):
        session_store_from_url(Path("x.db"))  # type: ignore[arg-type]
