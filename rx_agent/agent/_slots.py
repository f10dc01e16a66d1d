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
    __slots__ = ("active", "waiters")

    def __init__(self) -> None:
        self.active: Any = None
        self.waiters: deque[tuple[Any, asyncio.Future[None]]] = deque()


class SessionSlots:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[SessionKey, _Slot] = {}

    def active(self, key: SessionKey) -> Any:
        """The run holding ``key``'s slot, or ``None``."""
        with self._lock:
            slot = self._slots.get(key)
            return slot.active if slot else None

    def try_acquire(self, key: SessionKey, run: Any) -> bool:
        """Take ``key``'s slot for ``run`` if it is free, without waiting."""
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot()
            if slot.active is None:
                slot.active = run
                return True
            return False

    async def acquire(self, key: SessionKey, run: Any) -> None:
        """Wait for ``key``'s slot and take it for ``run``. Cancellation leaves the queue."""
        loop = asyncio.get_running_loop()
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot()
            if slot.active is None:
                slot.active = run
                return
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
            slot = self._slots.get(key)
            if slot is None or slot.active is not run:
                return
            while slot.waiters:
                nxt, future = slot.waiters.popleft()
                if future.cancelled():
                    continue
                slot.active = nxt
                break
            else:
                slot.active = None
                del self._slots[key]
                return
        floop = future.get_loop()

        def wake() -> None:
            if not future.done():
                future.set_result(None)
            elif future.cancelled():  # cancelled after we picked it: pass the slot on
                self.release(key, nxt)

        floop.call_soon_threadsafe(wake)
