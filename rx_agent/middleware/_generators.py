"""Async-generator onion hooks, AgentScope Python's native form::

    async def on_model_call(self, agent, ctx, input, next):
        async for event in next(input):
            yield event

The hook's stream is its generator: each subscription starts the generator on an
event loop (the subscriber's, else the runtime's) and emits what it yields. Inside it,
``next(input)`` (or ``next()``) is an Observable that ``async for`` iterates: it is
subscribed when the iteration starts, buffers what arrives before the generator asks
for it (Rx has no backpressure) and raises the stream's error at the ``async for``.

When the generator returns, raises, or the subscription is disposed, the generator is
closed (its ``finally`` blocks run) and every stream it opened with ``next`` is
disposed. An error raised while closing it fails the stream, or, once nobody listens,
is logged naming the middleware.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import AsyncGenerator, Callable
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc

from .._rx import (
    DirectObservable,
    LeanObservable,
    affinity,
    on_loop,
    running_loop,
    runtime_loop,
    subscribe_direct,
)
from ..event import AgentEvent
from ._explain import field_call
from ._forms import OWN_INPUT
from ._points import ExtensionPoint

__all__ = ["AsyncGenHook"]

_log = logging.getLogger("rx_agent")

_thread_id = threading.get_ident
# Per thread: whether the item being emitted woke a generator hook waiting for it.
_handoff = threading.local()
_handoff.woken = False
_DONE: Any = object()  # the end of a stream, in an iteration's ``end``


class AsyncGenHook:
    """An async-generator onion hook as a plain one: it returns an Observable whose
    every subscription runs the generator once."""

    __slots__ = ("_hook", "_label", "_point")

    def __init__(self, hook: Callable[..., Any], label: str, point: ExtensionPoint) -> None:
        self._hook = hook
        self._label = label
        self._point = point

    def __call__(self, agent: Any, ctx: Any, inp: Any, inner: Any) -> Observable[AgentEvent]:
        return _Generated(self, agent, ctx, inp, inner)

    def where(self) -> str:
        return f"{self._label}.{self._point.value}()"


class _Generated(DirectObservable[AgentEvent]):
    """The stream of one hook call: per subscription, one run of the generator."""

    def __init__(self, hook: AsyncGenHook, agent: Any, ctx: Any, inp: Any, inner: Any) -> None:
        self._subscribe = None
        self.hook = hook
        self.args = (agent, ctx, inp, inner)
        self.called_on = running_loop()

    def direct(
        self, observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
    ) -> rxabc.DisposableBase:
        loop = running_loop() or self.called_on or runtime_loop()
        return on_loop(loop, self._start)(observer, scheduler)

    def _start(
        self, observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
    ) -> rxabc.DisposableBase:
        run = _Run(self.hook, observer, scheduler)
        run.task = asyncio.get_running_loop().create_task(run.drive(self.args))
        return run


class _Run(rxabc.DisposableBase):
    """One run of a generator hook: drives it, and is the subscription's disposable."""

    __slots__ = ("disposed", "hook", "observer", "scheduler", "streams", "task", "where")

    def __init__(self, hook: AsyncGenHook, observer: rxabc.ObserverBase[AgentEvent],
                 scheduler: Any) -> None:
        self.where = affinity()  # made on the loop it runs on
        self.hook = hook
        self.observer = observer
        self.scheduler = scheduler
        self.disposed = False
        self.task: asyncio.Task[None] | None = None
        self.streams: list[_Iteration] = []

    async def drive(self, args: tuple[Any, Any, Any, Any]) -> None:
        agent, ctx, inp, inner = args
        hook = self.hook
        failure: BaseException | None = None
        gen: AsyncGenerator[Any, None] | None = None
        try:
            gen = hook._hook(agent, ctx, inp, _GenNext(inner, inp, self))
            async for item in gen:
                if self.disposed:
                    break
                _handoff.woken = False
                self.observer.on_next(item)
                if self.disposed:  # the item made the subscriber dispose: stop here
                    break
                if _handoff.woken:
                    # The item woke a generator hook outside this one: let it take the
                    # item before this one goes on, so that each event passes every
                    # generator in turn (inner first), as chained generators do.
                    await asyncio.sleep(0)
        except asyncio.CancelledError as exc:
            if not self.disposed:  # raised by the hook itself, not a disposal
                failure = RuntimeError(f"{hook.where()} raised {exc!r}")
        except Exception as exc:
            failure = field_call(exc, hook.where())
        except BaseException as exc:  # GeneratorExit, SystemExit: not the loop's to stop
            failure = RuntimeError(f"{hook.where()} raised {exc!r}")
        finally:
            closing = await self._close(gen)
        if failure is None and closing is not None:
            failure = closing
        self.task = None  # the task refers to this run: no cycle left behind
        if self.disposed:
            if failure is not None:  # raised by the generator's cleanup: nobody listens
                _log.warning("%s failed while its generator closed, after the stream was "
                             "disposed: %r", hook.where(), failure, exc_info=failure)
            return
        self.disposed = True
        if failure is not None:
            self.observer.on_error(failure)  # type: ignore[arg-type]
        else:
            self.observer.on_completed()

    async def _close(self, gen: AsyncGenerator[Any, None] | None) -> BaseException | None:
        """Close the generator (its ``finally`` blocks run), then the streams it opened."""
        error: BaseException | None = None
        if gen is not None:
            try:
                await gen.aclose()
            except asyncio.CancelledError:
                pass
            except Exception as exc:
                error = exc
        self.close_streams()
        return error

    def close_streams(self) -> None:
        streams, self.streams = self.streams, []
        for stream in streams:
            stream.close()

    def dispose(self) -> None:
        where = self.where
        if _thread_id() != where.thread:
            where.hop(self.dispose)
            return
        if self.disposed:
            return
        self.disposed = True
        self.close_streams()
        task = self.task
        # Disposed by the subscriber while the generator runs (in an item's on_next):
        # the run stops at its next step. Disposed from outside: cancel it.
        if task is not None and not task.done() and asyncio.current_task() is not task:
            task.cancel()


class _GenNext:
    """``next`` inside a generator hook: its streams are iterable with ``async for``
    and end with the hook's run."""

    __slots__ = ("_inner", "_input", "_run")

    def __init__(self, inner: Any, inp: Any, run: _Run) -> None:
        self._inner = inner
        self._input = inp
        self._run = run

    def __call__(self, inp: Any = OWN_INPUT) -> _Stream:
        return _Stream(self._inner(self._input if inp is OWN_INPUT else inp), self._run)

    apply = __call__


class _Stream(LeanObservable[AgentEvent]):
    """An Observable of the layer inside that ``async for`` iterates; operators keep
    that (``async for e in next(input).pipe(ops.filter(...))``)."""

    def __init__(self, inner: Observable[AgentEvent], owner: _Run) -> None:
        super().__init__(inner)
        self.owner = owner

    def pipe(self, *operators: Callable[[Any], Any]) -> Any:
        return _Stream(super().pipe(*operators), self.owner)

    def __aiter__(self) -> _Iteration:
        return _Iteration(self.inner, self.owner)


class _Iteration:
    """One ``async for`` over a stream: subscribed at once, items buffered."""

    __slots__ = ("buffer", "end", "subscription", "waiter", "where")

    def __init__(self, source: Observable[AgentEvent], run: _Run) -> None:
        self.where = affinity()
        self.buffer: deque[Any] = deque()
        self.end: Any = None  # _DONE, or the stream's error
        self.waiter: asyncio.Future[None] | None = None
        self.subscription: rxabc.DisposableBase | None = None
        run.streams.append(self)
        scheduler = run.scheduler
        if scheduler is None:
            self.subscription = subscribe_direct(source, self.on_next, self.on_error,
                                                 self.on_completed)
        else:  # a subscriber's scheduler (a TestScheduler, say) reaches the streams too
            self.subscription = source.subscribe(self.on_next, self.on_error,
                                                 self.on_completed, scheduler=scheduler)

    def __aiter__(self) -> _Iteration:
        return self

    async def __anext__(self) -> Any:
        buffer = self.buffer
        while not buffer:
            end = self.end
            if end is not None:
                if end is _DONE:
                    raise StopAsyncIteration
                raise end
            waiter = self.waiter = self.where.loop.create_future()
            try:
                await waiter
            finally:
                self.waiter = None
        return buffer.popleft()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
            _handoff.woken = True

    def on_next(self, item: Any) -> None:
        if _thread_id() != self.where.thread:  # a stream that moved threads
            self.where.hop(self.on_next, item)
        elif self.end is None:
            self.buffer.append(item)
            self._wake()

    def on_error(self, error: Exception) -> None:
        if _thread_id() != self.where.thread:
            self.where.hop(self.on_error, error)
        elif self.end is None:
            self.end = error
            self._wake()

    def on_completed(self) -> None:
        if _thread_id() != self.where.thread:
            self.where.hop(self.on_completed)
        elif self.end is None:
            self.end = _DONE
            self._wake()

    def close(self) -> None:
        if self.end is None:
            self.end = _DONE
        # Dropped once disposed: the producer may keep its observer (this iteration's
        # callbacks), which would make a cycle through the subscription.
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            subscription.dispose()
