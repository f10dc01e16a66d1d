"""The runtime's own Observables and the lean subscribe path (docs/internals.md,
"DirectObservable and the hot path").

RxPY wraps every subscription in an auto-detaching observer and, at the top level, a
trampoline, and gives every Observable an RLock. Where the runtime owns both ends it
skips them (:class:`DirectObservable`, :func:`subscribe_observer`); the hops of a
middleware's operator chain take one :class:`LeanSink` each
(:class:`LeanObservable`); RxPY's trampoline still runs at the top-level subscription.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import types
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from reactivex import Observable, abc
from reactivex.disposable import Disposable
from reactivex.internal import default_error
from reactivex.scheduler import CurrentThreadScheduler
from reactivex.scheduler.currentthreadscheduler import CurrentThreadSchedulerSingleton

__all__ = [
    "BLOCKING_MESSAGE",
    "DIRECT_TYPES",
    "DirectObservable",
    "LeanObservable",
    "LeanSink",
    "Subscribe",
    "callback_failed",
    "lean_subscribe",
    "refuse_blocking_run",
    "running_loop",
    "subscribe_direct",
    "subscribe_observer",
    "subscribe_top",
    "trampoline_idle",
]

T = TypeVar("T")

_log = logging.getLogger("rx_agent")

Subscribe = Callable[[abc.ObserverBase[T], abc.SchedulerBase | None], abc.DisposableBase]


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The loop running in this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _blocking_scheduler() -> Any:
    try:
        from reactivex import run as run_module

        return getattr(run_module, "_default_scheduler", None)
    except ImportError:  # pragma: no cover - a reactivex without run()
        return None


# ``Observable.run()`` subscribes with this module-level scheduler and then blocks its
# thread; seeing it on a loop's thread means the loop is about to deadlock.
_RUN_SCHEDULER = _blocking_scheduler()

BLOCKING_MESSAGE = (
    "Observable.run() would block the running event loop (the call could never "
    "finish); inside async code use `await agent.acall(...)`, `await observable` or "
    "`async for event in agent.astream(...)`"
)


def refuse_blocking_run(scheduler: Any) -> None:
    """Raise when a blocking ``run()`` subscribes on a thread that runs a loop."""
    if scheduler is not None and scheduler is _RUN_SCHEDULER and running_loop() is not None:
        raise RuntimeError(BLOCKING_MESSAGE)


def _noop(*_: Any) -> None:
    pass


# RxPY's per-thread trampoline (CurrentThreadScheduler). Read directly: asking the
# scheduler costs a lock and a thread lookup per subscription.
_TRAMPOLINE_LOCAL: Any = getattr(CurrentThreadSchedulerSingleton, "_local", None)


def trampoline_idle() -> bool:
    """Whether no RxPY trampoline runs on this thread (a subscription made now is a
    top-level one, which must set up the trampoline before it subscribes)."""
    try:
        return bool(_TRAMPOLINE_LOCAL.tramp._idle)
    except AttributeError:  # pragma: no cover - another reactivex layout
        return CurrentThreadScheduler.singleton().schedule_required()


# ``ops.map`` onto the runtime's Observables (``_map.py`` sets it when imported: that
# module builds on this one, so this one may not import it).
_map_piped: Callable[[Any, Callable[[Any], Any]], Any] | None = None


class _Light(Observable[T]):
    """An Observable without RxPY's per-instance RLock (made only if an operator asks
    for ``source.lock``) whose ``pipe`` applies the operators directly."""

    def __init__(self) -> None:  # no super().__init__(): it makes the RLock
        self._subscribe = None

    @property
    def lock(self) -> threading.RLock:  # type: ignore[override]
        found = self.__dict__.get("_lock")
        if found is None:
            found = self.__dict__.setdefault("_lock", threading.RLock())
        return found  # type: ignore[no-any-return]

    def pipe(self, *operators: Callable[[Any], Any]) -> Any:
        source: Any = self
        piped = _map_piped
        for op in operators:
            mapped = piped(source, op) if piped is not None else None
            source = op(source) if mapped is None else mapped
        return source


class LeanSink:
    """One lean subscription: the observer handed to the producer and the disposable
    handed back. ``on_next`` is the downstream callback itself (no extra call per
    item); after a terminal signal or disposal every callback is a no-op and the
    upstream is disposed, as RxPY's auto-detaching observer does, without its lock.
    Registered as an ``ObserverBase``: RxPY code that tests for one
    (``Notification.accept`` in ``delay``) must treat it as an observer.
    Disposal may come from any thread: it only sets a flag and disposes the upstream
    (which RxPY and the runtime make idempotent)."""

    __slots__ = ("_completed", "_done", "_error", "on_next", "source", "upstream")

    def __init__(self, on_next: Any, on_error: Any, on_completed: Any,
                 source: object = None) -> None:
        self.on_next = on_next
        self._error = on_error
        self._completed = on_completed
        self._done = False
        self.upstream: abc.DisposableBase | None = None
        self.source = source  # what the stream is, for a report (a hook's layer)

    def on_error(self, error: Exception) -> None:
        if self._done:
            return
        self._done = True
        fn = self._error
        try:
            fn(error)
        finally:
            self._release()

    def on_completed(self) -> None:
        if self._done:
            return
        self._done = True
        fn = self._completed
        try:
            fn()
        finally:
            self._release()

    def dispose(self) -> None:
        self._done = True
        self._release()

    def _release(self) -> None:
        # A dispose action of the stream this sink subscribed (``ops.finally_action``)
        # that raises has nowhere to go once the stream ended: the producer is a model
        # stream or a loop callback. It is logged naming the stream and the code,
        # instead of reaching the loop as an anonymous "Exception in callback"
        # (Reactor drops an error of ``doFinally`` the same way).
        try:
            self._detach()
        except Exception as exc:
            callback_failed(exc, self.source)

    def _detach(self) -> None:
        self.on_next = self._completed = self._error = _noop
        up = self.upstream
        if up is not None:
            self.upstream = None
            up.dispose()


_CALLBACKS = {types.FunctionType, types.MethodType, types.BuiltinFunctionType, type(None)}


abc.ObserverBase.register(LeanSink)
abc.DisposableBase.register(LeanSink)


def callback_failed(exc: Exception, source: object) -> None:
    """Log an exception a callback raised after its stream's terminal signal, naming
    the code that raised it and, when known, the stream (``str(source)``)."""
    tb = exc.__traceback__
    where = ""
    if tb is not None:
        while tb.tb_next is not None:
            tb = tb.tb_next
        code = tb.tb_frame.f_code
        where = f" in {code.co_qualname} ({code.co_filename}:{tb.tb_lineno})"
    stream = f"{source}: a callback of its stream" if source is not None else \
        "a callback of a stream"
    _log.warning("%s (a dispose action, such as ops.finally_action's) raised after the "
                 "stream ended or was disposed, where the call cannot see it: %r%s",
                 stream, exc, where, exc_info=exc)


def lean_subscribe(
    subscribe: Subscribe[T],
    on_next: Any,
    on_error: Any,
    on_completed: Any,
    scheduler: abc.SchedulerBase | None,
    source: object = None,
) -> abc.DisposableBase:
    """Call ``subscribe`` with one :class:`LeanSink` (arguments as RxPY's
    ``Observable.subscribe`` takes them) and return the sink as the disposable;
    ``source`` names the stream in a report of a failing dispose action."""
    if type(on_next) not in _CALLBACKS and hasattr(on_next, "on_next"):
        observer = on_next
        on_next, on_error, on_completed = (observer.on_next, observer.on_error,
                                           observer.on_completed)
    sink = LeanSink(on_next or _noop, on_error or default_error, on_completed or _noop, source)
    try:
        upstream = subscribe(sink, scheduler)  # type: ignore[arg-type]
    except Exception as exc:
        if sink._done:
            raise
        sink.on_error(exc)
        return sink  # type: ignore[return-value]
    if upstream is not None:
        if not hasattr(upstream, "dispose"):
            # A subscribe function may return a dispose function (RxPY accepts one).
            upstream = Disposable(upstream)  # type: ignore[arg-type]
        # Published before the flag is read: a dispose racing on another thread then
        # either sees it or left the flag for this check (both may dispose: harmless).
        sink.upstream = upstream
        if sink._done:
            sink.upstream = None
            upstream.dispose()
    return sink  # type: ignore[return-value]  # registered as a DisposableBase


_RX_SUBSCRIBE = Observable.subscribe


def subscribe_top(
    subscribe: Subscribe[T],
    on_next: Any,
    on_error: Any,
    on_completed: Any,
    scheduler: abc.SchedulerBase | None,
    source: object = None,
) -> abc.DisposableBase:
    """:func:`lean_subscribe`, inside RxPY's trampoline on this thread.

    Inside a running trampoline that is all; at the top level this runs the
    trampoline as RxPY's ``Observable.subscribe`` does (the subscription is made and
    its disposable handed back before any item scheduled on the current thread runs,
    so ``take(3)`` over an endless synchronous source stops), without the scheduled
    item, the auto-detaching observer and their locks."""
    try:
        tramp = _TRAMPOLINE_LOCAL.tramp
        idle = tramp._idle
    except AttributeError:  # pragma: no cover - another reactivex layout
        return Observable(subscribe).subscribe(
            on_next, on_error, on_completed, scheduler=scheduler)
    if not idle:
        return lean_subscribe(subscribe, on_next, on_error, on_completed, scheduler, source)
    tramp._idle = False
    try:
        sink = lean_subscribe(subscribe, on_next, on_error, on_completed, scheduler, source)
        if tramp._queue.items:
            tramp._run()
    finally:
        tramp._idle = True
        if tramp._queue.items:  # left by an item that raised
            tramp._queue.clear()
    return sink


# The exact classes whose ``direct`` the runtime may call (DirectObservable and its
# subclasses): one set lookup instead of isinstance against RxPY's ABC.
_DIRECT: set[type] = set()


class DirectObservable(_Light[T]):
    """An Observable the runtime itself produces.

    Subscribed by the runtime (:func:`subscribe_observer`, :func:`subscribe_direct`)
    its ``direct`` function gets the runtime's observer as is; subscribed by anyone
    else (a middleware's operators) it goes through one :class:`LeanSink`, without
    RxPY's trampoline, auto-detaching observer and locks: the runtime's producers
    never emit in a loop that waits for disposal, and the runtime's top-level
    subscription of a user's chain keeps RxPY's trampoline (see docs/internals.md).
    Subclasses define ``direct`` as a method instead of passing a function.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _DIRECT.add(cls)

    def __init__(self, subscribe: Subscribe[T] | None = None) -> None:
        self._subscribe = None
        if subscribe is not None:
            self.direct = subscribe  # type: ignore[method-assign,assignment]

    def direct(
        self, observer: abc.ObserverBase[T], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        raise NotImplementedError  # pragma: no cover - set per instance or overridden

    def _subscribe_core(
        self, observer: abc.ObserverBase[T], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        return self.direct(observer, scheduler) or _NOTHING

    def subscribe(
        self,
        on_next: Any = None,
        on_error: Any = None,
        on_completed: Any = None,
        *,
        scheduler: abc.SchedulerBase | None = None,
    ) -> abc.DisposableBase:
        return lean_subscribe(self.direct, on_next, on_error, on_completed, scheduler)

    def run(self, scheduler: abc.SchedulerBase | None = None) -> T:
        if running_loop() is not None:
            raise RuntimeError(BLOCKING_MESSAGE)
        return super().run(scheduler)


_DIRECT.add(DirectObservable)
DIRECT_TYPES: Collection[type] = _DIRECT  # read-only outside this module


class LeanObservable(_Light[T]):
    """A middleware hook's Observable, as the next layer out sees it.

    Subscribed inside a running trampoline (by an operator of the next layer out, or
    by the runtime's own top-level subscription) it subscribes the hook's Observable
    with one :class:`LeanSink`; subscribed at the top level it takes RxPY's ordinary
    path, which sets up the trampoline (so ``take(3)`` over an endless synchronous
    source stops after three items)."""

    def __init__(self, inner: Observable[T], source: object = None) -> None:
        self._subscribe = None
        self.inner = inner
        self.source = source  # str(source) names the hook in a report

    def _subscribe_core(
        self, observer: abc.ObserverBase[T], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        return self.inner._subscribe_core(observer, scheduler)

    def subscribe(
        self,
        on_next: Any = None,
        on_error: Any = None,
        on_completed: Any = None,
        *,
        scheduler: abc.SchedulerBase | None = None,
    ) -> abc.DisposableBase:
        inner = self.inner
        if type(inner).subscribe is not _RX_SUBSCRIBE:
            return inner.subscribe(on_next, on_error, on_completed, scheduler=scheduler)
        return subscribe_top(inner._subscribe_core, on_next, on_error, on_completed,
                             scheduler, self.source)

    def run(self, scheduler: abc.SchedulerBase | None = None) -> T:
        return self.inner.run(scheduler)


class _Sink:
    __slots__ = ("on_completed", "on_error", "on_next")

    def __init__(self, on_next: Any, on_error: Any, on_completed: Any) -> None:
        self.on_next = on_next
        self.on_error = on_error
        self.on_completed = on_completed


_NOTHING = Disposable()


def subscribe_observer(source: Observable[T], observer: Any) -> abc.DisposableBase:
    """Subscribe ``observer`` (anything with ``on_next``, ``on_error`` and
    ``on_completed``) with the fewest layers the source allows: a DirectObservable's
    ``direct`` gets it as is; any other source is a top-level subscription through
    RxPY (its trampoline and auto-detaching observer)."""
    kind = type(source)
    if kind in _DIRECT:
        try:
            return source.direct(observer, None) or _NOTHING  # type: ignore[attr-defined]
        except Exception as exc:
            observer.on_error(exc)
            return _NOTHING
    named: object = None
    if kind is LeanObservable:
        named = source.source  # type: ignore[attr-defined]
        source = source.inner  # type: ignore[attr-defined]
        kind = type(source)
    if kind.subscribe is _RX_SUBSCRIBE:
        return subscribe_top(source._subscribe_core, observer.on_next, observer.on_error,
                             observer.on_completed, None, named)
    return source.subscribe(observer)


def subscribe_direct(
    source: Observable[T],
    on_next: Callable[[T], None],
    on_error: Callable[[Exception], None],
    on_completed: Callable[[], None],
) -> abc.DisposableBase:
    """:func:`subscribe_observer` with three callbacks."""
    return subscribe_observer(source, _Sink(on_next, on_error, on_completed))
