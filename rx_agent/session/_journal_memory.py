"""The in-memory run journal: the :class:`InMemorySessionStore`'s, one process."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from ._base import SessionKey
from ._journal import DEFAULT_MAX_AGE, DEFAULT_MAX_EVENTS, JournalEntry, RunJournal
from ._journal_writer import Item

__all__ = ["MemoryRunJournal"]

SWEEP = 1000
"""Appends between two sweeps for sessions whose newest entry is past ``max_age``."""


_Row = tuple[int, str, int, float, str, str]
"""A :class:`JournalEntry`'s fields: made into one only when read (appends are many)."""


class _Log:
    __slots__ = ("entries", "head", "runs")

    def __init__(self) -> None:
        self.entries: deque[_Row] = deque()
        self.head = 0
        self.runs: dict[str, int] = {}
        """run id -> the seq of its first entry (a hint for locate)."""


class MemoryRunJournal(RunJournal):
    """Entries in a dict of deques; readers wait for this process's appends only."""

    poll = math.inf

    def __init__(self, *, max_events: int = DEFAULT_MAX_EVENTS,
                 max_age: float = DEFAULT_MAX_AGE) -> None:
        super().__init__(max_events=max_events, max_age=max_age)
        self._lock = threading.Lock()
        # Least recently appended to first: the sweep looks at the front only.
        self._logs: OrderedDict[SessionKey, _Log] = OrderedDict()
        self._appends = 0

    async def _append(self, key: SessionKey, run_id: str, items: list[Item]) -> int:
        return self._append_now(key, run_id, items)

    def _put_now(self, key: SessionKey, run_id: str, items: list[Item]) -> int:
        """``_put`` without a coroutine: appending here costs less than a batch's
        task and timer (the writer appends each event at once, see ``immediate``)."""
        seq = self._append_now(key, run_id, items)
        self._bell.ring(key)
        return seq

    def immediate(self) -> Callable[[SessionKey, str, list[Item]], int] | None:
        """:meth:`_put_now`, unless a subclass changed how entries are appended."""
        kind = type(self)
        if kind._append is MemoryRunJournal._append and kind._put is RunJournal._put:
            return self._put_now
        return None

    def _append_now(self, key: SessionKey, run_id: str, items: list[Item]) -> int:
        with self._lock:
            logs = self._logs
            log = logs.get(key)
            if log is None:
                log = logs[key] = _Log()
            else:
                logs.move_to_end(key)
            head = log.head
            if run_id not in log.runs:
                log.runs[run_id] = head + 1
            entries = log.entries
            if len(items) == 1:  # the writer's, one event at a time
                index, type_, data, at = items[0]
                entries.append((head + 1, run_id, index, at, type_, data))
            else:
                entries.extend([(head + k + 1, run_id, index, at, type_, data)
                                for k, (index, type_, data, at) in enumerate(items)])
            log.head = head + len(items)
            cutoff = time.time() - self.max_age
            while entries and (len(entries) > self.max_events or entries[0][3] < cutoff):
                entries.popleft()
            if len(log.runs) > self.max_events:  # runs whose entries are all gone
                oldest = entries[0][0] if entries else log.head + 1
                log.runs = {r: s for r, s in log.runs.items() if s >= oldest}
            self._appends += 1
            if self._appends % SWEEP == 0:  # sessions nobody appends to any more
                while logs:  # (not all of them: that took O(sessions) per sweep)
                    stale = next(iter(logs.values()))
                    if stale.entries and stale.entries[-1][3] >= cutoff:
                        break
                    logs.popitem(last=False)
            return log.head

    async def _read(self, key: SessionKey, after: int,
                    limit: int) -> tuple[list[JournalEntry], int]:
        with self._lock:
            log = self._logs.get(key)
            if log is None:
                return [], 0
            entries = log.entries
            if not entries:
                return [], log.head
            start = max(0, after + 1 - entries[0][0])
            return [JournalEntry(*entries[i])
                    for i in range(start, min(len(entries), start + limit))], log.head

    async def _locate(self, key: SessionKey, run_id: str, index: int) -> int | None:
        with self._lock:
            log = self._logs.get(key)
            if log is None or not log.entries:
                return None
            entries = log.entries
            first = log.runs.get(run_id)
            if first is None:
                return None
            oldest = entries[0][0]
            guess = first + index - oldest  # where it is when the run was not interleaved
            if 0 <= guess < len(entries):
                seq, run, at_index = entries[guess][:3]
                if run == run_id and at_index == index:
                    return seq
            for seq, run, at_index, *_ in list(entries)[max(0, first - oldest):]:
                if run == run_id and at_index == index:
                    return seq
            return None
