"""The threads that run synchronous tools when the toolkit names no executor.

A tool call hands one job to a warm worker through a queue and gets an asyncio
future of the calling loop back; the worker settles it with one
``call_soon_threadsafe``. Compared with ``loop.run_in_executor`` on the default
pool this skips the ``concurrent.futures.Future`` (its condition variable and
callbacks), the future-to-future chaining and the work-item wrapper: the hop is
about half as expensive. Workers are started on demand (at most ``max_workers``,
like the default pool) and then stay.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["ToolThreads", "tool_threads"]


class ToolThreads:
    """A pool of daemon threads for synchronous tools (see the module docstring)."""

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers or min(32, (os.cpu_count() or 1) + 4)
        self._jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        # One entry per worker waiting for a job: list append and pop are atomic, and
        # a worker's append costs no lock or condition (a Semaphore's does).
        self._idle: list[None] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    @property
    def workers(self) -> int:
        return len(self._threads)

    def run(
        self,
        loop: asyncio.AbstractEventLoop,
        context: contextvars.Context,
        fn: Callable[..., Any],
        *args: Any,
    ) -> asyncio.Future[Any]:
        """``context.run(fn, *args)`` on a worker; a future of ``loop`` with its
        result. Must be called on ``loop``'s thread. Cancelling the future before
        the job started skips it; a result arriving after cancellation is dropped."""
        future = loop.create_future()
        self._jobs.put((loop, future, context, fn, args))
        try:
            self._idle.pop()  # an idle worker will take it
        except IndexError:
            self._grow()
        return future

    def _grow(self) -> None:
        with self._lock:
            if len(self._threads) >= self.max_workers:
                return  # the job waits for the next free worker
            thread = threading.Thread(target=self._work, name=f"rx-agent-tool-{len(self._threads)}",
                                      daemon=True)
            self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        get = self._jobs.get
        while True:
            job = get()
            if job is None:  # pragma: no cover - never sent; kept for a clean stop
                return
            loop, future, context, fn, args = job
            del job
            failed, value = False, None
            if not future.cancelled():  # a read across threads: a skip is only a saving
                try:
                    value = context.run(fn, *args)
                except BaseException as exc:  # the tool's failure, SystemExit included
                    failed, value = True, exc
            del context, fn, args
            # Idle before the result is out: the next job the loop sends on seeing it
            # finds this worker rather than starting another. The result goes out last:
            # the loop wakes while this thread is about to wait, not holding the GIL
            # for long.
            self._idle.append(None)
            if not future.cancelled():
                try:  # noqa: SIM105 - suppress() costs a context manager per call
                    loop.call_soon_threadsafe(_settle, future, value, failed)
                except RuntimeError:  # the loop closed: nobody waits any more
                    pass
            del loop, future, value


def _settle(future: asyncio.Future[Any], value: Any, failed: bool) -> None:
    if future.done():  # cancelled (a timeout, a dispose) while the tool ran
        return
    if failed:
        future.set_exception(value)
    else:
        future.set_result(value)


_shared: ToolThreads | None = None
_shared_lock = threading.Lock()


def tool_threads() -> ToolThreads:
    """The process's pool for synchronous tools (created on first use)."""
    global _shared
    if _shared is None:
        with _shared_lock:
            if _shared is None:
                _shared = ToolThreads()
    return _shared
