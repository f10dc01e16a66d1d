"""The PostgreSQL run journal: two tables beside the store's, on its pool.

Layout (``prefix`` is the store's)::

    {prefix}_journal_head(user_id, session_id, head)                -- the last seq given out
    {prefix}_journal(user_id, session_id, seq, run_id, idx, at, type, data)

An append is one transaction: an upsert of the head row (``... DO UPDATE SET head =
head + n RETURNING head``: the row lock orders concurrent appenders, so seqs are
consecutive), the rows, and the trim past the retention. The work runs on worker
threads (the store's rule for its sync pool). Readers in other processes find new
entries by polling every :attr:`RunJournal.poll` seconds (0.1); those in this process
are woken at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from ._base import SessionKey
from ._journal import JournalEntry, RunJournal
from ._journal_writer import Item

__all__ = ["PostgresRunJournal"]

_LOCK = 0x72785F6A6E  # the advisory lock under which processes create the tables


class PostgresRunJournal(RunJournal):
    """The journal of a ``PostgresSessionStore`` (``store.journal()``)."""

    def __init__(self, prefix: str, connection: Callable[[], AbstractContextManager[Any]]
                 ) -> None:
        """``connection()``: a pooled connection of the store, in autocommit."""
        super().__init__()
        self._conn = connection
        self._head = f"{prefix}_journal_head"
        self._rows = f"{prefix}_journal"
        self._ready = False
        self._lock = threading.Lock()

    def _tables(self, conn: Any) -> None:
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self._head} (user_id TEXT NOT NULL, "
                    "session_id TEXT NOT NULL, head BIGINT NOT NULL, PRIMARY KEY (user_id, "
                    "session_id))")
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self._rows} (user_id TEXT NOT NULL, "
                    "session_id TEXT NOT NULL, seq BIGINT NOT NULL, run_id TEXT NOT NULL, "
                    "idx INTEGER NOT NULL, at DOUBLE PRECISION NOT NULL, type TEXT NOT NULL, "
                    "data TEXT NOT NULL, PRIMARY KEY (user_id, session_id, seq))")
                conn.execute(
                    f"CREATE INDEX IF NOT EXISTS {self._rows}_run ON {self._rows} (user_id, "
                    "session_id, run_id, idx)")
            self._ready = True

    async def _append(self, key: SessionKey, run_id: str, items: list[Item]) -> int:
        return await asyncio.to_thread(self._append_rows, key, run_id, items,
                                       self.max_events, self.max_age)

    def _append_rows(self, key: SessionKey, run_id: str, items: list[Item], max_events: int,
                     max_age: float) -> int:
        user, session = key
        where = "WHERE user_id = %s AND session_id = %s"
        with self._conn() as conn:
            self._tables(conn)
            with conn.transaction():
                head = int(conn.execute(
                    f"INSERT INTO {self._head} AS h VALUES (%s, %s, %s) ON CONFLICT (user_id, "
                    "session_id) DO UPDATE SET head = h.head + EXCLUDED.head RETURNING head",
                    (user, session, len(items))).fetchone()[0])
                first = head - len(items) + 1
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {self._rows} VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                        [(user, session, first + i, run_id, index, at, type_, data)
                         for i, (index, type_, data, at) in enumerate(items)])
                conn.execute(f"DELETE FROM {self._rows} {where} AND seq <= %s",
                             (user, session, head - max_events))
                cutoff = time.time() - max_age
                oldest = conn.execute(f"SELECT at FROM {self._rows} {where} ORDER BY seq "
                                      "LIMIT 1", key).fetchone()
                if oldest is not None and oldest[0] < cutoff:  # rare: only then by time
                    conn.execute(f"DELETE FROM {self._rows} {where} AND at < %s",
                                 (user, session, cutoff))
        return head

    async def _read(self, key: SessionKey, after: int,
                    limit: int) -> tuple[list[JournalEntry], int]:
        return await asyncio.to_thread(self._read_rows, key, after, limit)

    def _read_rows(self, key: SessionKey, after: int,
                   limit: int) -> tuple[list[JournalEntry], int]:
        where = "WHERE user_id = %s AND session_id = %s"
        with self._conn() as conn:
            self._tables(conn)
            with conn.transaction():  # one snapshot for the rows and the head
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                rows = conn.execute(
                    f"SELECT seq, run_id, idx, at, type, data FROM {self._rows} {where} AND "
                    "seq > %s ORDER BY seq LIMIT %s", (*key, after, limit)).fetchall()
                found = conn.execute(f"SELECT head FROM {self._head} {where}", key).fetchone()
        return ([JournalEntry(int(s), r, int(i), float(a), t, d) for s, r, i, a, t, d in rows],
                0 if found is None else int(found[0]))

    async def _locate(self, key: SessionKey, run_id: str, index: int) -> int | None:
        return await asyncio.to_thread(self._locate_row, key, run_id, index)

    def _locate_row(self, key: SessionKey, run_id: str, index: int) -> int | None:
        with self._conn() as conn:
            self._tables(conn)
            row = conn.execute(
                f"SELECT seq FROM {self._rows} WHERE user_id = %s AND session_id = %s AND "
                "run_id = %s AND idx = %s", (*key, run_id, index)).fetchone()
        return None if row is None else int(row[0])
