"""The run journal: each call's events, appended per session to the store's backend,
read from a point or followed live, by any process that shares the store.

A journal is a per-session log. Every entry has a ``seq``: 1, 2, 3, ... per session,
contiguous (an append takes the next numbers in one atomic step), so a reader that
finds the first entry after ``after`` numbered more than ``after + 1`` knows the
entries between were trimmed (:class:`JournalExpiredError`), never a silent gap.
Entries name their run and their place in it (``run_id``, ``index``): ``<run id>.<index>``
is the SSE id the server sends, and :meth:`RunJournal.locate` finds it again on any
worker.

Retention is bounded per session: the newest ``max_events`` entries (default 10,000)
no older than ``max_age`` seconds (default 24 h), enforced as entries are appended.

A backend implements four coroutines (``_append``, ``_read``, ``_locate``, and
optionally ``_read_wait`` when it can block on the server, as Redis's ``XREAD
BLOCK`` does); the rest (checks, gap detection, following, batching writers, the
Observable) is here. The built-in journals: ``_journal_memory``, ``_journal_sqlite``,
``_journal_redis``, ``_journal_postgres``; a store's ``journal()`` gives its own.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reactivex import Observable, abc

from .._rx import from_coroutine, running_loop, runtime_loop
from ._base import SessionError, SessionKey, _rebuild, check_key
from ._journal_writer import RUN_END, Item, JournalWriter

if TYPE_CHECKING:
    from ..event import AgentEvent

__all__ = [
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_EVENTS",
    "RUN_END",
    "JournalEntry",
    "JournalExpiredError",
    "JournalWriter",
    "RunJournal",
    "subscribe_durable_events",
]

DEFAULT_MAX_EVENTS = 10_000
"""Entries a journal keeps per session (the newest)."""
DEFAULT_MAX_AGE = 86_400.0
"""Seconds an entry is kept (24 h)."""


class JournalExpiredError(SessionError, LookupError):
    """A journal no longer holds the entries after the point a reader asked for (its
    retention trimmed them); nothing was read."""

    def __init__(self, session_id: str, after: int, oldest: int | None, *,
                 user_id: str | None = None) -> None:
        self.session_id = session_id
        self.after = after
        self.oldest = oldest
        self.user_id = user_id
        kept = (f"the oldest entry it keeps is #{oldest}" if oldest is not None
                else "it keeps none of them")
        super().__init__(
            f"the run journal of session {session_id!r} no longer holds the entries after "
            f"#{after}: {kept} (older ones were trimmed by its retention); read the "
            "session's state instead, or follow from 0 (the oldest kept)")

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), {"session_id": self.session_id, "after": self.after,
                                       "oldest": self.oldest, "user_id": self.user_id})


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One entry of a session's journal: an event of a run, or the end of a run."""

    seq: int
    """The entry's number in its session's journal (1, 2, 3, ...)."""
    run_id: str
    index: int
    """Its number in its run (the run's events are 0, 1, 2, ...; its end follows them)."""
    time: float
    """When it was streamed (Unix time)."""
    type: str
    """The event's ``type``, or :data:`RUN_END`."""
    data: str
    """The event's JSON (``event.model_dump_json()``), or the end's ``{"status", "error"}``."""

    @property
    def id(self) -> str:
        """``<run id>.<index>``: the SSE id the server sent for it."""
        return f"{self.run_id}.{self.index}"

    @property
    def is_end(self) -> bool:
        return self.type == RUN_END

    @property
    def event(self) -> AgentEvent:
        """The event, rebuilt from its JSON (``rx_agent.parse_event``)."""
        if self.type == RUN_END:
            raise ValueError(f"journal entry #{self.seq} is the end of run {self.run_id!r}, "
                             "not an event (check entry.is_end)")
        from ..event import parse_event

        return parse_event(self.data)

    @property
    def status(self) -> str | None:
        """A run end's status (``completed``, ``failed``, ``disconnected``); else ``None``."""
        if self.type != RUN_END:
            return None
        status = json.loads(self.data).get("status")
        return status if isinstance(status, str) else None


def encode_batch(items: list[Item]) -> str:
    """One append's entries as one text (the SQL and Redis journals store a batch as one
    row or stream entry: one write per batch, not per event): a line
    ``index\ttype\ttime\tdata`` per entry (event JSON has no raw newline), or, when some
    data has one, a JSON array."""
    text = "\n".join([f"{i}\t{t}\t{at!r}\t{d}" for i, t, d, at in items])
    if text.count("\n") == len(items) - 1:
        return text
    return json.dumps([(i, t, at, d) for i, t, d, at in items], ensure_ascii=False)


def decode_batch(last_seq: int, run_id: str, text: str | bytes) -> list[JournalEntry]:
    """The entries of a batch whose last entry is ``last_seq``."""
    if isinstance(text, bytes):
        text = text.decode()
    first = last_seq - text.count("\n") if text[:1] != "[" else None
    if first is not None:
        out = []
        for k, line in enumerate(text.split("\n")):
            index, type_, at, data = line.split("\t", 3)
            out.append(JournalEntry(first + k, run_id, int(index), float(at), type_, data))
        return out
    rows = json.loads(text)
    start = last_seq - len(rows) + 1
    return [JournalEntry(start + k, run_id, i, at, t, d) for k, (i, t, at, d) in enumerate(rows)]


def _check_retention(max_events: object, max_age: object) -> tuple[int, float]:
    if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
        raise ValueError(f"max_events must be a positive int, got {max_events!r}")
    if isinstance(max_age, bool) or not isinstance(max_age, (int, float)) or not (
            max_age > 0):
        raise ValueError(f"max_age must be a positive number of seconds (math.inf: no age "
                         f"limit), got {max_age!r}")
    return max_events, float(max_age)


def _check_point(after: object, name: str = "after") -> int:
    if isinstance(after, bool) or not isinstance(after, int):
        raise TypeError(f"{name} must be an int (a journal seq; 0: from the oldest kept), "
                        f"got {after!r}")
    if after < 0:
        raise ValueError(f"{name} must be >= 0, got {after}")
    return after


def _check_items(items: object) -> list[Item]:
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError("items must be a sequence of (index, type, data[, time]) tuples")
    now = time.time()
    out: list[Item] = []
    for item in items:
        if not isinstance(item, tuple) or len(item) not in (3, 4):
            raise TypeError(f"a journal item is (index, type, data[, time]), got {item!r}")
        index, type_, data = item[0], item[1], item[2]
        at = item[3] if len(item) == 4 else now
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"an item's index must be an int >= 0, got {index!r}")
        if not isinstance(type_, str) or not type_ or not isinstance(data, str):
            raise TypeError(f"an item's type and data must be strings, got {item!r}")
        if not type_.isprintable() or " " in type_:
            raise ValueError(f"an item's type must be a name without spaces or control "
                             f"characters, got {type_!r}")
        if isinstance(at, bool) or not isinstance(at, (int, float)):
            raise TypeError(f"an item's time must be a number, got {at!r}")
        out.append((index, type_, data, float(at)))
    return out


class _Bell:
    """Wakes the readers of a session waiting in this process when it appends (other
    processes' appends are found by the backend's polling or blocking read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[SessionKey, set[tuple[asyncio.AbstractEventLoop,
                                                  asyncio.Future[None]]]] = {}

    def listen(self, key: SessionKey) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._waiting.setdefault(key, set()).add((loop, future))
        return future

    def forget(self, key: SessionKey, future: asyncio.Future[None]) -> None:
        with self._lock:
            waiting = self._waiting.get(key)
            if waiting is not None:
                waiting.discard((future.get_loop(), future))
                if not waiting:
                    del self._waiting[key]

    def ring(self, key: SessionKey) -> None:
        if key not in self._waiting:  # nobody (a reader listens before it reads)
            return
        with self._lock:
            waiting = self._waiting.pop(key, None)
        for loop, future in waiting or ():
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, future)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class RunJournal:
    """A session-keyed journal of runs' events (see the module docstring).

    Every method is a coroutine (or an async iterator) that never blocks the event
    loop. ``max_events`` and ``max_age`` are the retention per session; change them
    with :meth:`retain`.
    """

    poll: float = 0.1
    """Seconds between two reads while following a session with nothing new, for
    backends that cannot be told about other processes' appends (``math.inf``: only
    this process appends)."""

    def __init__(self, *, max_events: int = DEFAULT_MAX_EVENTS,
                 max_age: float = DEFAULT_MAX_AGE) -> None:
        self.max_events, self.max_age = _check_retention(max_events, max_age)
        self._bell = _Bell()

    def retain(self, *, max_events: int | None = None, max_age: float | None = None) -> None:
        """Change the retention (applied from the next append on)."""
        self.max_events, self.max_age = _check_retention(
            self.max_events if max_events is None else max_events,
            self.max_age if max_age is None else max_age)

    # -- the primitives a backend implements ------------------------------------------

    async def _append(self, key: SessionKey, run_id: str, items: list[Item]) -> int:
        """Store ``items`` as the next entries of ``key``'s journal (consecutive seqs,
        atomically), apply the retention; the last seq."""
        raise NotImplementedError(f"{type(self).__name__} implements no _append")

    async def _read(self, key: SessionKey, after: int,
                    limit: int) -> tuple[list[JournalEntry], int]:
        """Up to ``limit`` entries with ``seq > after``, in order, and the last seq
        the journal gave out (0: none)."""
        raise NotImplementedError(f"{type(self).__name__} implements no _read")

    async def _locate(self, key: SessionKey, run_id: str, index: int) -> int | None:
        """The seq of entry ``index`` of run ``run_id``, or ``None`` if not kept."""
        raise NotImplementedError(f"{type(self).__name__} implements no _locate")

    async def _read_wait(self, key: SessionKey, after: int, limit: int,
                         timeout: float) -> list[JournalEntry]:
        """Entries after ``after``, waiting up to ``timeout`` seconds for one
        (``[]`` after that). Default: read, then sleep until this process appends or
        :attr:`poll` passes, and read again."""
        ring = self._bell.listen(key)
        try:
            entries, _ = await self._read(key, after, limit)
            if entries:
                return entries
            wait = min(timeout, self.poll)
            if math.isinf(wait):
                await ring
            else:
                await asyncio.wait({ring}, timeout=wait)
            entries, _ = await self._read(key, after, limit)
            return entries
        finally:
            self._bell.forget(key, ring)

    def close(self) -> None:
        """Release what the journal holds beyond its store's connections (nothing, by
        default); the store's ``close()`` calls it."""

    # -- the API ----------------------------------------------------------------------

    async def append(self, session: SessionKey, run_id: str,
                     items: Sequence[tuple[Any, ...]]) -> int:
        """Append ``items`` (``(index, type, data)`` or ``(index, type, data, time)``)
        as entries of run ``run_id``; the seq of the last one (the head before, for
        no items)."""
        key = check_key(session)
        if not isinstance(run_id, str) or not run_id:
            raise ValueError(f"run_id must be a non-empty str, got {run_id!r}")
        checked = _check_items(items)
        if not checked:
            return await self.head(key)
        return await self._put(key, run_id, checked)

    async def _put(self, key: SessionKey, run_id: str, items: list[Item]) -> int:
        """:meth:`append` of checked items (the writer's, which makes them itself)."""
        seq = await self._append(key, run_id, items)
        self._bell.ring(key)
        return seq

    async def read(self, session: SessionKey, after: int = 0,
                   limit: int = 1000) -> list[JournalEntry]:
        """Up to ``limit`` entries after seq ``after`` (``0``: from the oldest kept).

        Raises :class:`JournalExpiredError` when entries after ``after`` were trimmed,
        ``ValueError`` when ``after`` is past the last seq the journal gave out.
        """
        key = check_key(session)
        after = _check_point(after)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        entries, head = await self._read(key, after, limit)
        self._check_gap(key, after, entries, head)
        return entries

    async def head(self, session: SessionKey) -> int:
        """The last seq the session's journal gave out (``0``: none yet)."""
        return (await self._read(check_key(session), 0, 1))[1]

    async def locate(self, session: SessionKey, run_id: str, index: int) -> int | None:
        """The seq of entry ``index`` of run ``run_id`` (the SSE id
        ``<run_id>.<index>``), or ``None`` when the journal does not hold it."""
        key = check_key(session)
        _check_point(index, "index")
        return await self._locate(key, run_id, index)

    def _check_gap(self, key: SessionKey, after: int, entries: list[JournalEntry],
                   head: int) -> None:
        if after > head:
            raise ValueError(f"seq {after} is past the end of session {key.session_id!r}'s "
                             f"run journal (its last entry is #{head})")
        if after == 0:
            return  # from the oldest kept, whatever it is
        if entries and entries[0].seq != after + 1:
            raise JournalExpiredError(key.session_id, after, entries[0].seq,
                                      user_id=key.user_id)
        if not entries and after < head:
            raise JournalExpiredError(key.session_id, after, None, user_id=key.user_id)

    async def follow(self, session: SessionKey, after: int = 0, *, run_id: str | None = None,
                     live: bool = True) -> AsyncGenerator[JournalEntry, None]:
        """The entries after seq ``after``, then (``live``) each new one as it is
        appended, until the caller stops. With ``run_id``: only that run's entries,
        ending after its :data:`RUN_END` entry."""
        async for entry in self.follow_idle(session, after, run_id=run_id, live=live):
            if entry is not None:
                yield entry

    async def follow_idle(self, session: SessionKey, after: int = 0, *,
                          run_id: str | None = None, live: bool = True,
                          idle: float = math.inf) -> AsyncGenerator[JournalEntry | None, None]:
        """:meth:`follow`, yielding ``None`` after each ``idle`` seconds without an
        entry (the server's keepalives)."""
        key = check_key(session)
        last = _check_point(after)
        entries = await self.read(key, last)
        while True:
            for entry in entries:
                last = entry.seq
                if run_id is not None and entry.run_id != run_id:
                    continue
                yield entry
                if run_id is not None and entry.is_end:
                    return
            if entries:  # there may be more already: read on without waiting
                entries = await self.read(key, last)
                continue
            if not live:
                return
            entries = await self._next(key, last, idle)
            if not entries:
                yield None

    async def _next(self, key: SessionKey, last: int, idle: float) -> list[JournalEntry]:
        entries = await self._read_wait(key, last, 1000, idle)
        if entries and entries[0].seq != last + 1:  # trimmed while the reader lagged
            raise JournalExpiredError(key.session_id, last, entries[0].seq,
                                      user_id=key.user_id)
        return entries

    def writer(self, session: SessionKey, run_id: str, *, window: float = 0.02,
               batch: int = 256) -> JournalWriter:
        """A :class:`JournalWriter` for one run's events."""
        return JournalWriter(self, check_key(session), run_id, window=window, batch=batch)

    def subscribe(self, session: SessionKey, after: int = 0, *, run_id: str | None = None,
                  live: bool = True) -> Observable[JournalEntry]:
        """:meth:`follow` as a cold Observable (see :func:`subscribe_durable_events`)."""
        key = check_key(session)
        _check_point(after)
        loop = running_loop() or runtime_loop()

        async def body(observer: abc.ObserverBase[JournalEntry]) -> None:
            async for entry in self.follow(key, after, run_id=run_id, live=live):
                observer.on_next(entry)
            observer.on_completed()

        return from_coroutine(body, loop)


def subscribe_durable_events(
    store: Any, session: SessionKey | str, *, after: int = 0, run_id: str | None = None,
    live: bool = True, user_id: str | None = None,
) -> Observable[JournalEntry]:
    """A session's run journal as a cold Observable of :class:`JournalEntry`: the
    entries after seq ``after`` (``0``: the oldest kept), then (``live``) each one
    appended later, by any process sharing the store, until disposed; without
    ``live`` it completes at the current end. ``run_id``: only that run, completing
    after its end. (The Blade SDK's ``subscribeDurableEvents``.)

    ``store`` is a session store with a journal (``store.journal()``: every built-in
    one) or a :class:`RunJournal`; ``session`` a :class:`SessionKey`, or a session id
    of ``user_id`` (default: the anonymous user). ``entry.event`` is the event rebuilt
    from its JSON. The Observable runs on the subscriber's event loop (the runtime's
    loop for a subscriber without one) and errors with :class:`JournalExpiredError`
    when the entries after ``after`` were trimmed.
    """
    journal = journal_of(store)
    if journal is None:
        raise TypeError(f"{type(store).__name__} has no run journal: pass a built-in session "
                        "store (memory, SQLite, Redis, PostgreSQL) or a RunJournal")
    if isinstance(session, str):
        from ._base import ANONYMOUS_USER

        session = SessionKey(user_id or ANONYMOUS_USER, session)
    return journal.subscribe(session, after, run_id=run_id, live=live)


def journal_of(store: Any) -> RunJournal | None:
    """``store`` if it is a journal, else its ``journal()``, else ``None``."""
    if isinstance(store, RunJournal):
        return store
    make: Callable[[], Any] | None = getattr(store, "journal", None)
    if make is None or not callable(make):
        return None
    try:
        journal = make()
    except NotImplementedError:  # a backend of the kit without a journal
        return None
    return journal if isinstance(journal, RunJournal) else None
