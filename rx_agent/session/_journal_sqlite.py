"""The SQLite run journal: two tables in the store's file, on the store's threads.

Layout (beside the session tables)::

    rx_journal_head(user_id, session_id, head)                      -- the last seq given out
    rx_journal(user_id, session_id, seq, run_id, idx, at, type, data)

An append is one ``BEGIN IMMEDIATE`` transaction: it moves the head by the number of
entries (so seqs are consecutive across processes), inserts them and trims the
session's entries past the retention. Readers in other processes find new entries by
polling (:attr:`RunJournal.poll`); those in this process are woken at once.
"""

from __future__ import annotations

import sqlite3
import threading
import time

from ._base import SessionKey
from ._journal import JournalEntry, RunJournal
from ._journal_writer import Item
from ._sqlite_file import SqliteFile

__all__ = ["SqliteRunJournal"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rx_journal_head (
    user_id TEXT NOT NULL, session_id TEXT NOT NULL, head INTEGER NOT NULL,
    PRIMARY KEY (user_id, session_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rx_journal (
    user_id TEXT NOT NULL, session_id TEXT NOT NULL, seq INTEGER NOT NULL,
    run_id TEXT NOT NULL, idx INTEGER NOT NULL, at REAL NOT NULL, type TEXT NOT NULL,
    data TEXT NOT NULL, PRIMARY KEY (user_id, session_id, seq)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rx_journal_run ON rx_journal (user_id, session_id, run_id, idx);
"""
_WHERE = "WHERE user_id = ? AND session_id = ?"


class SqliteRunJournal(RunJournal):
    """The journal of a :class:`SqliteSessionStore` (``store.journal()``)."""

    def __init__(self, db: SqliteFile) -> None:
        super().__init__()
        self._db = db
        self._ready = False
        self._lock = threading.Lock()

    def _tables(self) -> None:
        if self._ready:
            return
        with self._lock:
            if not self._ready:
                with self._db.txn() as conn:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                self._ready = True

    async def _append(self, key: SessionKey, run_id: str, items: list[Item]) -> int:
        return await self._db.run(self._append_rows, key, run_id, items,
                                  self.max_events, self.max_age)

    def _append_rows(self, key: SessionKey, run_id: str, items: list[Item], max_events: int,
                     max_age: float) -> int:
        self._tables()
        user, session = key
        with self._db.txn() as conn:
            head = int(conn.execute(
                "INSERT INTO rx_journal_head VALUES (?, ?, ?) ON CONFLICT (user_id, session_id)"
                " DO UPDATE SET head = head + excluded.head RETURNING head",
                (user, session, len(items))).fetchone()[0])
            first = head - len(items) + 1
            conn.executemany(
                "INSERT INTO rx_journal VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(user, session, first + i, run_id, index, at, type_, data)
                 for i, (index, type_, data, at) in enumerate(items)])
            _trim(conn, key, head, max_events, max_age)
        return head

    async def _read(self, key: SessionKey, after: int,
                    limit: int) -> tuple[list[JournalEntry], int]:
        return await self._db.run(self._read_rows, key, after, limit)

    def _read_rows(self, key: SessionKey, after: int,
                   limit: int) -> tuple[list[JournalEntry], int]:
        self._tables()
        conn = self._db.conn()
        conn.execute("BEGIN")  # one snapshot for the rows and the head
        try:
            rows = conn.execute(
                f"SELECT seq, run_id, idx, at, type, data FROM rx_journal {_WHERE} AND seq > ? "
                "ORDER BY seq LIMIT ?", (*key, after, limit)).fetchall()
            found = conn.execute(f"SELECT head FROM rx_journal_head {_WHERE}", key).fetchone()
        finally:
            conn.execute("COMMIT")
        return [JournalEntry(*row) for row in rows], 0 if found is None else int(found[0])

    async def _locate(self, key: SessionKey, run_id: str, index: int) -> int | None:
        return await self._db.run(self._locate_row, key, run_id, index)

    def _locate_row(self, key: SessionKey, run_id: str, index: int) -> int | None:
        self._tables()
        row = self._db.conn().execute(
            f"SELECT seq FROM rx_journal {_WHERE} AND run_id = ? AND idx = ?",
            (*key, run_id, index)).fetchone()
        return None if row is None else int(row[0])


def _trim(conn: sqlite3.Connection, key: SessionKey, head: int, max_events: int,
          max_age: float) -> None:
    conn.execute(f"DELETE FROM rx_journal {_WHERE} AND seq <= ?", (*key, head - max_events))
    cutoff = time.time() - max_age
    oldest = conn.execute(f"SELECT at FROM rx_journal {_WHERE} ORDER BY seq LIMIT 1",
                          key).fetchone()
    if oldest is not None and oldest[0] < cutoff:  # rare: only then scan by time
        conn.execute(f"DELETE FROM rx_journal {_WHERE} AND at < ?", (*key, cutoff))
