"""The embedded durable store: one SQLite file (stdlib ``sqlite3``), WAL mode.

``SqliteSessionStore(path)`` is safe for several threads and several processes on
one host (keep the file on a local disk: WAL needs shared memory, so not on a
network file system). Every write runs in one ``BEGIN IMMEDIATE`` transaction, and
waits up to ``timeout`` seconds (SQLite's busy timeout) for another writer. With
``synchronous=NORMAL`` (the default) a committed save survives a crash of the
process; pass ``synchronous="FULL"`` to also survive losing power.

Layout (tables prefixed ``rx_``; the file may hold other tables)::

    rx_session(user_id, session_id, version, head, msg_count, updated_at)
    rx_message(user_id, session_id, seq, msg_id, role, body)  -- one row per message
    rx_lease(user_id, session_id, token, owner, expires_at)
    rx_lease_waiter(ticket, user_id, session_id, token, deadline)

``head`` is the schema-2 envelope of the state without its messages
(:mod:`rx_agent.session._schema`); ``body`` is one message's JSON. A save appends the
new messages, or rewrites from the first changed one (:mod:`rx_agent.session._delta`),
and replaces the small head row, so its cost follows what changed.

Threads and the event loop: the plain methods are synchronous and use one
connection per thread. The ``a``-prefixed coroutines run them on the store's own
worker threads (``threads``, default 4), so the loop never waits on the disk. A
cancelled coroutine's statement still completes in its thread: after cancelling
an ``asave_if_version``, reload before trusting the version. Lease expiry uses the
host's wall clock.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from ..context import AgentState
from ._backend import SessionBackend
from ._base import ConcurrentSessionModificationError as _Conflict
from ._base import Lease, SessionKey
from ._cache import DEFAULT_CACHE_MESSAGES, SessionCache
from ._delta import (
    MessageRoles,
    Snapshot,
    SnapshotCache,
    compute_delta,
    snapshot_of,
    window_start,
)
from ._journal import RunJournal
from ._lease import WAITER_TTL, LeaseAttempt
from ._schema import corrupt, decode_stored, encode_head
from ._sqlite_file import SqliteFile, check_path

__all__ = ["SqliteSessionStore"]

T = TypeVar("T")
LAYOUT = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rx_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rx_session (
    user_id TEXT NOT NULL, session_id TEXT NOT NULL, version INTEGER NOT NULL,
    head TEXT NOT NULL, msg_count INTEGER NOT NULL, updated_at REAL NOT NULL,
    PRIMARY KEY (user_id, session_id));
CREATE TABLE IF NOT EXISTS rx_message (
    user_id TEXT NOT NULL, session_id TEXT NOT NULL, seq INTEGER NOT NULL,
    msg_id TEXT NOT NULL, role TEXT NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (user_id, session_id, seq));
CREATE TABLE IF NOT EXISTS rx_lease (
    user_id TEXT NOT NULL, session_id TEXT NOT NULL, token TEXT NOT NULL,
    owner TEXT NOT NULL, expires_at REAL NOT NULL,
    PRIMARY KEY (user_id, session_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rx_lease_waiter (
    ticket INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL,
    session_id TEXT NOT NULL, token TEXT NOT NULL UNIQUE, deadline REAL NOT NULL);
CREATE INDEX IF NOT EXISTS rx_lease_waiter_key ON rx_lease_waiter (user_id, session_id, ticket);
"""
_WHERE = "WHERE user_id = ? AND session_id = ?"


class SqliteSessionStore(SessionBackend):
    """Sessions in one SQLite file; see the module docstring.

    ``path`` is taken relative to the working directory at construction; a missing
    folder of the file is created, but not a missing folder above it
    (``MissingDirectoryError``, a ``FileNotFoundError`` and a ``ValueError``).
    ``cache_size`` bounds how many sessions' stored message ids this object remembers
    to save without rereading them. ``cache_messages`` bounds the decoded sessions it
    keeps between the calls it serves (messages over all sessions; ``0``: none), so a
    call on a session nobody else wrote meanwhile decodes nothing
    (:mod:`rx_agent.session._cache`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        threads: int = 4,
        cache_size: int = 256,
        cache_messages: int = DEFAULT_CACHE_MESSAGES,
    ) -> None:
        self.path = check_path(path, "SqliteSessionStore", "use InMemorySessionStore")
        self._cache = SnapshotCache(cache_size)
        self._session_cache = SessionCache(cache_messages)
        # Connections per thread, worker threads, WAL, the schema (session/_sqlite_file.py);
        # opening the first connection fails here, not at the first call, on a bad file.
        self._db = SqliteFile(self.path, owner=repr(self), schema=_SCHEMA, threads=threads,
                              timeout=timeout, synchronous=synchronous, require_wal=True,
                              check=self._check_layout, on_fork=self._cache.clear,
                              what="session database")
        self._conn = self._db.conn
        self._txn = self._db.txn

    def __repr__(self) -> str:
        return f"SqliteSessionStore({str(self.path)!r})"

    # -- connections ------------------------------------------------------------------

    def _check_layout(self, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT OR IGNORE INTO rx_meta VALUES ('layout', ?)", (LAYOUT,))
        layout = conn.execute("SELECT value FROM rx_meta WHERE name = 'layout'").fetchone()[0]
        if layout != LAYOUT:
            raise ValueError(f"{self!r} has table layout {layout!r}; this rx_agent reads "
                             f"layout {LAYOUT!r} (written by a newer rx_agent?)")

    def close(self) -> None:
        """Close every connection and stop the worker threads.

        Idempotent; a later call opens what it needs again. Call it when no other
        thread is using the store.
        """
        self._db.close()
        super().close()

    def _make_journal(self) -> RunJournal:
        from ._journal_sqlite import SqliteRunJournal

        return SqliteRunJournal(self._db)

    async def _run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._db.run(fn, *args)  # this file's own worker threads

    # -- state ------------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return repr(self)

    @contextmanager
    def _damage(self, key: SessionKey) -> Iterator[None]:
        """A damaged file read for ``key`` as :class:`SessionCorruptError`; SQLite's own
        message is dropped, since it may quote the stored text."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            problem = _damage_of(exc)
            if problem is None:
                raise
            # Hidden (``from None``) but still linked as the context: emptied as well.
            exc.args = ("(SQLite's message withheld: it may quote stored text)",)
            raise corrupt(key, problem, self._where) from None

    def _read(self, key: SessionKey) -> tuple[AgentState | None, int]:
        with self._damage(key):
            return self._load_versioned(key)

    def _peek_version(self, key: SessionKey) -> int:
        with self._damage(key):
            row = self._conn().execute(f"SELECT version FROM rx_session {_WHERE}",
                                       key).fetchone()
        if row is None:
            return 0
        _check_int(key, "version", row[0], self._where)
        return int(row[0])

    def _load_versioned(self, key: SessionKey) -> tuple[AgentState | None, int]:
        with self._txn(immediate=False) as conn:  # one snapshot for head and rows
            head = conn.execute(f"SELECT version, head, msg_count FROM rx_session {_WHERE}",
                                key).fetchone()
            rows = [] if head is None else conn.execute(
                f"SELECT seq, msg_id, body FROM rx_message {_WHERE} ORDER BY seq", key
            ).fetchall()
        if head is None:
            self._cache.drop(key)
            return None, 0
        version, record, count = head
        _check_int(key, "version", version, self._where)
        _check_int(key, "msg_count", count, self._where)
        if len(rows) != count or any(row[0] != i for i, row in enumerate(rows)):
            seqs = [row[0] for row in rows]
            raise corrupt(key, f"the head row counts {count} messages, but message rows "
                          f"{_ranges(seqs)} exist", self._where)
        ids = [row[1] for row in rows]
        bodies = [row[2] for row in rows]
        state = decode_stored(record, bodies, key, self._where)
        if rows and ids != [m.id for m in state.context]:
            raise corrupt(key, "the msg_id column disagrees with the stored messages' ids",
                          self._where)
        msgs = state.context if rows else []  # inline (schema 1): no rows stored yet
        self._cache.put(key, snapshot_of(version, ids, bodies, MessageRoles(msgs), msgs), state)
        return state, version

    def _write(self, key: SessionKey, state: AgentState, expected: int | None,
               marked: frozenset[str]) -> int:
        head = encode_head(state)
        with self._damage(key):
            return self._write_rows(key, state, expected, head, marked)

    def _write_rows(self, key: SessionKey, state: AgentState, expected: int | None,
                    head: str, marks: frozenset[str]) -> int:
        known = self._cache.get(key)
        # Serialise outside the write lock when this object knows what is stored.
        delta = compute_delta(known, state.context, marks) if known is not None else None
        with self._txn() as conn:
            row = conn.execute(f"SELECT version FROM rx_session {_WHERE}", key).fetchone()
            actual = row[0] if row is not None else 0
            _check_int(key, "version", actual, self._where)
            if expected is not None and actual != expected:
                raise _Conflict(key.session_id, expected, actual, user_id=key.user_id)
            if known is None or known.version != actual:
                stored = self._read_snapshot(conn, key, actual) if row is not None else None
                delta = compute_delta(stored or Snapshot(0, [], 0, []), state.context, marks)
            assert delta is not None
            start = delta.start
            conn.execute(f"DELETE FROM rx_message {_WHERE} AND seq >= ?", (*key, start))
            conn.executemany(
                "INSERT INTO rx_message (user_id, session_id, seq, msg_id, role, body) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(key.user_id, key.session_id, start + i, delta.ids[start + i],
                  str(state.context[start + i].role), body)
                 for i, body in enumerate(delta.bodies)],
            )
            version = actual + 1
            conn.execute(
                "INSERT INTO rx_session (user_id, session_id, version, head, msg_count, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, session_id) DO "
                "UPDATE SET version = excluded.version, head = excluded.head, "
                "msg_count = excluded.msg_count, updated_at = excluded.updated_at",
                (key.user_id, key.session_id, version, head, delta.n, time.time()),
            )
        self._cache.put(key, delta.snapshot(version), state)
        return version

    def _read_snapshot(self, conn: sqlite3.Connection, key: SessionKey, version: int) -> Snapshot:
        rows = conn.execute(f"SELECT msg_id, role FROM rx_message {_WHERE} ORDER BY seq",
                            key).fetchall()
        roles = [r[1] for r in rows]
        bodies = [r[0] for r in conn.execute(
            f"SELECT body FROM rx_message {_WHERE} AND seq >= ? ORDER BY seq",
            (*key, window_start(roles, len(rows))))]
        return snapshot_of(version, [r[0] for r in rows], bodies, roles)

    def _remove(self, key: SessionKey) -> bool:
        with self._damage(key), self._txn() as conn:
            existed = conn.execute(f"DELETE FROM rx_session {_WHERE}", key).rowcount > 0
            conn.execute(f"DELETE FROM rx_message {_WHERE}", key)
        self._cache.drop(key)
        return existed

    def _list_keys(self, user_id: str | None) -> list[SessionKey]:
        conn = self._conn()
        if user_id is None:
            rows = conn.execute("SELECT user_id, session_id FROM rx_session "
                                "ORDER BY user_id, session_id")
        else:
            rows = conn.execute("SELECT user_id, session_id FROM rx_session WHERE user_id = ? "
                                "ORDER BY session_id", (user_id,))
        return [SessionKey(u, s) for u, s in rows]

    # -- leases -----------------------------------------------------------------------

    def _try_lease(self, key: SessionKey, token: str, owner: str, ttl: float, beat: bool,
                   wake: Callable[[], None]) -> LeaseAttempt:
        with self._damage(key):
            return self._lease_rows(key, token, owner, ttl, beat)

    def _lease_rows(self, key: SessionKey, token: str, owner: str, ttl: float,
                    beat: bool) -> LeaseAttempt:
        if not beat:  # a read first: waiters poll without taking the write lock
            row = self._conn().execute(f"SELECT owner, expires_at FROM rx_lease {_WHERE}",
                                       key).fetchone()
            now = time.time()
            if row is not None and row[1] > now:
                return LeaseAttempt(False, row[0], row[1] - now)
        with self._txn() as conn:
            now = time.time()
            conn.execute(f"DELETE FROM rx_lease_waiter {_WHERE} AND deadline < ?", (*key, now))
            row = conn.execute(f"SELECT owner, expires_at FROM rx_lease {_WHERE}", key).fetchone()
            free = row is None or row[1] <= now
            if free:
                first = conn.execute(f"SELECT token FROM rx_lease_waiter {_WHERE} "
                                     "ORDER BY ticket LIMIT 1", key).fetchone()
                if first is None or first[0] == token:
                    conn.execute("INSERT OR REPLACE INTO rx_lease VALUES (?, ?, ?, ?, ?)",
                                 (key.user_id, key.session_id, token, owner, now + ttl))
                    conn.execute("DELETE FROM rx_lease_waiter WHERE token = ?", (token,))
                    return LeaseAttempt(True)
            if beat:
                conn.execute(
                    "INSERT INTO rx_lease_waiter (user_id, session_id, token, deadline) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (token) DO UPDATE SET deadline = "
                    "excluded.deadline", (key.user_id, key.session_id, token, now + WAITER_TTL))
            if free:
                return LeaseAttempt(False)
            return LeaseAttempt(False, row[0], row[1] - now)

    def _leave_queue(self, key: SessionKey, token: str) -> None:
        self._conn().execute("DELETE FROM rx_lease_waiter WHERE token = ?", (token,))

    def _renew_lease(self, lease: Lease) -> bool:
        now = time.time()
        with self._damage(lease.key):
            cur = self._conn().execute(
                f"UPDATE rx_lease SET expires_at = ? {_WHERE} AND token = ? AND expires_at > ?",
                (now + lease.ttl, *lease.key, lease.token, now))
        return cur.rowcount == 1

    def _release_lease(self, lease: Lease) -> bool:
        with self._damage(lease.key), self._txn() as conn:
            row = conn.execute(f"SELECT expires_at FROM rx_lease {_WHERE} AND token = ?",
                               (*lease.key, lease.token)).fetchone()
            if row is None:
                return False
            conn.execute(f"DELETE FROM rx_lease {_WHERE} AND token = ?",
                         (*lease.key, lease.token))
        return bool(row[0] > time.time())


# SQLite's primary result codes for a damaged file (extended codes keep them in the low byte).
_DAMAGED = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
# CPython's message for TEXT that is not UTF-8; it goes on to quote the text itself.
_NOT_UTF8 = "Could not decode to UTF-8 column '"


def _damage_of(exc: sqlite3.DatabaseError) -> str | None:
    """What a damaged file did, in words that quote nothing stored; ``None`` for other
    errors (busy, disk full, I/O: not the record's fault)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _DAMAGED:
        name = getattr(exc, "sqlite_errorname", None) or f"code {code}"
        return f"the database file is damaged ({name}; PRAGMA integrity_check lists where)"
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and text.startswith(_NOT_UTF8):
        column = text[len(_NOT_UTF8):].partition("'")[0]
        return (f"a stored {column!r} value is not UTF-8 text (a damaged page, or bytes "
                f"written by another program)")
    return None


def _check_int(key: SessionKey, column: str, value: object, where: str) -> None:
    # SQLite keeps what it is given: an INTEGER column may hold text or a real.
    if type(value) is not int:
        raise corrupt(key, f"the {column} column holds a {_sql_type(value)} value, not an "
                      "integer", where)


def _sql_type(value: object) -> str:
    return {str: "TEXT", bytes: "BLOB", float: "REAL"}.get(type(value), type(value).__name__)


def _ranges(seqs: list[int]) -> str:
    if not seqs:
        return "(none)"
    return f"{len(seqs)} (seq {seqs[0]}..{seqs[-1]})"
