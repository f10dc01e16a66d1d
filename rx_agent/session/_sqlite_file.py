"""One SQLite file used from the event loop: a connection per thread, work on a pool.

The scheme of :class:`~rx_agent.SqliteSessionStore`, :class:`~rx_agent.SqliteKnowledge`
and :class:`~rx_agent.SqliteLongTermMemory`. Statements run on the file's worker
threads (``await db.run(fn, ...)``), so the loop never waits on the disk; each thread
keeps its own connection (WAL mode: readers and a writer work at once, and several
processes may share the file); a forked child opens its own.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ..errors import RxAgentError

__all__ = ["MissingDirectoryError", "SqliteFile", "check_path", "make_parent"]

T = TypeVar("T")


def check_path(path: str | os.PathLike[str], owner: str, instead: str = "") -> Path:
    """``path`` as an absolute file path (its folder made), or a ``ValueError`` naming
    ``owner`` (and ``instead``, what to use for a database in memory)."""
    raw = os.fspath(path)
    if not isinstance(raw, str) or not raw or raw == ":memory:" or raw.startswith("file:"):
        alternative = f": {instead}" if instead else ""
        raise ValueError(
            f"{owner} needs a file path, got {raw!r} (an in-memory SQLite database is "
            f"private to one connection, and this store uses one connection per "
            f"thread{alternative})"
        )
    return Path(raw).expanduser().absolute()


class MissingDirectoryError(RxAgentError, FileNotFoundError, ValueError):
    """A database file whose folder's own parent does not exist either.

    A ``FileNotFoundError``, as ``open()`` raises, and a ``ValueError``, as for any
    other unusable path given to a SQLite store."""


def make_parent(path: Path, owner: str) -> None:
    """Create the folder of ``path`` when it is the only one missing; refuse a deeper
    gap (``/srv/dta/app/x.db`` for ``/srv/data/...``), more often a typo than a wish,
    naming the highest missing directory."""
    parent = path.parent
    if parent.is_dir():
        return
    if parent.exists():
        raise MissingDirectoryError(f"{owner}: cannot create {path}: {parent} is not a "
                                    "directory")
    missing = parent
    while not missing.parent.exists() and missing.parent != missing:
        missing = missing.parent
    if missing != parent:
        raise MissingDirectoryError(
            f"{owner}: cannot create {path}: the directory {missing} does not exist (only "
            f"the file's own folder is created; make the others first: mkdir -p {parent})")
    if not parent.parent.is_dir():
        raise MissingDirectoryError(f"{owner}: cannot create {path}: {parent.parent} is not "
                                    "a directory")
    parent.mkdir(exist_ok=True)  # exist_ok: another process may make it first


class SqliteFile:
    """The connections and worker threads of one database file.

    ``schema`` (statements separated by ``;``) is run once, in one transaction, by the
    first connection, then ``check(conn)`` inside it (a layout check, say); ``owner``
    names the store in error messages. ``synchronous`` is SQLite's setting;
    ``require_wal`` refuses a file that cannot use WAL mode; ``on_fork`` runs in a
    forked child before it opens its own connections.
    """

    def __init__(self, path: Path, *, owner: str, schema: str, threads: int,
                 timeout: float, synchronous: str = "NORMAL", require_wal: bool = False,
                 check: Callable[[sqlite3.Connection], None] | None = None,
                 on_fork: Callable[[], None] | None = None, what: str = "database") -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an int >= 1, got {threads!r}")
        if not timeout >= 0:
            raise ValueError(f"timeout must be >= 0 seconds, got {timeout!r}")
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        self.path = path
        self.owner = owner
        self._schema = schema
        self._synchronous = synchronous
        self._require_wal = require_wal
        self._check = check
        self._on_fork = on_fork
        self._what = what
        self._threads = threads
        self._timeout = float(timeout)
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._pool: ThreadPoolExecutor | None = None
        self._ready = False
        make_parent(path, owner)
        self.conn()  # a bad file fails at construction, not at the first query

    def conn(self) -> sqlite3.Connection:
        if self._pid != os.getpid():  # forked: the parent's connections are not ours
            with self._lock:
                self._pid, self._local, self._conns, self._pool = (
                    os.getpid(), threading.local(), [], None)
            if self._on_fork is not None:
                self._on_fork()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            raise ValueError(f"{self.owner}: cannot open the {self._what} {self.path}: {exc}"
                             ) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if self._require_wal and str(mode).lower() != "wal":
                raise ValueError(f"{self.owner}: SQLite refused WAL mode (journal_mode={mode})")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            if not self._ready:
                self._create(conn)
        except sqlite3.OperationalError as exc:
            conn.close()
            if "fts5" in str(exc):
                raise RuntimeError(
                    f"{self.owner}: this Python's SQLite ({sqlite3.sqlite_version}) was "
                    "built without the FTS5 extension, which full-text search needs"
                ) from exc
            raise ValueError(f"{self.owner} is not a usable {self._what} ({self.path} is not "
                             f"usable: {exc})") from exc
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise ValueError(f"{self.owner} is not a usable {self._what} ({self.path} is not "
                             f"usable: {exc})") from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _create(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in self._schema.split(";"):
                if statement.strip():
                    conn.execute(statement)
            if self._check is not None:
                self._check(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._ready = True

    @contextmanager
    def txn(self, immediate: bool = True) -> Iterator[sqlite3.Connection]:
        """A transaction (``BEGIN IMMEDIATE`` for writes, so writers queue, not fail)."""
        conn = self.conn()
        conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread of this file."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="rx-sqlite")
            pool = self._pool
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    def close(self) -> None:
        """Close every connection and stop the threads; a later call reopens them."""
        with self._lock:
            conns, self._conns = self._conns, []
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        for conn in conns:
            conn.close()
        self._local = threading.local()
