"""The shared SQL store: PostgreSQL (psycopg 3, pooled), for many processes on many hosts.

``PostgresSessionStore("postgresql://user@host:5432/db", prefix="rx")`` needs the
``postgres`` extra (``pip install -e '.[postgres]'`` from a checkout: ``psycopg``
and ``psycopg-pool``); ``import rx_agent`` never does. The plain methods use a
``psycopg_pool.ConnectionPool`` (``min_size``/``max_size``); the ``a``-prefixed
coroutines run them on worker threads (the kit's rule for a sync backend), so the
event loop never waits on the network.

Layout (``prefix`` defaults to ``rx``; created on first use, under an advisory lock so
that processes starting together do not race)::

    {prefix}_session(user_id, session_id, version, head, msg_count, updated_at)
    {prefix}_message(user_id, session_id, seq, msg_id, role, body)  -- one row per message
    {prefix}_lease(user_id, session_id, record)                     -- a LeaseRecord as JSON

A save is one transaction: it locks the session's row (``SELECT ... FOR UPDATE``),
checks the version (compare-and-set), rewrites the messages from the first changed
one (:mod:`rx_agent.session._delta`) and replaces the head row, so its cost follows
what changed. Leases are read-modify-writes of one row under ``FOR UPDATE`` (the
kit's ``_update_lease``); lease expiry uses each host's wall clock, as the other
stores' does (keep the hosts' clocks in sync).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ..context import AgentState
from ._backend import SessionBackend
from ._base import ConcurrentSessionModificationError as _Conflict
from ._base import SessionKey, redact
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
from ._lease import LeaseRecord
from ._schema import corrupt, decode_stored, encode_head

__all__ = ["PostgresSessionStore"]

T = TypeVar("T")
INSTALL = ("PostgresSessionStore needs psycopg 3: pip install -e '.[postgres]' (from a "
           "checkout) or pip install 'psycopg[binary]' psycopg-pool")
_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,39}")
# An arbitrary, fixed key: every rx_agent process creating the tables takes this lock.
_SCHEMA_LOCK = 0x72785F6167


def _import_psycopg() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ImportError(INSTALL) from exc
    return psycopg, psycopg_pool


class PostgresSessionStore(SessionBackend):
    """Sessions in PostgreSQL tables; see the module docstring.

    ``conninfo`` is a ``postgresql://`` URL or a libpq key/value string. The server is
    reached once at construction (the tables are created then), so a wrong address
    fails here with an error naming it (without its password), before anything is
    written. ``cache_size`` and ``cache_messages`` are the SQLite store's.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        prefix: str = "rx",
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 30.0,
        cache_size: int = 256,
        cache_messages: int = DEFAULT_CACHE_MESSAGES,
    ) -> None:
        if not _PREFIX.fullmatch(prefix):
            raise ValueError(f"prefix must be a lower-case SQL name (letters, digits, _), "
                             f"got {prefix!r}")
        if min_size < 0 or max_size < max(1, min_size):
            raise ValueError(f"need 0 <= min_size <= max_size and max_size >= 1, got "
                             f"min_size={min_size}, max_size={max_size}")
        self._psycopg, self._pool_module = _import_psycopg()
        self.conninfo = conninfo
        self.prefix = prefix
        self._sizes = (min_size, max_size, timeout)
        self._cache = SnapshotCache(cache_size)
        self._session_cache = SessionCache(cache_messages)
        self._t = {name: f"{prefix}_{name}" for name in ("session", "message", "lease")}
        self._lock = threading.Lock()
        self._pool: Any = None
        self._open()

    def __repr__(self) -> str:
        return f"PostgresSessionStore({_hide(self.conninfo)!r}, prefix={self.prefix!r})"

    # -- connections ------------------------------------------------------------------

    def _open(self) -> Any:
        with self._lock:
            if self._pool is not None:
                return self._pool
            min_size, max_size, timeout = self._sizes
            pool = self._pool_module.ConnectionPool(
                self.conninfo, min_size=min_size, max_size=max_size, timeout=timeout,
                open=False, kwargs={"autocommit": True})
            try:
                pool.open(wait=True, timeout=timeout)
                with pool.connection() as conn:
                    self._create_tables(conn)
            except (self._psycopg.Error, self._pool_module.PoolTimeout) as exc:
                pool.close()
                raise ConnectionError(f"cannot reach PostgreSQL at {_hide(self.conninfo)}: "
                                      f"{_first_line(exc)}") from None
            self._pool = pool
            return pool

    def _create_tables(self, conn: Any) -> None:
        s, m, lease = self._t["session"], self._t["message"], self._t["lease"]
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {s} (user_id TEXT NOT NULL, session_id TEXT "
                "NOT NULL, version BIGINT NOT NULL, head TEXT NOT NULL, msg_count INTEGER "
                "NOT NULL, updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (user_id, "
                "session_id))")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {m} (user_id TEXT NOT NULL, session_id TEXT "
                "NOT NULL, seq INTEGER NOT NULL, msg_id TEXT NOT NULL, role TEXT NOT NULL, "
                "body TEXT NOT NULL, PRIMARY KEY (user_id, session_id, seq))")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {lease} (user_id TEXT NOT NULL, session_id "
                "TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (user_id, session_id))")

    @contextmanager
    def _txn(self) -> Iterator[Any]:
        with self._conn() as conn, conn.transaction():
            yield conn

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        """A pooled connection in autocommit: one statement, one round trip."""
        pool = self._pool if self._pool is not None else self._open()
        with pool.connection() as conn:
            yield conn

    def close(self) -> None:
        """Close the pool (idempotent; a later call opens a new one)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        super().close()

    def _make_journal(self) -> RunJournal:
        from ._journal_postgres import PostgresRunJournal

        return PostgresRunJournal(self.prefix, self._conn, self.conninfo)

    # -- state ------------------------------------------------------------------------

    def _read(self, key: SessionKey) -> tuple[AgentState | None, int]:
        s, m = self._t["session"], self._t["message"]
        with self._txn() as conn:  # one snapshot for the head and the rows
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            head = conn.execute(f"SELECT version, head, msg_count FROM {s} WHERE user_id = %s "
                                "AND session_id = %s", key).fetchone()
            rows = [] if head is None else conn.execute(
                f"SELECT seq, msg_id, body FROM {m} WHERE user_id = %s AND session_id = %s "
                "ORDER BY seq", key).fetchall()
        if head is None:
            self._cache.drop(key)
            return None, 0
        version, record, count = head
        if len(rows) != count or any(row[0] != i for i, row in enumerate(rows)):
            raise corrupt(key, f"the head row counts {count} messages, but {len(rows)} "
                          "message rows exist", repr(self))
        ids = [row[1] for row in rows]
        bodies = [row[2] for row in rows]
        state = decode_stored(record, bodies, key, repr(self))
        if rows and ids != [msg.id for msg in state.context]:
            raise corrupt(key, "the msg_id column disagrees with the stored messages' ids",
                          repr(self))
        msgs = state.context if rows else []
        self._cache.put(key, snapshot_of(version, ids, bodies, MessageRoles(msgs), msgs), state)
        return state, int(version)

    def _peek_version(self, key: SessionKey) -> int:
        with self._conn() as conn:
            row = conn.execute(f"SELECT version FROM {self._t['session']} WHERE user_id = %s "
                               "AND session_id = %s", key).fetchone()
        return 0 if row is None else int(row[0])

    def _write(self, key: SessionKey, state: AgentState, expected: int | None,
               marked: frozenset[str]) -> int:
        s, m = self._t["session"], self._t["message"]
        head = encode_head(state)
        known = self._cache.get(key)
        # Serialise before the row lock when this object knows what is stored.
        delta = compute_delta(known, state.context, marked) if known is not None else None
        with self._txn() as conn:
            row = conn.execute(f"SELECT version FROM {s} WHERE user_id = %s AND session_id = %s "
                               "FOR UPDATE", key).fetchone()
            if row is None:  # a new session: serialise its creation with a key lock
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                             (f"{self.prefix}\x1f{key.user_id}\x1f{key.session_id}",))
                row = conn.execute(f"SELECT version FROM {s} WHERE user_id = %s AND "
                                   "session_id = %s FOR UPDATE", key).fetchone()
            actual = 0 if row is None else int(row[0])
            if expected is not None and actual != expected:
                raise _Conflict(key.session_id, expected, actual, user_id=key.user_id)
            if known is None or known.version != actual:
                stored = self._read_snapshot(conn, key, actual) if row is not None else None
                delta = compute_delta(stored or Snapshot(0, [], 0, []), state.context, marked)
            assert delta is not None
            start = delta.start
            conn.execute(f"DELETE FROM {m} WHERE user_id = %s AND session_id = %s AND seq >= %s",
                         (*key, start))
            if delta.bodies:
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {m} (user_id, session_id, seq, msg_id, role, body) "
                        "VALUES (%s, %s, %s, %s, %s, %s)",
                        [(key.user_id, key.session_id, start + i, delta.ids[start + i],
                          str(state.context[start + i].role), body)
                         for i, body in enumerate(delta.bodies)])
            version = actual + 1
            conn.execute(
                f"INSERT INTO {s} (user_id, session_id, version, head, msg_count, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (user_id, session_id) DO UPDATE "
                "SET version = excluded.version, head = excluded.head, msg_count = "
                "excluded.msg_count, updated_at = excluded.updated_at",
                (key.user_id, key.session_id, version, head, delta.n, time.time()))
        self._cache.put(key, delta.snapshot(version), state)
        return version

    def _read_snapshot(self, conn: Any, key: SessionKey, version: int) -> Snapshot:
        m = self._t["message"]
        rows = conn.execute(f"SELECT msg_id, role FROM {m} WHERE user_id = %s AND "
                            "session_id = %s ORDER BY seq", key).fetchall()
        roles = [r[1] for r in rows]
        bodies = [r[0] for r in conn.execute(
            f"SELECT body FROM {m} WHERE user_id = %s AND session_id = %s AND seq >= %s "
            "ORDER BY seq", (*key, window_start(roles, len(rows))))]
        return snapshot_of(version, [r[0] for r in rows], bodies, roles)

    def _remove(self, key: SessionKey) -> bool:
        with self._txn() as conn:
            existed = conn.execute(f"DELETE FROM {self._t['session']} WHERE user_id = %s AND "
                                   "session_id = %s", key).rowcount > 0
            conn.execute(f"DELETE FROM {self._t['message']} WHERE user_id = %s AND "
                         "session_id = %s", key)
        self._cache.drop(key)
        return bool(existed)

    def _list_keys(self, user_id: str | None) -> list[SessionKey]:
        s = self._t["session"]
        with self._conn() as conn:
            if user_id is None:
                rows = conn.execute(f"SELECT user_id, session_id FROM {s} "
                                    "ORDER BY user_id, session_id").fetchall()
            else:
                rows = conn.execute(f"SELECT user_id, session_id FROM {s} WHERE user_id = %s "
                                    "ORDER BY session_id", (user_id,)).fetchall()
        return [SessionKey(u, sid) for u, sid in rows]

    # -- leases -----------------------------------------------------------------------

    def _update_lease(self, key: SessionKey,
                      change: Callable[[LeaseRecord | None], tuple[LeaseRecord | None, T]]) -> T:
        table = self._t["lease"]
        with self._txn() as conn:
            # The row lock serialises writers; a missing row takes the key's advisory lock.
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))",
                         (f"{self.prefix}\x1f{key.user_id}\x1f{key.session_id}",))
            row = conn.execute(f"SELECT record FROM {table} WHERE user_id = %s AND "
                               "session_id = %s FOR UPDATE", key).fetchone()
            record = None if row is None else LeaseRecord.from_json(json.loads(row[0]))
            new, answer = change(record)
            if new is None:
                if row is not None:
                    conn.execute(f"DELETE FROM {table} WHERE user_id = %s AND session_id = %s",
                                 key)
            else:
                conn.execute(
                    f"INSERT INTO {table} (user_id, session_id, record) VALUES (%s, %s, %s) "
                    "ON CONFLICT (user_id, session_id) DO UPDATE SET record = excluded.record",
                    (key.user_id, key.session_id, json.dumps(new.to_json())))
        return answer


def _hide(conninfo: str) -> str:
    """``conninfo`` without its password, in either libpq form."""
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", redact(conninfo))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
