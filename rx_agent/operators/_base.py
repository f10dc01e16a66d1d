"""What every operator of :mod:`rx_agent.operators` shares.

Operators return a :class:`~rx_agent._rx.DirectObservable`: the runtime subscribes
it without RxPY's per-subscription wrappers, and it subscribes its own source the
same way when that source is the runtime's (``next(input)``), so an operator from
this module costs no more per event than one plain RxPY operator (see
``benchmarks/operators.py``). Each keeps the Rx grammar itself: after a terminal
signal nothing more is forwarded, and an exception raised by a user function ends
the stream with ``on_error`` and disposes the source. Event classes are matched by
exact type, as the runtime's own message builder matches them (``of_type`` and the
class predicates of ``inject_*`` also accept subclasses).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from reactivex import Observable, abc
from reactivex.disposable import SingleAssignmentDisposable
from reactivex.scheduler import TimeoutScheduler
from reactivex.scheduler.eventloop import AsyncIOScheduler

from .._rx import DirectObservable, running_loop
from ..event import (
    AgentEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

__all__ = [
    "CONTENT",
    "FIRST_CONTENT",
    "Op",
    "Operator",
    "Relay",
    "check_seconds",
    "clock",
    "default_scheduler",
    "direct",
    "relay_op",
    "subscribe_to",
    "with_delta",
]

T = TypeVar("T")
U = TypeVar("U")

Operator = Callable[[Observable[T]], Observable[U]]


class Op:
    """An operator: ``source.pipe(op)``. An object, not a function, so that one kept as
    a class attribute (``redact = aops.redact()``) stays an operator when read through
    ``self`` instead of becoming a bound method."""

    __slots__ = ("_apply", "_name")

    def __init__(self, name: str, apply: Callable[[Observable[Any]], Observable[Any]]) -> None:
        self._name = name
        self._apply = apply

    def __call__(self, source: Observable[Any]) -> Observable[Any]:
        return self._apply(source)

    def __repr__(self) -> str:
        return f"<rx_agent.operators.{self._name}>"

# What "the model produced something" means: the first text, thinking or tool-call
# event (``with_timeout(first_event=...)``), or any block event (retries and fallback:
# after one of these reached the caller, another attempt would duplicate it).
FIRST_CONTENT: frozenset[type[AgentEvent]] = frozenset({
    TextBlockStartEvent, TextBlockDeltaEvent, TextBlockEndEvent,
    ThinkingBlockStartEvent, ThinkingBlockDeltaEvent, ThinkingBlockEndEvent,
    ToolCallStartEvent, ToolCallDeltaEvent, ToolCallEndEvent,
})
CONTENT: frozenset[type[AgentEvent]] = FIRST_CONTENT | {
    DataBlockStartEvent, DataBlockDeltaEvent, DataBlockEndEvent,
}

_new = object.__new__
_set = object.__setattr__


def with_delta(event: T, delta: str) -> T:
    """A copy of a delta event with another ``delta`` (same id, time and metadata),
    built without validation like the runtime's own events."""
    copy = _new(type(event))
    data = event.__dict__.copy()
    data["delta"] = delta
    _set(copy, "__dict__", data)
    _set(copy, "__pydantic_fields_set__", event.__pydantic_fields_set__)  # type: ignore[attr-defined]
    _set(copy, "__pydantic_extra__", None)
    _set(copy, "__pydantic_private__", None)
    return copy


Subscribe = Callable[[abc.ObserverBase[Any], abc.SchedulerBase | None], abc.DisposableBase]


def direct(subscribe: Subscribe) -> Observable[Any]:
    return DirectObservable(subscribe)


def subscribe_to(
    source: Observable[Any],
    on_next: Callable[[Any], None],
    on_error: Callable[[Exception], None],
    on_completed: Callable[[], None],
    scheduler: abc.SchedulerBase | None,
) -> abc.DisposableBase:
    """Subscribe ``source`` with the fewest layers it allows, passing the scheduler
    given at subscription down (RxPY's convention)."""
    if type(source) is DirectObservable:
        return source.direct(_Sink(on_next, on_error, on_completed), scheduler)  # type: ignore[arg-type]
    if not isinstance(source, Observable):
        raise TypeError(f"an rx_agent operator was applied to {type(source).__name__}, "
                        "expected an Observable")
    return source.subscribe(on_next, on_error, on_completed, scheduler=scheduler)


class Relay:
    """One subscription of an operator that forwards to ``observer``: its source's
    subscription (``upstream``) and whether the stream already ended here."""

    __slots__ = ("forward", "observer", "stopped", "upstream")

    def __init__(self, observer: abc.ObserverBase[Any]) -> None:
        self.observer = observer
        self.forward = observer.on_next
        self.stopped = False
        self.upstream = SingleAssignmentDisposable()

    def fail(self, exc: Exception) -> None:
        """End the stream with ``exc`` (a user function raised) and dispose the source:
        nothing more is forwarded."""
        self.stopped = True
        self.observer.on_error(exc)
        self.upstream.dispose()

    def on_error(self, exc: Exception) -> None:
        if not self.stopped:
            self.observer.on_error(exc)

    def on_completed(self) -> None:
        if not self.stopped:
            self.observer.on_completed()


Handlers = tuple[Callable[[Any], None], Callable[[Exception], None], Callable[[], None]]


def relay_op(name: str, start: Callable[[Relay], Callable[[Any], None] | Handlers]) -> Op:
    """An operator whose every subscription is one :class:`Relay`: ``start(relay)``
    gives the source's ``on_next`` (the relay's own terminal signals then apply), or
    ``(on_next, on_error, on_completed)`` for an operator that holds items back."""

    def operator(source: Observable[Any]) -> Observable[Any]:
        def subscribe(
            observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            relay = Relay(observer)
            handlers = start(relay)
            if isinstance(handlers, tuple):
                on_next, on_error, on_completed = handlers
            else:
                on_next, on_error, on_completed = handlers, relay.on_error, relay.on_completed
            relay.upstream.disposable = subscribe_to(source, on_next, on_error, on_completed,
                                                     scheduler)
            return relay.upstream

        return direct(subscribe)

    return Op(name, operator)


class _Sink:
    __slots__ = ("on_completed", "on_error", "on_next")

    def __init__(self, on_next: Any, on_error: Any, on_completed: Any) -> None:
        self.on_next = on_next
        self.on_error = on_error
        self.on_completed = on_completed


_loop_schedulers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncIOScheduler] = (
    weakref.WeakKeyDictionary()
)


def default_scheduler(
    given: abc.SchedulerBase | None, at_subscription: abc.SchedulerBase | None
) -> abc.SchedulerBase:
    """The scheduler of a time-based operator: the one passed to it, else the one given
    at subscription (so a ``TestScheduler`` drives it), else the running event loop
    (hooks run on their call's loop: waiting holds no thread and events stay on the
    loop), else RxPY's timer threads."""
    if given is not None:
        return given
    if at_subscription is not None:
        return at_subscription
    loop = running_loop()
    if loop is None:
        return TimeoutScheduler.singleton()
    found = _loop_schedulers.get(loop)
    if found is None:
        found = _loop_schedulers[loop] = AsyncIOScheduler(loop)
    return found


def clock(scheduler: abc.SchedulerBase) -> Callable[[], float]:
    """The scheduler's time in seconds, cheaply where it can be (an event loop's
    ``time()``), else through ``scheduler.now``."""
    if isinstance(scheduler, AsyncIOScheduler):
        loop = getattr(scheduler, "_loop", None)
        if isinstance(loop, asyncio.AbstractEventLoop):
            return loop.time
    to_seconds = scheduler.to_seconds

    def now() -> float:
        return float(to_seconds(scheduler.now))

    return now


def check_seconds(who: str, name: str, value: float | None, *, optional: bool) -> float | None:
    """A duration argument: a non-negative number (``None`` when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{who}: {name} must be a number of seconds, not {type(value).__name__}")
    if not value >= 0:  # negative or NaN
        raise ValueError(f"{who}: {name} must be >= 0 seconds, got {value}")
    return float(value)
