"""The one bridge from an Observable to a consumer that pulls: :class:`Inbox`.

``astream()`` (``aiter_observable``), the server's event pump, the CLI's pump and
``call_sync`` all subscribe a stream, keep what it sends in a buffer (Rx has no
backpressure) and wake whoever waits for the next signal: a task of the loop the
inbox belongs to, or, for a plain thread (``blocking=True``), a thread that blocks.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from reactivex import Observable, abc

from ._direct import subscribe_observer
from ._loops import affinity

__all__ = ["DONE", "ERROR", "NEXT", "Inbox", "Signal"]

T = TypeVar("T")

NEXT, ERROR, DONE = 0, 1, 2
"""The kinds of a :data:`Signal`: an item, the stream's error, its completion."""

Signal = tuple[int, Any]
"""``(NEXT, item)``, ``(ERROR, exception)`` or ``(DONE, None)``."""

_thread_id = threading.get_ident
_DONE_SIGNAL: Signal = (DONE, None)


class Inbox(Generic[T]):
    """A subscription of ``source`` whose signals wait in a buffer for one consumer.

    Items are kept in :attr:`items` in order; the terminal signal is kept apart and
    stays (every read after the items sees it again). Signals may come from any
    thread. Without ``blocking`` the inbox belongs to the running loop (or ``loop``):
    a signal from another thread hops onto it, and :meth:`next` / :meth:`wait` wake
    one waiting task with a future. With ``blocking`` the consumer is a thread
    without a loop: signals are buffered where they arrive (``deque`` appends are
    atomic) and :meth:`wait_blocking` wakes it with a ``threading.Event``.

    The inbox is the subscription's observer itself: one call per signal, no
    closure and no tuple per item.
    """

    __slots__ = ("ended", "error", "event", "items", "subscription", "waiter", "where")

    def __init__(self, source: Observable[T], *, blocking: bool = False,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.items: deque[T] = deque()
        self.ended = False
        self.error: Exception | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.event = threading.Event() if blocking else None
        self.where = None if blocking else affinity(loop)
        self.subscription: abc.DisposableBase | None = None
        subscription = subscribe_observer(source, self)
        if self.subscription is _DISPOSED:  # disposed while it subscribed
            subscription.dispose()
        else:
            self.subscription = subscription

    # -- the observer (the producer's side) -----------------------------------------

    def on_next(self, item: T) -> None:
        where = self.where
        if where is None:
            if not self.ended:
                self.items.append(item)
                self.event.set()  # type: ignore[union-attr]  # blocking: it has one
        elif _thread_id() != where.thread:  # a stream that moved threads
            where.hop(self.on_next, item)
        elif not self.ended:
            self.items.append(item)
            waiter = self.waiter
            if waiter is not None:
                self.waiter = None
                if not waiter.done():
                    waiter.set_result(None)

    def on_error(self, error: Exception) -> None:
        where = self.where
        if where is not None and _thread_id() != where.thread:
            where.hop(self.on_error, error)
        elif not self.ended:
            self.error = error
            self._end()

    def on_completed(self) -> None:
        where = self.where
        if where is not None and _thread_id() != where.thread:
            where.hop(self.on_completed)
        elif not self.ended:
            self._end()

    def _end(self) -> None:
        self.ended = True
        event = self.event
        if event is not None:
            event.set()
            return
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    # -- the consumer's side ----------------------------------------------------------

    def ready(self) -> Signal | None:
        """The next signal if one is there, without waiting; the terminal one stays."""
        items = self.items
        if items:
            return NEXT, items.popleft()
        if self.ended:
            error = self.error
            return _DONE_SIGNAL if error is None else (ERROR, error)
        return None

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait on the inbox's loop until a signal is there; ``False`` after
        ``timeout`` seconds without one."""
        where = self.where
        if where is None:
            raise RuntimeError("a blocking Inbox is read with wait_blocking()")
        if self.items or self.ended:
            return True
        loop = where.loop
        waiter = self.waiter = loop.create_future()
        timer = loop.call_later(timeout, _wake, waiter) if timeout is not None else None
        try:
            await waiter
        finally:
            if self.waiter is waiter:
                self.waiter = None
            if timer is not None:
                timer.cancel()
        return bool(self.items) or self.ended

    async def next(self, timeout: float | None = None) -> Signal | None:
        """The next signal, or ``None`` after ``timeout`` seconds without one."""
        if self.items or self.ended or await self.wait(timeout):
            return self.ready()
        return None

    def wait_blocking(self, timeout: float | None = None) -> bool:
        """Block this thread until a signal is there (a ``blocking`` inbox);
        ``False`` after ``timeout`` seconds without one."""
        event = self.event
        if event is None:
            raise RuntimeError("only a blocking Inbox is read with wait_blocking()")
        if self.items or self.ended:
            return True
        event.clear()
        # Read again after clearing: a signal between the first read and the clear
        # set the event before it was cleared.
        if self.items or self.ended:
            return True
        return event.wait(timeout) or bool(self.items) or self.ended

    def unread(self, signals: Iterable[Signal]) -> None:
        """Put the items of ``signals`` back in front, in order (a terminal signal
        read among them is still there)."""
        self.items.extendleft(reversed([value for kind, value in signals if kind == NEXT]))

    def dispose(self) -> None:
        """Dispose the subscription (idempotent; a no-op once the stream ended)."""
        subscription, self.subscription = self.subscription, _DISPOSED
        if subscription is not None and subscription is not _DISPOSED:
            subscription.dispose()


class _Disposed(abc.DisposableBase):
    def dispose(self) -> None:
        pass


_DISPOSED = _Disposed()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
