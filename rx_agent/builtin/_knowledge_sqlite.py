"""``SqliteKnowledge``: an offline knowledge base in one SQLite file (FTS5, BM25).

Layout (tables prefixed ``rx_kb_``; the file may hold other tables)::

    rx_kb_chunk(id, source, seq, text, metadata, added_at)  -- one row per chunk
    rx_kb_fts                                               -- FTS5 index of chunk text

The index uses the ``porter`` tokenizer over ``unicode61``, so "refunds" finds
"refund". A query is the OR of its words (stop words dropped); FTS5's ``bm25()``
ranks the matches.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..session._sqlite_file import SqliteFile, check_path
from ._knowledge import (
    Document,
    Passage,
    check_chunking,
    check_filters,
    check_top_k,
    chunk_text,
    documents_of,
    query_terms,
)

__all__ = ["SqliteKnowledge"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rx_kb_chunk (
    id INTEGER PRIMARY KEY, source TEXT NOT NULL, seq INTEGER NOT NULL,
    text TEXT NOT NULL, metadata TEXT NOT NULL, added_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS rx_kb_chunk_source ON rx_kb_chunk (source, seq);
CREATE VIRTUAL TABLE IF NOT EXISTS rx_kb_fts USING fts5(
    text, content='rx_kb_chunk', content_rowid='id', tokenize='porter unicode61')
"""

_DELETE_SOURCE = (
    "INSERT INTO rx_kb_fts (rx_kb_fts, rowid, text) "
    "SELECT 'delete', id, text FROM rx_kb_chunk WHERE source = ?"
)


def filter_sql(filters: Mapping[str, tuple[Any, ...]], column: str) -> tuple[str, list[Any]]:
    """``AND ...`` clauses matching checked filters against the JSON in ``column``,
    with the same typing rules as :func:`rx_agent.builtin._knowledge.matches`."""
    clauses: list[str] = []
    params: list[Any] = []
    for key, accepted in filters.items():
        path = f'$."{key}"'  # the key was checked: letters, digits, '_' and '-' only
        kind = f"json_type({column}, ?)"
        options: list[str] = []
        for value in accepted:
            if value is None:
                options.append(f"({kind} IS NULL OR {kind} = 'null')")
                params += [path, path]
            elif isinstance(value, bool):
                options.append(f"{kind} = ?")
                params += [path, "true" if value else "false"]
            elif isinstance(value, (int, float)):
                options.append(f"({kind} IN ('integer', 'real') AND "
                               f"json_extract({column}, ?) = ?)")
                params += [path, path, value]
            else:
                options.append(f"({kind} = 'text' AND json_extract({column}, ?) = ?)")
                params += [path, path, value]
        clauses.append(f" AND ({' OR '.join(options)})")
    return "".join(clauses), params


class SqliteKnowledge:
    """A :class:`~rx_agent.Knowledge` base in one SQLite file: full-text search with
    BM25 ranking, offline, no extra dependency.

    Documents are split into chunks of at most ``chunk_size`` characters, each
    overlapping the previous one by about ``chunk_overlap``. ``path`` is a file
    (created, with its folder if only that is missing); several processes may share
    it. SQLite work runs on the store's own ``threads``, never on the event loop.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        chunk_size: int = 800,
        chunk_overlap: int = 120,
        threads: int = 2,
        timeout: float = 30.0,
    ) -> None:
        self.chunk_size, self.chunk_overlap = check_chunking(chunk_size, chunk_overlap)
        self.path = check_path(path, "SqliteKnowledge")
        self._db = SqliteFile(self.path, owner=repr(self), schema=_SCHEMA, threads=threads,
                              timeout=timeout)

    def __repr__(self) -> str:
        return f"SqliteKnowledge({str(self.path)!r})"

    # -- the Knowledge protocol ----------------------------------------------------------

    async def add(self, documents: Iterable[Document | str] | Document | str) -> int:
        """Index ``documents`` (replacing any with the same source); the chunk count."""
        docs = documents_of(documents)
        rows = [(d, chunk_text(d.text, self.chunk_size, self.chunk_overlap)) for d in docs]
        for doc, _ in rows:
            json.dumps(doc.metadata)  # not JSON: fail here, before the thread hop
        return await self._db.run(self._add, rows)

    async def search(
        self, query: str, top_k: int = 5, filters: Mapping[str, Any] | None = None
    ) -> list[Passage]:
        """The ``top_k`` best chunks for ``query`` (BM25), whose metadata passes
        ``filters``."""
        check_top_k(top_k)
        checked = check_filters(filters)
        terms = query_terms(query)
        if not terms:
            return []
        return await self._db.run(self._search, terms, top_k, checked)

    # -- more ----------------------------------------------------------------------------

    async def delete(self, source: str) -> int:
        """Remove the document ``source``; the number of chunks removed."""
        return await self._db.run(self._delete, source)

    async def sources(self) -> list[str]:
        """The indexed documents' sources, sorted."""
        return await self._db.run(self._sources)

    async def count(self) -> int:
        """How many chunks are indexed."""
        return await self._db.run(self._count)

    def close(self) -> None:
        """Close the connections and stop the threads (a later call reopens them)."""
        self._db.close()

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop (it waits for the threads)."""
        await asyncio.to_thread(self._db.close)

    # -- on the worker threads -----------------------------------------------------------

    def _add(self, rows: list[tuple[Document, list[str]]]) -> int:
        stored = 0
        now = time.time()
        with self._db.txn() as conn:
            for doc, chunks in rows:
                conn.execute(_DELETE_SOURCE, (doc.source,))
                conn.execute("DELETE FROM rx_kb_chunk WHERE source = ?", (doc.source,))
                meta = json.dumps(doc.metadata, ensure_ascii=False)
                for seq, text in enumerate(chunks):
                    cur = conn.execute(
                        "INSERT INTO rx_kb_chunk (source, seq, text, metadata, added_at) "
                        "VALUES (?, ?, ?, ?, ?)", (doc.source, seq, text, meta, now))
                    conn.execute("INSERT INTO rx_kb_fts (rowid, text) VALUES (?, ?)",
                                 (cur.lastrowid, text))
                    stored += 1
        return stored

    def _search(self, terms: list[str], top_k: int,
                filters: dict[str, tuple[Any, ...]]) -> list[Passage]:
        match = " OR ".join(f'"{t}"' for t in terms)  # \w+ words: no quote inside
        where, params = filter_sql(filters, "c.metadata")
        sql = (
            "SELECT c.source, c.seq, c.text, c.metadata, bm25(rx_kb_fts) AS rank "
            "FROM rx_kb_fts JOIN rx_kb_chunk c ON c.id = rx_kb_fts.rowid "
            f"WHERE rx_kb_fts MATCH ?{where} ORDER BY rank, c.id LIMIT ?"
        )
        try:
            found = self._db.conn().execute(sql, (match, *params, top_k)).fetchall()
        except sqlite3.OperationalError as exc:
            raise ValueError(f"{self!r}: cannot search for {terms!r}: {exc}") from exc
        # bm25() is lower-is-better (negative); the passage score is higher-is-better.
        return [
            Passage(text=text, source=source, score=-rank, metadata=json.loads(meta),
                    chunk=seq)
            for source, seq, text, meta, rank in found
        ]

    def _delete(self, source: str) -> int:
        with self._db.txn() as conn:
            conn.execute(_DELETE_SOURCE, (source,))
            return conn.execute("DELETE FROM rx_kb_chunk WHERE source = ?", (source,)).rowcount

    def _sources(self) -> list[str]:
        rows = self._db.conn().execute(
            "SELECT DISTINCT source FROM rx_kb_chunk ORDER BY source").fetchall()
        return [r[0] for r in rows]

    def _count(self) -> int:
        return int(self._db.conn().execute("SELECT count(*) FROM rx_kb_chunk").fetchone()[0])
