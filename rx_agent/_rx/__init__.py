"""Bridges between RxPY observables and asyncio, used throughout the runtime.

RxPY has no async-iterator bridge and its asyncio schedulers are either loop-bound
or block on dispose (docs/internals.md, "RxPY facts the runtime relies on"), so the
runtime carries its own small set.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

from reactivex import Observable, abc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from ._direct import (
    DIRECT_TYPES,
    DirectObservable,
    LeanObservable,
    LeanSink,
    Subscribe,
    lean_subscribe,
    refuse_blocking_run,
    running_loop,
    subscribe_direct,
    subscribe_observer,
    subscribe_top,
    trampoline_idle,
)

__all__ = [
    "DIRECT_TYPES",
    "DirectObservable",
    "LeanObservable",
    "LeanSink",
    "LoopAffinity",
    "affinity",
    "aiter_observable",
    "await_observable",
    "cancelling",
    "from_coroutine",
    "lean_subscribe",
    "on_loop",
    "on_some_loop",
    "refuse_blocking_run",
    "running_loop",
    "runtime_loop",
    "subscribe_direct",
    "subscribe_observer",
    "subscribe_top",
    "trampoline_idle",
]

T = TypeVar("T")

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread_id = threading.get_ident


class LoopAffinity:
    """An event loop and the thread that runs it.

    The one place that decides whether a callback may run now (this is the loop's
    thread) or must hop onto the loop (``call_soon_threadsafe``); see
    docs/internals.md, "Threading". Hot paths compare ``threading.get_ident()`` with
    :attr:`thread` inline and call :meth:`hop` only when they are elsewhere.
    """

    __slots__ = ("loop", "thread")

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: int) -> None:
        self.loop = loop
        self.thread = thread  # -1: not known yet (every call hops)

    def here(self) -> bool:
        """Whether this is the loop's thread."""
        return _thread_id() == self.thread

    def run(self, fn: Callable[..., Any], *args: Any) -> None:
        """``fn(*args)`` now on the loop's thread, else as soon as the loop can."""
        if _thread_id() == self.thread:
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def hop(self, fn: Callable[..., Any], *args: Any) -> None:
        """``fn(*args)`` on the loop, later, whatever thread this is."""
        if _thread_id() == self.thread:  # a workflow engine's loop has no threadsafe form
            self.loop.call_soon(fn, *args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)


# The thread of each loop seen running (a loop never moves to another thread while
# it runs; a closed loop's entry goes with the loop).
_affinities: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopAffinity] = (
    weakref.WeakKeyDictionary()
)


def affinity(loop: asyncio.AbstractEventLoop | None = None) -> LoopAffinity:
    """The :class:`LoopAffinity` of ``loop`` (default: the loop running in this thread).

    A loop first seen from another thread gets its thread once it is seen running."""
    if loop is None:
        loop = asyncio.get_running_loop()
    found = _affinities.get(loop)
    if found is not None and found.thread != -1:
        return found
    here = running_loop() is loop
    if found is None:
        found = _affinities[loop] = LoopAffinity(loop, _thread_id() if here else -1)
    elif here:
        found.thread = _thread_id()
    return found


def runtime_loop() -> asyncio.AbstractEventLoop:
    """The runtime's own event loop, started once in a daemon thread.

    Used when a caller subscribes from a thread that runs no loop, so async tools and
    model streams still have one.
    """
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                _affinities[loop] = LoopAffinity(loop, _thread_id())
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=run, name="rx-agent-loop", daemon=True).start()
            ready.wait()
            _loop = loop
        return _loop


def on_loop(
    loop: asyncio.AbstractEventLoop | LoopAffinity, subscribe: Subscribe[T]
) -> Subscribe[T]:
    """Make a subscribe function run on ``loop``'s thread.

    A middleware may call ``next`` from another thread (inside a timer or a thread
    pool); the runtime's handlers then start on their loop instead. Disposal is
    thread-safe.
    """
    where = loop if isinstance(loop, LoopAffinity) else affinity(loop)

    def wrapped(
        observer: abc.ObserverBase[T], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        if _thread_id() == where.thread:
            return subscribe(observer, scheduler)
        holder = SingleAssignmentDisposable()

        def start() -> None:
            if not holder.is_disposed:
                holder.disposable = subscribe(observer, scheduler)

        where.hop(start)
        return Disposable(lambda: where.run(holder.dispose))

    return wrapped


def on_some_loop(
    subscribe: Subscribe[T], observer: abc.ObserverBase[T], scheduler: abc.SchedulerBase | None
) -> abc.DisposableBase:
    """Subscribe on the running loop, or on the runtime's loop when this thread has none."""
    return on_loop(running_loop() or runtime_loop(), subscribe)(observer, scheduler)


async def await_observable(source: Observable[T], default: Any = None) -> Any:
    """Subscribe, wait for completion on the running loop, return the last item.

    Cancelling the awaiting task disposes the subscription.
    """
    here = affinity()
    future: asyncio.Future[Any] = here.loop.create_future()
    last: list[Any] = [default]

    def on_next(value: Any) -> None:
        last[0] = value

    # The source may finish on another thread (a timer, a thread pool).
    def fail(exc: Exception) -> None:
        if not future.done():
            future.set_exception(exc)

    def complete() -> None:
        if not future.done():
            future.set_result(last[0])

    def on_error(exc: Exception) -> None:
        here.run(fail, exc)

    def on_completed() -> None:
        here.run(complete)

    subscription = source.subscribe(on_next, on_error, on_completed)
    try:
        return await future
    finally:
        subscription.dispose()


def aiter_observable(source: Observable[T]) -> AsyncIterator[T]:
    """Iterate an Observable's items from async code (unbounded buffer; Rx has no
    backpressure). Leaving the loop early (``break``) disposes the subscription."""

    async def gen() -> AsyncIterator[T]:
        loop = asyncio.get_running_loop()
        buffer: deque[tuple[int, Any]] = deque()
        waiter: list[asyncio.Future[None] | None] = [None]

        def push(kind: int, value: Any) -> None:
            buffer.append((kind, value))
            fut = waiter[0]
            if fut is not None and not fut.done():
                fut.set_result(None)

        here = affinity(loop)

        def threadsafe_push(kind: int, value: Any) -> None:
            # Events normally arrive on this loop's thread; hop when they do not.
            here.run(push, kind, value)

        subscription = source.subscribe(
            lambda v: threadsafe_push(0, v),
            lambda e: threadsafe_push(1, e),
            lambda: threadsafe_push(2, None),
        )
        try:
            while True:
                while buffer:
                    kind, value = buffer.popleft()
                    if kind == 0:
                        yield value
                    elif kind == 1:
                        raise value
                    else:
                        return
                fut = loop.create_future()
                waiter[0] = fut
                await fut
                waiter[0] = None
        finally:
            subscription.dispose()

    return gen()


def cancelling(handle: asyncio.Future[Any] | Any) -> Disposable:
    """A Disposable that cancels a task, future or timer handle."""

    def cancel() -> None:
        handle.cancel()

    return Disposable(cancel)


def from_coroutine(
    body: Callable[[abc.ObserverBase[T]], Coroutine[Any, Any, None]],
    loop: asyncio.AbstractEventLoop | None = None,
) -> Observable[T]:
    """A cold Observable that runs ``body(observer)`` as a task per subscription.

    The task runs on ``loop`` (default: the subscriber's running loop). The
    Observable completes when ``body`` returns and errors when it raises; disposing
    the subscription cancels the task.
    """
    return _FromCoroutine(body, None if loop is None else affinity(loop))


class _FromCoroutine(DirectObservable[T]):
    def __init__(
        self,
        body: Callable[[abc.ObserverBase[T]], Coroutine[Any, Any, None]],
        where: LoopAffinity | None,
    ) -> None:
        self._subscribe = None
        self.body = body
        self.where = where

    def direct(
        self, observer: abc.ObserverBase[T], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        where = self.where
        if where is not None and _thread_id() != where.thread:
            return on_loop(where, self.direct)(observer, scheduler)
        handle = _TaskHandle()
        handle.task = asyncio.get_running_loop().create_task(
            _run_body(self.body, observer, handle))
        return handle


class _TaskHandle(abc.DisposableBase):
    """Disposes a :func:`from_coroutine` subscription: cancels its task unless the
    body has finished (its terminal signal may be what disposes)."""

    __slots__ = ("done", "task")

    def __init__(self) -> None:
        self.done = False
        self.task: asyncio.Task[None] | None = None

    def dispose(self) -> None:
        task = self.task
        if not self.done and task is not None:
            self.done = True
            task.cancel()


async def _run_body(
    body: Callable[[abc.ObserverBase[T]], Coroutine[Any, Any, None]],
    observer: abc.ObserverBase[T],
    handle: _TaskHandle,
) -> None:
    try:
        await body(observer)
    except asyncio.CancelledError as exc:
        handle.done = True
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        # Raised by the body itself, not a cancellation of this task: left to
        # propagate it would end the task silently and the stream would hang.
        observer.on_error(RuntimeError(f"the step failed with {exc!r}"))
        return
    except Exception as exc:
        handle.done = True
        observer.on_error(exc)
        return
    except BaseException as exc:
        # SystemExit / KeyboardInterrupt must not stop the shared loop.
        handle.done = True
        observer.on_error(RuntimeError(f"the step failed with {exc!r}"))
        return
    handle.done = True
    handle.task = None  # the task refers to this handle: no cycle left behind
    observer.on_completed()
