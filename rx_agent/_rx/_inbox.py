"""The one bridge from an Observable to a consumer that pulls: :class:`Inbox`.

``astream()`` (``aiter_observable``), the server's event pump, the CLI's pump and
``call_sync`` all subscribe a stream, keep what it sends in a buffer (Rx has no
backpressure) and wake whoever waits for the next signal: a task of the loop the
inbox belongs to, or, for a plain thread (``blocking=True``), a thread that blocks.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
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
_RESOLUTION = time.get_clock_info("monotonic").resolution


class Inbox(Generic[T]):
    """A subscription of ``source`` whose signals wait in a buffer for one consumer.

    Items are kept in :attr:`items` in order; the terminal signal is kept apart and
    stays (every read after the items sees it again). Signals may come from any
    thread. Without ``blocking`` the inbox belongs to the running loop (or ``loop``):
    a signal from another thread hops onto it, and :meth:`next` / :meth:`wait` wake
    the waiting task with a future. With ``blocking`` the consumer is a thread
    without a loop: signals cross through a ``queue.SimpleQueue`` and reach
    :attr:`items` (and the terminal signal) in :meth:`wait_blocking`, which blocks
    until one comes; read the inbox after it.

    The inbox is the subscription's observer itself: one call per signal, no
    closure and no tuple per item.
    """

    __slots__ = ("deadline", "ended", "error", "inbound", "items", "subscription", "timer",
                 "waiter", "where")

    def __init__(self, source: Observable[T], *, blocking: bool = False,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.items: deque[T] = deque()
        self.ended = False
        self.error: Exception | None = None
        self.waiter: asyncio.Future[None] | None = None
        # A timed wait's end, and the one timer that watches it (see wait()).
        self.deadline: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        # Blocking: the producer's signals cross to the consumer's thread through a
        # SimpleQueue (C: a put and a timed get cost far less than a threading.Event's
        # Python-level condition); the consumer moves them into ``items``.
        self.inbound: queue.SimpleQueue[Any] | None = queue.SimpleQueue() if blocking else None
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
            self.inbound.put(item)  # type: ignore[union-attr]  # blocking: it has one
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
        if where is None:
            self.inbound.put(_Failed(error))  # type: ignore[union-attr]
        elif _thread_id() != where.thread:
            where.hop(self.on_error, error)
        elif not self.ended:
            self.error = error
            self._end()

    def on_completed(self) -> None:
        where = self.where
        if where is None:
            self.inbound.put(_COMPLETED)  # type: ignore[union-attr]
        elif _thread_id() != where.thread:
            where.hop(self.on_completed)
        elif not self.ended:
            self._end()

    def _end(self) -> None:
        self.ended = True
        self._stop_timer()
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
        if timeout is None:
            self.deadline = None
        else:
            # One timer per inbox, not one per wait (a stream with a keepalive waits
            # once per event): an armed timer due no later than this deadline stays,
            # and when it fires for an older one it moves itself on to this one.
            deadline = self.deadline = loop.time() + timeout
            timer = self.timer
            if timer is None or timer.when() > deadline:
                if timer is not None:
                    timer.cancel()
                self.timer = loop.call_at(deadline, self._expire)
        try:
            await waiter
        finally:
            if self.waiter is waiter:
                self.waiter = None
        return bool(self.items) or self.ended

    def _expire(self) -> None:
        self.timer = None
        waiter, deadline = self.waiter, self.deadline
        if waiter is None or deadline is None or self.where is None:
            return  # nobody waits with a timeout now: the next timed wait arms anew
        loop = self.where.loop
        if loop.time() + _RESOLUTION < deadline:
            self.timer = loop.call_at(deadline, self._expire)
            return
        self.waiter = None
        if not waiter.done():
            waiter.set_result(None)

    def _stop_timer(self) -> None:
        timer = self.timer
        if timer is not None:
            self.timer = None
            timer.cancel()

    async def next(self, timeout: float | None = None) -> Signal | None:
        """The next signal, or ``None`` after ``timeout`` seconds without one."""
        if self.items or self.ended or await self.wait(timeout):
            return self.ready()
        return None

    def wait_blocking(self, timeout: float | None = None) -> bool:
        """Block this thread until a signal is there (a ``blocking`` inbox);
        ``False`` after ``timeout`` seconds without one."""
        inbound = self.inbound
        if inbound is None:
            raise RuntimeError("only a blocking Inbox is read with wait_blocking()")
        if self.ended:
            return True
        try:
            # Items waiting are no reason to stop draining: a consumer that leaves them
            # there (call_sync keeps the last) must still see what came after them.
            signal = inbound.get_nowait() if self.items else inbound.get(timeout=timeout)
        except queue.Empty:
            return bool(self.items)
        while True:
            if type(signal) is _Failed:
                if not self.ended:
                    self.error = signal.error
                    self.ended = True
            elif signal is _COMPLETED:
                self.ended = True
            elif not self.ended:
                self.items.append(signal)
            try:  # whatever else came meanwhile, without blocking again
                signal = inbound.get_nowait()
            except queue.Empty:
                return True

    def unread(self, signals: Iterable[Signal]) -> None:
        """Put the items of ``signals`` back in front, in order (a terminal signal
        read among them is still there)."""
        self.items.extendleft(reversed([value for kind, value in signals if kind == NEXT]))

    def dispose(self) -> None:
        """Dispose the subscription (idempotent; a no-op once the stream ended)."""
        if self.timer is not None and self.where is not None:
            self.where.run(self._stop_timer)  # a timer's handle is the loop's
        subscription, self.subscription = self.subscription, _DISPOSED
        if subscription is not None and subscription is not _DISPOSED:
            subscription.dispose()


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


_COMPLETED: Any = object()  # a blocking inbox's completion, in its queue


class _Disposed(abc.DisposableBase):
    def dispose(self) -> None:
        pass


_DISPOSED = _Disposed()
