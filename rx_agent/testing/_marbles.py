"""Marble diagrams: a scripted, timed stream written as a string.

Unlike :func:`reactivex.from_marbles` (whose elements are runs of characters), every
character is one frame, as in RxJS and Reactor test docs: ``"a-b|"`` emits the
legend's ``a`` at frame 0, ``b`` at frame 2 and completes at frame 3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import CompositeDisposable

__all__ = ["Marble", "marbles", "parse_marbles"]

Marble = tuple[float, str, Any]
"""``(virtual seconds, kind, value)``; kind is ``"next"``, ``"error"`` or ``"completed"``."""


def parse_marbles(
    diagram: str,
    legend: Mapping[str, Any] | None = None,
    *,
    timespan: float = 0.1,
    error: BaseException | None = None,
) -> list[Marble]:
    """The timed signals of ``diagram`` (see :func:`marbles`)."""
    if timespan <= 0:
        raise ValueError(f"timespan must be > 0 seconds, got {timespan}")
    legend = dict(legend or {})
    out: list[Marble] = []
    frame = 0
    group_at: int | None = None
    ended = False
    for position, char in enumerate(diagram):
        if char == " ":
            continue
        at = (frame if group_at is None else group_at) * timespan
        frame += 1
        if char == "-":
            if group_at is not None:
                raise ValueError(f"marble {diagram!r}: '-' inside a group at position {position}")
            continue
        if char == "(":
            if group_at is not None:
                raise ValueError(f"marble {diagram!r}: nested '(' at position {position}")
            group_at = frame - 1
            continue
        if char == ")":
            if group_at is None:
                raise ValueError(f"marble {diagram!r}: ')' without '(' at position {position}")
            group_at = None
            continue
        if ended:
            raise ValueError(f"marble {diagram!r}: {char!r} at position {position} comes after "
                             "the stream ended")
        if char == "|":
            out.append((at, "completed", None))
            ended = True
        elif char == "#":
            out.append((at, "error", error if error is not None else RuntimeError("marble #")))
            ended = True
        elif char in legend:
            value = legend[char]
            if isinstance(value, BaseException):
                out.append((at, "error", value))
                ended = True
            elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
                for item in value:  # one character may stand for several events
                    if isinstance(item, BaseException):
                        out.append((at, "error", item))
                        ended = True
                        break
                    out.append((at, "next", item))
            else:
                out.append((at, "next", value))
        else:
            known = ", ".join(repr(k) for k in legend) or "none"
            raise ValueError(
                f"marble {diagram!r}: {char!r} at position {position} is not in the legend "
                f"(known: {known}; '-' is a frame, '|' completes, '#' fails, '( )' groups)"
            )
    if group_at is not None:
        raise ValueError(f"marble {diagram!r}: '(' is never closed")
    return out


def marbles(
    diagram: str,
    legend: Mapping[str, Any] | None = None,
    *,
    timespan: float = 0.1,
    error: BaseException | None = None,
) -> Observable[Any]:
    """A cold Observable scripted by a marble diagram, timed on the subscriber's scheduler.

    One character is one frame of ``timespan`` virtual seconds (default 0.1):
    ``-`` lets a frame pass, ``|`` completes, ``#`` fails with ``error``
    (default ``RuntimeError("marble #")``), ``(ab)`` emits ``a`` and ``b`` at the
    frame of ``(``, spaces are ignored. Every other character is looked up in
    ``legend``: an item, a list of items (emitted together, in order) or an exception
    (the stream fails there). Each subscription starts the diagram again at its own
    frame 0, on the scheduler given at subscription (a ``TestScheduler`` in tests;
    without one it refuses, since a diagram needs a clock).
    """
    signals = parse_marbles(diagram, legend, timespan=timespan, error=error)

    def subscribe(
        observer: rxabc.ObserverBase[Any], scheduler: rxabc.SchedulerBase | None = None
    ) -> rxabc.DisposableBase:
        if scheduler is None:
            raise RuntimeError(
                "a marble stream needs a scheduler at subscription: subscribe with "
                "scheduler=TestScheduler() (MiddlewareHarness and verify(..., scheduler=) do)"
            )
        disposables = CompositeDisposable()
        for at, kind, value in signals:
            disposables.add(scheduler.schedule_relative(at, _signal(observer, kind, value)))
        return disposables

    return Observable(subscribe)


def _signal(observer: rxabc.ObserverBase[Any], kind: str, value: Any) -> Any:
    def action(_scheduler: rxabc.SchedulerBase, _state: Any = None) -> None:
        if kind == "next":
            observer.on_next(value)
        elif kind == "error":
            observer.on_error(value if isinstance(value, Exception) else RuntimeError(repr(value)))
        else:
            observer.on_completed()

    return action
