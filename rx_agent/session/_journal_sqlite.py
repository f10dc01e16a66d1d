"""The SQLite run journal: two tables in the store's file, on the store's threads.

Layout (beside the session tables)::

    rx_journal_head(jid, user_id, session_id, head)   -- a session's number, its last seq
    rx_journal(jid, seq, run_id, idx, at, type, data) -- one row per entry
    rx_journal_run(jid, run_id, first_seq)            -- where each run starts

An append is one ``BEGIN IMMEDIATE`` transaction: it moves the head by the number of
entries (so seqs are consecutive across processes), inserts them and trims the
session's entries past the retention. Readers in other processes find new entries by
polling (:attr:`RunJournal.poll`); those in this process are woken at once.
"""

from __future__ import annotations

import threading
import time

from ._base import SessionKey
from ._journal import JournalEntry, RunJournal
from ._journal_writer import Item
from ._sqlite_file import SqliteFile

__all__ = ["SqliteRunJournal"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rx_journal_head (
    jid INTEGER PRIMARY KEY, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    head INTEGER NOT NULL, UNIQUE (user_id, session_id));
CREATE TABLE IF NOT EXISTS rx_journal (
    jid INTEGER NOT NULL, seq INTEGER NOT NULL, run_id TEXT NOT NULL, idx INTEGER NOT NULL,
    at REAL NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (jid, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rx_journal_run (
    jid INTEGER NOT NULL, run_id TEXT NOT NULL, first_seq INTEGER NOT NULL,
    PRIMARY KEY (jid, run_id)) WITHOUT ROWID;
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
        with self._db.txn() as conn:
            jid, head = conn.execute(
                "INSERT INTO rx_journal_head (user_id, session_id, head) VALUES (?, ?, ?) "
                "ON CONFLICT (user_id, session_id) DO UPDATE SET head = head + excluded.head "
                "RETURNING jid, head", (*key, len(items))).fetchone()
            first = head - len(items) + 1
            conn.execute("INSERT OR IGNORE INTO rx_journal_run VALUES (?, ?, ?)",
                         (jid, run_id, first))
            conn.executemany(
                "INSERT INTO rx_journal VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(jid, first + i, run_id, index, at, type_, data)
                 for i, (index, type_, data, at) in enumerate(items)])
            conn.execute("DELETE FROM rx_journal WHERE jid = ? AND seq <= ?",
                         (jid, head - max_events))
            # A run that began two retentions ago has nothing left to locate.
            conn.execute("DELETE FROM rx_journal_run WHERE jid = ? AND first_seq <= ?",
                         (jid, head - 2 * max_events))
            cutoff = time.time() - max_age
            oldest = conn.execute("SELECT at FROM rx_journal WHERE jid = ? ORDER BY seq "
                                  "LIMIT 1", (jid,)).fetchone()
            if oldest is not None and oldest[0] < cutoff:  # rare: only then scan by time
                conn.execute("DELETE FROM rx_journal WHERE jid = ? AND at < ?", (jid, cutoff))
        return int(head)

    async def _read(self, key: SessionKey, after: int,
                    limit: int) -> tuple[list[JournalEntry], int]:
        return await self._db.run(self._read_rows, key, after, limit)

    def _read_rows(self, key: SessionKey, after: int,
                   limit: int) -> tuple[list[JournalEntry], int]:
        self._tables()
        conn = self._db.conn()
        conn.execute("BEGIN")  # one snapshot for the head and the rows
        try:
            found = conn.execute(f"SELECT jid, head FROM rx_journal_head {_WHERE}",
                                 key).fetchone()
            if found is None:
                return [], 0
            rows = conn.execute(
                "SELECT seq, run_id, idx, at, type, data FROM rx_journal WHERE jid = ? AND "
                "seq > ? ORDER BY seq LIMIT ?", (found[0], after, limit)).fetchall()
        finally:
            conn.execute("COMMIT")
        return [JournalEntry(*row) for row in rows], int(found[1])

    async def _locate(self, key: SessionKey, run_id: str, index: int) -> int | None:
        return await self._db.run(self._locate_row, key, run_id, index)

    def _locate_row(self, key: SessionKey, run_id: str, index: int) -> int | None:
        self._tables()
        conn = self._db.conn()
        found = conn.execute(
            "SELECT r.jid, r.first_seq FROM rx_journal_head h JOIN rx_journal_run r ON "
            "r.jid = h.jid AND r.run_id = ? WHERE h.user_id = ? AND h.session_id = ?",
            (run_id, *key)).fetchone()
        if found is None:
            return None
        jid, first = found
        guess = conn.execute(  # where it is when the run was not interleaved
            "SELECT seq FROM rx_journal WHERE jid = ? AND seq = ? AND run_id = ? AND idx = ?",
            (jid, first + index, run_id, index)).fetchone()
        if guess is None:
            guess = conn.execute(
                "SELECT seq FROM rx_journal WHERE jid = ? AND seq >= ? AND run_id = ? AND "
                "idx = ? ORDER BY seq LIMIT 1", (jid, first, run_id, index)).fetchone()
        return None if guess is None else int(guess[0])
