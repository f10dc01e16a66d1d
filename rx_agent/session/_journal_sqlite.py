"""The SQLite run journal: three tables in the store's file, on the store's threads.

Layout (beside the session tables)::

    rx_journal_head(jid, user_id, session_id, head)  -- a session's number, its last seq
    rx_journal(jid, last_seq, run_id, idx_first, idx_last, at, batch)
                                                     -- one row per append (a batch)
    rx_journal_run(jid, run_id, first_seq)           -- where each run starts

A row holds one append's entries (``batch``, JSON) and is keyed by its last seq, so one
write serves a batch, not an event. An append is one ``BEGIN IMMEDIATE`` transaction:
it moves the head by the number of entries (so seqs are consecutive across processes),
inserts the row and drops the rows wholly older than the newest ``max_events`` entries
(a batch that straddles the line stays whole) or than ``max_age``. Readers in other
processes find new entries by polling (:attr:`RunJournal.poll`); those in this process
are woken at once.
"""

from __future__ import annotations

import random
import threading
import time

from ._base import SessionKey
from ._journal import JournalEntry, RunJournal, decode_batch, encode_batch
from ._journal_writer import Item
from ._sqlite_file import SqliteFile

__all__ = ["SqliteRunJournal"]

# rx_journal keeps its rowid: its rows are large (a batch), which SQLite stores better in
# a rowid table than in a WITHOUT ROWID one.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS rx_journal_head (
    jid INTEGER PRIMARY KEY, user_id TEXT NOT NULL, session_id TEXT NOT NULL,
    head INTEGER NOT NULL, UNIQUE (user_id, session_id));
CREATE TABLE IF NOT EXISTS rx_journal (
    jid INTEGER NOT NULL, last_seq INTEGER NOT NULL, run_id TEXT NOT NULL,
    idx_first INTEGER NOT NULL, idx_last INTEGER NOT NULL, at REAL NOT NULL,
    batch TEXT NOT NULL, PRIMARY KEY (jid, last_seq));
CREATE INDEX IF NOT EXISTS rx_journal_at ON rx_journal (at);
CREATE TABLE IF NOT EXISTS rx_journal_run (
    jid INTEGER NOT NULL, run_id TEXT NOT NULL, first_seq INTEGER NOT NULL,
    PRIMARY KEY (jid, run_id)) WITHOUT ROWID;
"""
SWEEP = 0.01
"""The chance that an append also drops every session's rows past ``max_age`` (by the
index on ``at``): sessions nobody appends to any more are emptied too."""
_ROWS = "SELECT last_seq, run_id, batch FROM rx_journal"


def _entries(rows: list[tuple[int, str, str]], after: int) -> list[JournalEntry]:
    out: list[JournalEntry] = []
    for last, run_id, batch in rows:
        entries = decode_batch(last, run_id, batch)
        out.extend(entries if entries[0].seq > after else [e for e in entries if e.seq > after])
    return out


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
        batch = encode_batch(items)
        indexes = [item[0] for item in items]
        with self._db.txn() as conn:
            jid, head = conn.execute(
                "INSERT INTO rx_journal_head (user_id, session_id, head) VALUES (?, ?, ?) "
                "ON CONFLICT (user_id, session_id) DO UPDATE SET head = head + excluded.head "
                "RETURNING jid, head", (*key, len(items))).fetchone()
            conn.execute("INSERT OR IGNORE INTO rx_journal_run VALUES (?, ?, ?)",
                         (jid, run_id, head - len(items) + 1))
            conn.execute("INSERT INTO rx_journal VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (jid, head, run_id, min(indexes), max(indexes), items[-1][3], batch))
            conn.execute("DELETE FROM rx_journal WHERE jid = ? AND last_seq <= ?",
                         (jid, head - max_events))
            # A run that began two retentions ago has nothing left to locate.
            conn.execute("DELETE FROM rx_journal_run WHERE jid = ? AND first_seq <= ?",
                         (jid, head - 2 * max_events))
            cutoff = time.time() - max_age
            oldest = conn.execute("SELECT at FROM rx_journal WHERE jid = ? ORDER BY last_seq "
                                  "LIMIT 1", (jid,)).fetchone()
            if oldest is not None and oldest[0] < cutoff:  # rare: only then scan by time
                conn.execute("DELETE FROM rx_journal WHERE jid = ? AND at < ?", (jid, cutoff))
            if random.random() < SWEEP:  # sessions nobody appends to any more
                conn.execute("DELETE FROM rx_journal WHERE at < ?", (cutoff,))
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
            found = conn.execute("SELECT jid, head FROM rx_journal_head WHERE user_id = ? AND "
                                 "session_id = ?", key).fetchone()
            if found is None:
                return [], 0
            rows = conn.execute(f"{_ROWS} WHERE jid = ? AND last_seq > ? ORDER BY last_seq "
                                "LIMIT ?", (found[0], after, limit)).fetchall()
        finally:
            conn.execute("COMMIT")
        return _entries(rows, after)[:limit], int(found[1])

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
        rows = conn.execute(  # the run's batches from its start, the first that may hold it
            f"{_ROWS} WHERE jid = ? AND last_seq >= ? AND run_id = ? AND idx_first <= ? AND "
            "idx_last >= ? ORDER BY last_seq LIMIT 1", (*found, run_id, index, index)).fetchall()
        for entry in _entries(rows, 0):
            if entry.index == index:
                return entry.seq
        return None
