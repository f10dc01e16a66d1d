"""``SqliteLongTermMemory``: facts per user in one SQLite file, searched with FTS5.

Layout (tables prefixed ``rx_mem_``; the file may hold other tables, a
``SqliteSessionStore``'s or a ``SqliteKnowledge``'s included)::

    rx_mem_fact(rowid, id, user_id, text, norm, metadata, created_at)
    rx_mem_fts  -- FTS5 index of fact text

Every statement filters on ``user_id``: a user's facts are never read, changed or
deleted on behalf of another user.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sqlite3
import time
from collections.abc import Mapping
from typing import Any

from ..session._sqlite_file import SqliteFile, check_path
from ._knowledge import check_top_k, query_terms
from ._memory import MemoryFact, check_fact, check_user, normalize_fact

__all__ = ["SqliteLongTermMemory"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rx_mem_fact (
    rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
    text TEXT NOT NULL, norm TEXT NOT NULL, metadata TEXT NOT NULL,
    created_at REAL NOT NULL, UNIQUE (user_id, norm));
CREATE INDEX IF NOT EXISTS rx_mem_fact_user ON rx_mem_fact (user_id, created_at);
CREATE VIRTUAL TABLE IF NOT EXISTS rx_mem_fts USING fts5(
    text, content='rx_mem_fact', content_rowid='rowid', tokenize='porter unicode61')
"""
_COLUMNS = "f.id, f.user_id, f.text, f.metadata, f.created_at"


def _fact(row: tuple[Any, ...], score: float | None = None) -> MemoryFact:
    fact_id, user_id, text, meta, created = row[:5]
    return MemoryFact(id=fact_id, user_id=user_id, text=text, metadata=json.loads(meta),
                      created_at=created, score=score)


class SqliteLongTermMemory:
    """A :class:`~rx_agent.LongTermMemory` in one SQLite file: offline, per user,
    across sessions and processes.

    Facts are compared case- and punctuation-insensitively: recording one again
    returns the stored one. Search ranks a user's facts with BM25 over their words.
    SQLite work runs on the store's own ``threads``, never on the event loop.
    """

    def __init__(self, path: str | os.PathLike[str], *, threads: int = 2,
                 timeout: float = 30.0) -> None:
        self.path = check_path(path, "SqliteLongTermMemory")
        self._db = SqliteFile(self.path, owner=repr(self), schema=_SCHEMA, threads=threads,
                              timeout=timeout)

    def __repr__(self) -> str:
        return f"SqliteLongTermMemory({str(self.path)!r})"

    # -- the LongTermMemory protocol -------------------------------------------------------

    async def add(self, user_id: str, text: str,
                  metadata: Mapping[str, Any] | None = None) -> MemoryFact:
        """Record ``text`` for ``user_id`` (an equal fact already stored is returned)."""
        user = check_user(user_id)
        fact = check_fact(text)
        meta = json.dumps(dict(metadata or {}), ensure_ascii=False)
        return await self._db.run(self._add, user, fact, meta)

    async def search(self, user_id: str, query: str, top_k: int = 5) -> list[MemoryFact]:
        """The user's ``top_k`` facts best matching ``query`` (BM25), best first."""
        user = check_user(user_id)
        check_top_k(top_k)
        terms = query_terms(query)
        if not terms:
            return []
        return await self._db.run(self._search, user, terms, top_k)

    async def recent(self, user_id: str, limit: int = 20) -> list[MemoryFact]:
        """The user's ``limit`` latest facts, newest first."""
        user = check_user(user_id)
        check_top_k(limit, "limit")
        return await self._db.run(self._recent, user, limit)

    async def delete(self, user_id: str, fact_id: str) -> bool:
        """Delete the user's fact ``fact_id``; ``False`` if the user has none by that id
        (another user's fact is never touched)."""
        user = check_user(user_id)
        return await self._db.run(self._delete, user, str(fact_id))

    # -- more ----------------------------------------------------------------------------

    async def clear(self, user_id: str) -> int:
        """Delete every fact of ``user_id``; how many were deleted."""
        user = check_user(user_id)
        return await self._db.run(self._clear, user)

    async def count(self, user_id: str) -> int:
        """How many facts ``user_id`` has."""
        user = check_user(user_id)
        return await self._db.run(self._count, user)

    def close(self) -> None:
        """Close the connections and stop the threads (a later call reopens them)."""
        self._db.close()

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop (it waits for the threads)."""
        await asyncio.to_thread(self._db.close)

    # -- on the worker threads -----------------------------------------------------------

    def _add(self, user: str, text: str, meta: str) -> MemoryFact:
        norm = normalize_fact(text) or text
        with self._db.txn() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM rx_mem_fact f WHERE f.user_id = ? AND f.norm = ?",
                (user, norm)).fetchone()
            if row is not None:
                return _fact(row)
            now = time.time()
            for _ in range(5):  # a clash of 48 random bits: draw again
                fact_id = "m" + secrets.token_hex(6)
                try:
                    cur = conn.execute(
                        "INSERT INTO rx_mem_fact (id, user_id, text, norm, metadata, created_at)"
                        " VALUES (?, ?, ?, ?, ?, ?)", (fact_id, user, text, norm, meta, now))
                except sqlite3.IntegrityError:
                    continue
                conn.execute("INSERT INTO rx_mem_fts (rowid, text) VALUES (?, ?)",
                             (cur.lastrowid, text))
                return _fact((fact_id, user, text, meta, now))
        raise RuntimeError("could not draw a free fact id")  # pragma: no cover

    def _search(self, user: str, terms: list[str], top_k: int) -> list[MemoryFact]:
        match = " OR ".join(f'"{t}"' for t in terms)
        rows = self._db.conn().execute(
            f"SELECT {_COLUMNS}, bm25(rx_mem_fts) AS rank FROM rx_mem_fts "
            "JOIN rx_mem_fact f ON f.rowid = rx_mem_fts.rowid "
            "WHERE rx_mem_fts MATCH ? AND f.user_id = ? "
            "ORDER BY rank, f.created_at DESC LIMIT ?", (match, user, top_k)).fetchall()
        return [_fact(row, -row[5]) for row in rows]

    def _recent(self, user: str, limit: int) -> list[MemoryFact]:
        rows = self._db.conn().execute(
            f"SELECT {_COLUMNS} FROM rx_mem_fact f WHERE f.user_id = ? "
            "ORDER BY f.created_at DESC, f.rowid DESC LIMIT ?", (user, limit)).fetchall()
        return [_fact(row) for row in rows]

    def _delete(self, user: str, fact_id: str) -> bool:
        with self._db.txn() as conn:
            row = conn.execute("SELECT rowid, text FROM rx_mem_fact WHERE id = ? AND user_id = ?",
                               (fact_id, user)).fetchone()
            if row is None:
                return False
            conn.execute("INSERT INTO rx_mem_fts (rx_mem_fts, rowid, text) "
                         "VALUES ('delete', ?, ?)", row)
            conn.execute("DELETE FROM rx_mem_fact WHERE rowid = ?", (row[0],))
            return True

    def _clear(self, user: str) -> int:
        with self._db.txn() as conn:
            conn.execute("INSERT INTO rx_mem_fts (rx_mem_fts, rowid, text) "
                         "SELECT 'delete', rowid, text FROM rx_mem_fact WHERE user_id = ?",
                         (user,))
            return conn.execute("DELETE FROM rx_mem_fact WHERE user_id = ?", (user,)).rowcount

    def _count(self, user: str) -> int:
        return int(self._db.conn().execute(
            "SELECT count(*) FROM rx_mem_fact WHERE user_id = ?", (user,)).fetchone()[0])
