"""A run's events on their way to a journal: buffered, appended in batches, in order."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Protocol

from ._base import SessionKey

__all__ = ["RUN_END", "Item", "JournalWriter", "end_item"]

log = logging.getLogger("rx_agent.session")

RUN_END = "run_end"
"""The ``type`` of the entry that closes a run; its data is ``{"status", "error"}``."""

Item = tuple[int, str, str, float]
"""``(index in the run, type, JSON data, time)``: what an append writes per entry."""


class _Appends(Protocol):
    async def _put(self, key: SessionKey, run_id: str, items: list[Item]) -> int: ...


def end_item(index: int, status: str, error: str | None = None, *, kind: str | None = None,
             at: float | None = None) -> Item:
    """The entry that closes a run whose events were ``0 .. index - 1`` (``kind``: the
    failure's type when ``error`` does not name it alone; ``at``: the time, else now)."""
    end: dict[str, str | None] = {"status": status, "error": error}
    if kind is not None:
        end["kind"] = kind
    return (index, RUN_END, json.dumps(end), time.time() if at is None else at)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class JournalWriter:
    """One run's events on their way to the journal, off the stream's path.

    :meth:`add` only buffers (a list append); a task appends the buffer: the first
    entries at once (so a reconnecting client finds the run), then at most one
    append per ``window`` seconds, sooner when ``batch`` entries wait. Appends run
    one at a time, in order. :meth:`close` appends what is left and the run's end.
    A failed append is retried with the next batch; after three failures in a row
    the run's remaining entries are dropped with an error in the log (the stream
    itself never fails for its journal).

    A journal in this process's memory (one whose ``immediate()`` gives a plain
    function) is appended to in :meth:`add` itself: there an append costs less than
    the task, future and timer of a batch (one per event when events come further
    apart than ``window``).
    """

    def __init__(self, journal: _Appends, key: SessionKey, run_id: str, *, window: float,
                 batch: int) -> None:
        self.journal = journal
        self.key = key
        self.run_id = run_id
        self.window = window
        self.batch = batch
        self.count = 0
        """Events added (the next event's index)."""
        self._items: list[Item] = []
        self._task: asyncio.Task[None] | None = None
        self._hurry: asyncio.Future[None] | None = None
        self._closing = False
        self._failures = 0
        self.broken = False
        """Three appends failed in a row: nothing more is written."""
        immediate = getattr(journal, "immediate", None)
        self._now: Callable[[SessionKey, str, list[Item]], int] | None = (
            immediate() if immediate is not None else None)

    def add(self, index: int, type_: str, data: str) -> None:
        """Buffer event ``index`` of the run (its type and JSON)."""
        if self.broken:
            return
        self.count = index + 1
        item = (index, type_, data, time.time())
        if self._now is not None and self._task is None:  # no batch on its way
            self._append_now(item)
            return
        self._items.append(item)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain())
        elif len(self._items) >= self.batch:
            self._wake()

    def _wake(self) -> None:
        hurry = self._hurry
        if hurry is not None and not hurry.done():
            hurry.set_result(None)

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._items and not self.broken:
                items, self._items = self._items, []
                sent = await self._send(items)
                if sent and (self._closing or len(self._items) >= self.batch):
                    continue
                # Let the next batch gather (or a failed backend recover).
                hurry = self._hurry = loop.create_future()
                timer = loop.call_later(self.window if sent else 0.1, _wake, hurry)
                try:
                    await hurry
                finally:
                    timer.cancel()
                    self._hurry = None
        finally:
            self._task = None

    def _append_now(self, item: Item) -> None:
        """Append ``item`` at once, after what a failed append left waiting."""
        now = self._now
        assert now is not None
        items, self._items = self._items, []
        items.append(item)
        try:
            now(self.key, self.run_id, items)
        except Exception as exc:
            self._failed(exc, items)  # kept for the next add (or close's flush)
        else:
            self._failures = 0

    async def _send(self, items: list[Item]) -> bool:
        try:
            await self.journal._put(self.key, self.run_id, items)
        except asyncio.CancelledError:
            self._items[:0] = items
            raise
        except Exception as exc:
            return self._failed(exc, items)
        self._failures = 0
        return True

    def _failed(self, exc: Exception, items: list[Item]) -> bool:
        """Count a failed append of ``items``; ``False`` (they wait for the next try)."""
        self._failures += 1
        if self._failures >= 3:
            self.broken = True
            self._items.clear()
            log.error("the run journal failed three times in a row for run %s of session "
                      "%r; its remaining events are not journaled", self.run_id,
                      self.key.session_id, exc_info=exc,
                      extra={"session_id": self.key.session_id, "run_id": self.run_id})
            return False
        log.warning("a run journal append failed (run %s, session %r): %r; retrying",
                    self.run_id, self.key.session_id, exc,
                    extra={"session_id": self.key.session_id, "run_id": self.run_id})
        self._items[:0] = items  # in front, to keep the order
        return False

    async def flush(self) -> None:
        """Wait until everything added so far is appended (or given up on)."""
        closing, self._closing = self._closing, True  # no pause between batches
        try:
            while not self.broken and (self._task is not None or self._items):
                if self._task is None:
                    self._task = asyncio.get_running_loop().create_task(self._drain())
                self._wake()
                await asyncio.shield(self._task)
        finally:
            self._closing = closing

    async def close(self, status: str, error: str | None = None) -> None:
        """Append what is buffered and the run's end (:data:`RUN_END`)."""
        if self.broken:
            return
        self._closing = True
        end = end_item(self.count, status, error)
        if self._now is not None and self._task is None:
            self._append_now(end)
        else:
            self._items.append(end)
        await self.flush()


