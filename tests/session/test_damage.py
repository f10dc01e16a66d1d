"""Damaged storage: a SQLite file with a broken page or a mistyped column, a Redis key
of the wrong type. Each is a ``SessionCorruptError`` naming the session and the store,
on reads and writes alike, and never quoting what the conversation said (a driver's
own message may: SQLite's UTF-8 error quotes the text it could not decode)."""

from __future__ import annotations

import asyncio
import traceback
from pathlib import Path
from typing import Any

import pytest

from rx_agent import AgentState, Msg
from rx_agent.session import SessionCorruptError, SqliteSessionStore

from .conftest import KEY, state_with

SECRET = "my card number is 4111 1111 SECRET-CONVERSATION-TEXT"


def assert_corrupt(error: SessionCorruptError, store: Any, problem: str) -> None:
    assert error.session_id == KEY.session_id and error.user_id == KEY.user_id
    assert repr(store) in str(error)
    assert problem in error.problem, error.problem
    shown = "".join(traceback.format_exception(error))
    assert "SECRET" not in shown and "4111" not in shown
    assert error.__cause__ is None


def every_access(store: Any) -> list[tuple[str, Any]]:
    """Each way a call reads or writes the session (the writes read the row first)."""
    fresh = state_with(1)
    return [
        ("load", lambda: store.load(KEY)),
        ("load_versioned", lambda: store.load_versioned(KEY)),
        ("save", lambda: store.save(KEY, fresh)),
        ("save_if_version", lambda: store.save_if_version(KEY, fresh, 1)),
        ("aload_versioned", lambda: asyncio.run(store.aload_versioned(KEY))),
        ("asave_if_version", lambda: asyncio.run(store.asave_if_version(KEY, fresh, 1))),
    ]


# -- SQLite ------------------------------------------------------------------------------


def secret_state() -> AgentState:
    state = state_with(1)
    state.context.append(Msg("user", SECRET * 4))
    return state


def saved_file(tmp_path: Path) -> Path:
    """A closed store file holding a session that says SECRET (WAL checkpointed)."""
    path = tmp_path / "sessions.db"
    store = SqliteSessionStore(path)
    store.save(KEY, secret_state())
    store.close()
    assert b"SECRET-CONVERSATION-TEXT" in path.read_bytes()
    return path


@pytest.mark.parametrize(("value", "kind"), [("three", "TEXT"), (2.5, "REAL"),
                                              (b"\x01", "BLOB")])
@pytest.mark.parametrize("column", ["version", "msg_count"])
def test_a_sqlite_column_that_is_not_an_integer_is_corrupt(
    sqlite_store: SqliteSessionStore, column: str, value: object, kind: str
) -> None:
    sqlite_store.save(KEY, state_with(2))
    sqlite_store._conn().execute(f"UPDATE rx_session SET {column} = ?", (value,))
    sqlite_store._cache.clear()
    accesses = every_access(sqlite_store)
    if column == "msg_count":  # only reads look at the count
        accesses = [a for a in accesses if "load" in a[0]]
    for name, access in accesses:
        with pytest.raises(SessionCorruptError) as info:
            access()
        assert_corrupt(info.value, sqlite_store,
                       f"the {column} column holds a {kind} value, not an integer")
        assert repr(value) not in str(info.value), name
    # Left as it is: still there, still refused.
    row = sqlite_store._conn().execute(f"SELECT {column} FROM rx_session").fetchone()
    assert row[0] == value


def test_a_head_field_of_the_wrong_type_is_not_quoted(sqlite_store: SqliteSessionStore) -> None:
    sqlite_store.save(KEY, state_with(1))
    sqlite_store._conn().execute("UPDATE rx_session SET head = ?",
                                 (f'{{"schema": "{SECRET}"}}',))
    sqlite_store._cache.clear()
    with pytest.raises(SessionCorruptError) as info:
        sqlite_store.load(KEY)
    assert_corrupt(info.value, sqlite_store, "'schema' must be an integer, got a str")


def test_stored_text_that_is_not_utf8_is_corrupt_and_never_quoted(tmp_path: Path) -> None:
    path = saved_file(tmp_path)
    data = bytearray(path.read_bytes())
    at = data.find(b"SECRET-CONVERSATION-TEXT")
    data[at] = 0xFF  # one damaged byte inside a message's text
    path.write_bytes(bytes(data))
    store = SqliteSessionStore(path)
    try:
        for name, access in every_access(store):
            with pytest.raises(SessionCorruptError) as info:
                access()
            assert_corrupt(info.value, store, "a stored 'body' value is not UTF-8 text")
            # The driver's own message quoted the text; it is not kept anywhere.
            context = info.value.__context__
            assert context is None or "SECRET" not in str(context), name
    finally:
        store.close()


def test_a_damaged_page_is_corrupt(tmp_path: Path) -> None:
    path = saved_file(tmp_path)
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    page = data.find(b"SECRET-CONVERSATION-TEXT") // page_size
    assert page > 1  # a message page, not the schema
    data[page * page_size:page * page_size + 100] = b"\x07" * 100  # its b-tree header
    path.write_bytes(bytes(data))
    store = SqliteSessionStore(path)
    try:
        for _name, access in every_access(store):
            with pytest.raises(SessionCorruptError) as info:
                access()
            assert_corrupt(info.value, store, "the database file is damaged (SQLITE_CORRUPT")
    finally:
        store.close()


def test_a_busy_database_is_not_corrupt(sqlite_store: SqliteSessionStore) -> None:
    """Errors that are not the record's fault keep their own type."""
    import sqlite3

    sqlite_store.save(KEY, state_with(1))
    quick = SqliteSessionStore(sqlite_store.path, timeout=0.05)
    other = sqlite3.connect(sqlite_store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            quick.save(KEY, state_with(2))
    finally:
        other.execute("ROLLBACK")
        other.close()
        quick.close()


# -- Redis -------------------------------------------------------------------------------


def redis_keys(store: Any) -> dict[str, str]:
    head, msgs, _users, _user = store._session_keys(KEY)
    lease, queue, waiters = store._lease_keys(KEY)
    return {"head": head, "msgs": msgs, "lease": lease, "queue": queue, "waiters": waiters}


@pytest.mark.parametrize(("which", "accesses"), [
    ("head", ["load", "load_versioned", "save", "save_if_version", "aload_versioned",
              "asave_if_version"]),
    ("msgs", ["load", "save", "aload_versioned", "asave_if_version"]),
    ("lease", ["acquire_lease", "aacquire_lease"]),
    ("queue", ["acquire_lease"]),
])
def test_a_redis_key_of_the_wrong_type_is_corrupt(
    redis_store: Any, which: str, accesses: list[str]
) -> None:
    client, _ = redis_store._client()
    if which == "msgs":
        redis_store.save(KEY, state_with(1))
        client.delete(redis_keys(redis_store)["msgs"])
        client.hset(redis_keys(redis_store)["msgs"], "x", SECRET)  # a hash, not a list
    elif which == "lease":
        client.hset(redis_keys(redis_store)["lease"], "x", SECRET)  # a hash, not a string
    else:
        client.set(redis_keys(redis_store)[which], SECRET)  # a string: not a hash / zset
    redis_store._cache.clear()
    table = dict(every_access(redis_store))
    table["acquire_lease"] = lambda: redis_store.acquire_lease(KEY, "me", 5, 0.2)
    table["aacquire_lease"] = lambda: asyncio.run(redis_store.aacquire_lease(KEY, "me", 5, 0))
    for name in accesses:
        with pytest.raises(SessionCorruptError) as info:
            table[name]()
        assert_corrupt(info.value, redis_store, "a key holds the wrong kind of Redis value")
        assert redis_keys(redis_store)[which] in info.value.problem, name


@pytest.mark.parametrize("value", [b"three", b"2.5"])
@pytest.mark.parametrize("cached", [False, True])
def test_a_redis_version_that_is_not_an_integer_is_corrupt(
    redis_store: Any, value: bytes, cached: bool
) -> None:
    redis_store.save(KEY, state_with(1))
    client, _ = redis_store._client()
    head = redis_keys(redis_store)["head"]
    accesses = every_access(redis_store)
    if cached:  # the store knows what it saved: a save goes straight to the script
        accesses = [a for a in accesses if "save" in a[0]]
    for name, access in accesses:
        client.hset(head, "version", b"1")
        redis_store.load(KEY)  # fills the cache
        if not cached:
            redis_store._cache.clear()
        client.hset(head, "version", value)
        with pytest.raises(SessionCorruptError) as info:
            access()
        assert_corrupt(info.value, redis_store, "the head's 'version' field is not an integer")
        assert value.decode() not in str(info.value), name
        assert client.hget(head, "version") == value  # left as it is
