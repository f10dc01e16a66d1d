"""Session slots: one call at a time per session, FIFO; sessions run concurrently.

Works across event loops and threads (a waiter is woken on its own loop), so calls
from a caller's loop and from the runtime's loop queue on the same slot.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any

from ..session import SessionKey

__all__ = ["SessionSlots"]


class _Slot:
    """A contended session: the holder and its queue. An uncontended session's entry
    is the holder itself (no slot object, no queue per call)."""

    __slots__ = ("active", "waiters")

    def __init__(self, active: Any) -> None:
        self.active: Any = active
        self.waiters: deque[tuple[Any, asyncio.Future[None]]] = deque()


class SessionSlots:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # key -> the run holding it, or a _Slot once somebody waits for it.
        self._slots: dict[SessionKey, Any] = {}

    def active(self, key: SessionKey) -> Any:
        """The run holding ``key``'s slot, or ``None``."""
        with self._lock:
            held = self._slots.get(key)
            return held.active if type(held) is _Slot else held

    def try_acquire(self, key: SessionKey, run: Any) -> bool:
        """Take ``key``'s slot for ``run`` if it is free, without waiting."""
        with self._lock:
            if key in self._slots:
                return False
            self._slots[key] = run
            return True

    async def acquire(self, key: SessionKey, run: Any) -> None:
        """Wait for ``key``'s slot and take it for ``run``. Cancellation leaves the queue."""
        loop = asyncio.get_running_loop()
        with self._lock:
            held = self._slots.get(key)
            if held is None:
                self._slots[key] = run
                return
            if type(held) is _Slot:
                slot = held
            else:
                slot = self._slots[key] = _Slot(held)
            future: asyncio.Future[None] = loop.create_future()
            entry = (run, future)
            slot.waiters.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                if entry in slot.waiters:
                    slot.waiters.remove(entry)
                    raise
            # The slot was handed to us while we were being cancelled: pass it on.
            self.release(key, run)
            raise

    def release(self, key: SessionKey, run: Any) -> None:
        """Give ``key``'s slot to the next waiter (if ``run`` holds it)."""
        with self._lock:
            held = self._slots.get(key)
            if held is run:  # uncontended
                del self._slots[key]
                return
            if type(held) is not _Slot or held.active is not run:
                return
            slot = held
            while slot.waiters:
                nxt, future = slot.waiters.popleft()
                if future.cancelled():
                    continue
                slot.active = nxt
                break
            else:
                del self._slots[key]
                return
        floop = future.get_loop()

        def wake() -> None:
            if not future.done():
                future.set_result(None)
            elif future.cancelled():  # cancelled after we picked it: pass the slot on
                self.release(key, nxt)

        floop.call_soon_threadsafe(wake)
