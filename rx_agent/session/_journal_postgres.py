"""The PostgreSQL run journal: three tables beside the store's, on its pool.

Layout (``prefix`` is the store's)::

    {prefix}_journal_head(user_id, session_id, jid, head)  -- a session's number, last seq
    {prefix}_journal(jid, last_seq, run_id, idx_first, idx_last, at, batch)
                                                           -- one row per append (a batch)
    {prefix}_journal_run(jid, run_id, first_seq)           -- where each run starts

A row holds one append's entries (``batch``, JSON) and is keyed by its last seq, so one
write serves a batch, not an event. An append is one transaction: an upsert of the head
row (``... DO UPDATE SET head = head + n RETURNING``: the row lock orders concurrent
appenders, so seqs are consecutive), the row, and the trim past the retention (whole
batches, as in SQLite). The work runs on worker threads (the store's rule for its sync
pool). An append also sends ``NOTIFY {prefix}_journal`` with the session (delivered at
commit); a follower's process keeps one ``LISTEN`` connection on a thread of its own
(started by the first live reader), which wakes that process's readers of the session
at once. While it is not connected (PostgreSQL restarting, say) readers poll every
0.1 s; with it, every 2 s as a fallback. Readers in this process are woken at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from ._base import SessionKey
from ._journal import JournalEntry, RunJournal, decode_batch, encode_batch
from ._journal_writer import Item

__all__ = ["PostgresRunJournal"]

SWEEP = 0.01
"""The chance that an append also drops every session's rows past ``max_age`` (by the
index on ``at``): sessions nobody appends to any more are emptied too."""
log = logging.getLogger("rx_agent.session")
_LOCK = 0x72785F6A6E  # the advisory lock under which processes create the tables


def _entries(rows: list[tuple[Any, ...]], after: int) -> list[JournalEntry]:
    out: list[JournalEntry] = []
    for last, run_id, batch in rows:
        entries = decode_batch(int(last), run_id, batch)
        out.extend(entries if entries[0].seq > after else [e for e in entries if e.seq > after])
    return out


class PostgresRunJournal(RunJournal):
    """The journal of a ``PostgresSessionStore`` (``store.journal()``)."""

    def __init__(self, prefix: str, connection: Callable[[], AbstractContextManager[Any]],
                 conninfo: str | None = None) -> None:
        """``connection()``: a pooled connection of the store, in autocommit;
        ``conninfo``: where the ``LISTEN`` connection goes (``None``: poll only)."""
        super().__init__()
        self._conn = connection
        self._conninfo = conninfo
        self._channel = f"{prefix}_journal"
        self._listening = threading.Event()
        """The ``LISTEN`` connection is up: followers poll every 2 s (a fallback), not 0.1."""
        self._listener: tuple[int, threading.Thread] | None = None
        self._stop = threading.Event()
        self._head = f"{prefix}_journal_head"
        self._rows = f"{prefix}_journal"
        self._runs = f"{prefix}_journal_run"
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
                    "session_id TEXT NOT NULL, jid BIGSERIAL UNIQUE, head BIGINT NOT NULL, "
                    "PRIMARY KEY (user_id, session_id))")
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self._rows} (jid BIGINT NOT NULL, "
                    "last_seq BIGINT NOT NULL, run_id TEXT NOT NULL, idx_first INTEGER NOT "
                    "NULL, idx_last INTEGER NOT NULL, at DOUBLE PRECISION NOT NULL, batch "
                    "TEXT NOT NULL, PRIMARY KEY (jid, last_seq))")
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self._runs} (jid BIGINT NOT NULL, run_id "
                    "TEXT NOT NULL, first_seq BIGINT NOT NULL, PRIMARY KEY (jid, run_id))")
                conn.execute(f"CREATE INDEX IF NOT EXISTS {self._rows}_at ON {self._rows} (at)")
            self._ready = True

    async def _append(self, key: SessionKey, run_id: str, items: list[Item]) -> int:
        return await asyncio.to_thread(self._append_rows, key, run_id, items,
                                       self.max_events, self.max_age)

    def _append_rows(self, key: SessionKey, run_id: str, items: list[Item], max_events: int,
                     max_age: float) -> int:
        batch = encode_batch(items)
        indexes = [item[0] for item in items]
        with self._conn() as conn:
            self._tables(conn)
            with conn.transaction():
                jid, head = conn.execute(
                    f"INSERT INTO {self._head} AS h (user_id, session_id, head) VALUES (%s, "
                    "%s, %s) ON CONFLICT (user_id, session_id) DO UPDATE SET head = h.head + "
                    "EXCLUDED.head RETURNING jid, head", (*key, len(items))).fetchone()
                conn.execute(f"INSERT INTO {self._runs} VALUES (%s, %s, %s) ON CONFLICT DO "
                             "NOTHING", (jid, run_id, head - len(items) + 1))
                conn.execute(f"INSERT INTO {self._rows} VALUES (%s, %s, %s, %s, %s, %s, %s)",
                             (jid, head, run_id, min(indexes), max(indexes), items[-1][3],
                              batch))
                conn.execute(f"DELETE FROM {self._rows} WHERE jid = %s AND last_seq <= %s",
                             (jid, head - max_events))
                # A run that began two retentions ago has nothing left to locate.
                conn.execute(f"DELETE FROM {self._runs} WHERE jid = %s AND first_seq <= %s",
                             (jid, head - 2 * max_events))
                cutoff = time.time() - max_age
                oldest = conn.execute(f"SELECT at FROM {self._rows} WHERE jid = %s ORDER BY "
                                      "last_seq LIMIT 1", (jid,)).fetchone()
                if oldest is not None and oldest[0] < cutoff:  # rare: only then by time
                    conn.execute(f"DELETE FROM {self._rows} WHERE jid = %s AND at < %s",
                                 (jid, cutoff))
                if random.random() < SWEEP:  # sessions nobody appends to any more
                    conn.execute(f"DELETE FROM {self._rows} WHERE at < %s", (cutoff,))
                conn.execute("SELECT pg_notify(%s, %s)", (self._channel, json.dumps(key)))
        return int(head)

    # -- waking followers in other processes ------------------------------------------

    async def _read_wait(self, key: SessionKey, after: int, limit: int,
                         timeout: float) -> list[JournalEntry]:
        self._listen()
        return await super()._read_wait(key, after, limit, timeout)

    def _listen(self) -> None:
        """Start the ``LISTEN`` thread of this process (again after a fork)."""
        if self._conninfo is None:
            return
        listener = self._listener
        if listener is not None and listener[0] == os.getpid() and listener[1].is_alive():
            return
        with self._lock:
            listener = self._listener
            if listener is None or listener[0] != os.getpid() or not listener[1].is_alive():
                self._listening.clear()
                self._stop.clear()
                thread = threading.Thread(target=self._listen_loop, daemon=True,
                                          name=f"rx-journal-listen-{self._channel}")
                self._listener = (os.getpid(), thread)
                thread.start()

    def _listen_loop(self) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo or "", autocommit=True) as conn:
                    conn.execute(f"LISTEN {self._channel}")
                    self._listening.set()
                    self.poll = 2.0
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0):
                            self._woken(note.payload)
            except Exception as exc:  # the server went away: poll meanwhile, retry
                self._listening.clear()
                self.poll = 0.1
                log.debug("the run journal's LISTEN connection failed: %r", exc)
                self._stop.wait(1.0)
        self._listening.clear()
        self.poll = 0.1

    def _woken(self, payload: str) -> None:
        try:
            user, session = json.loads(payload)
        except (ValueError, TypeError):
            return
        self._bell.ring(SessionKey(user, session))

    def close(self) -> None:
        """Stop the ``LISTEN`` thread (within a second; a later follower starts it again)."""
        self._stop.set()

    async def _read(self, key: SessionKey, after: int,
                    limit: int) -> tuple[list[JournalEntry], int]:
        return await asyncio.to_thread(self._read_rows, key, after, limit)

    def _read_rows(self, key: SessionKey, after: int,
                   limit: int) -> tuple[list[JournalEntry], int]:
        with self._conn() as conn:
            self._tables(conn)
            with conn.transaction():  # one snapshot for the head and the rows
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                found = conn.execute(f"SELECT jid, head FROM {self._head} WHERE user_id = %s "
                                     "AND session_id = %s", key).fetchone()
                if found is None:
                    return [], 0
                rows = conn.execute(
                    f"SELECT last_seq, run_id, batch FROM {self._rows} WHERE jid = %s AND "
                    "last_seq > %s ORDER BY last_seq LIMIT %s", (found[0], after, limit)
                ).fetchall()
        return _entries(rows, after)[:limit], int(found[1])

    async def _locate(self, key: SessionKey, run_id: str, index: int) -> int | None:
        return await asyncio.to_thread(self._locate_row, key, run_id, index)

    def _locate_row(self, key: SessionKey, run_id: str, index: int) -> int | None:
        with self._conn() as conn:
            self._tables(conn)
            rows = conn.execute(  # the run's first batch from its start that may hold it
                f"SELECT b.last_seq, b.run_id, b.batch FROM {self._head} h JOIN {self._runs} r "
                f"ON r.jid = h.jid AND r.run_id = %s JOIN {self._rows} b ON b.jid = h.jid AND "
                "b.last_seq >= r.first_seq AND b.run_id = r.run_id AND b.idx_first <= %s AND "
                "b.idx_last >= %s WHERE h.user_id = %s AND h.session_id = %s ORDER BY "
                "b.last_seq LIMIT 1", (run_id, index, index, *key)).fetchall()
        for entry in _entries(rows, 0):
            if entry.index == index:
                return entry.seq
        return None
