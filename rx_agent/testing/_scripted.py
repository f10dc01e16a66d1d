"""The scripted side of a harness run: its upstreams."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import reactivex
from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import CompositeDisposable, Disposable

from ._marbles import marbles

__all__ = ["Upstream", "attempts", "to_observable"]

Upstream = Any
"""A list of events (an exception as the last item fails the stream there), a marble
string (with ``legend``), an Observable, an exception (fails at subscription), or a
function of the input ``next`` received returning one of these."""


def attempts(*upstreams: Upstream) -> Callable[[Any], Upstream]:
    """One upstream per subscription of ``next``, in order: ``attempts(error, events)``
    scripts a call that fails once and then succeeds. A further subscription fails
    the stream with an ``AssertionError`` saying how many were scripted. It counts
    across runs: give each run its own."""
    if not upstreams:
        raise TypeError("attempts() needs at least one upstream")
    count = [0]

    def pick(_input: Any) -> Upstream:
        count[0] += 1
        if count[0] > len(upstreams):
            return AssertionError(
                f"the hook subscribed upstream {count[0]} times; attempts() scripts "
                f"{len(upstreams)}"
            )
        return upstreams[count[0] - 1]

    return pick


def to_observable(spec: Upstream, legend: Mapping[str, Any] | None, timespan: float,
                  error: BaseException | None) -> Observable[Any]:
    if isinstance(spec, Observable):
        return spec
    if isinstance(spec, str):
        return marbles(spec, legend, timespan=timespan, error=error)
    if isinstance(spec, BaseException):
        return reactivex.throw(spec if isinstance(spec, Exception) else RuntimeError(repr(spec)))
    if isinstance(spec, Sequence):
        items = list(spec)
        failure = items.pop() if items and isinstance(items[-1], BaseException) else None
        for i, item in enumerate(items):
            if isinstance(item, BaseException):
                raise TypeError(f"upstream item #{i} is an exception; only the last item may be")
        tail = [] if failure is None else [(0.0, "error", failure)]
        signals = [(0.0, "next", item) for item in items]
        signals += tail or [(0.0, "completed", None)]
        return timed(signals)
    raise TypeError(
        f"upstream must be a list of events, a marble string, an Observable, an exception "
        f"or a function of the input, got {type(spec).__name__}"
    )


def timed(signals: list[tuple[float, str, Any]]) -> Observable[Any]:
    # A list is emitted at the instant of subscription, through the scheduler, so the
    # scheduler decides the order of work as it does for a marble.
    def subscribe(observer: rxabc.ObserverBase[Any],
                  scheduler: rxabc.SchedulerBase | None = None) -> rxabc.DisposableBase:
        stopped = False

        def action(_s: rxabc.SchedulerBase, _state: Any = None) -> None:
            for _at, kind, value in signals:
                if stopped:
                    return
                if kind == "next":
                    observer.on_next(value)
                elif kind == "error":
                    observer.on_error(value)
                else:
                    observer.on_completed()

        def dispose() -> None:
            nonlocal stopped
            stopped = True

        assert scheduler is not None
        return CompositeDisposable(Disposable(dispose), scheduler.schedule(action))

    return Observable(subscribe)
