"""The machinery of :func:`~rx_agent.testing.verify`: signals, one run's state, the steps.

Every step is a generator: it yields ``(deadline, signals seen)`` when it must wait
for a signal in real time (``seen < 0``: just wait until the deadline) and is sent
whether one arrived, so one body serves the blocking and the awaitable runners.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.testing import TestScheduler

from ..event import AgentEvent
from ._clock import MAX_STEPS, next_due, run_next, run_until

__all__ = ["Run", "Signal", "Step", "Wait", "describe"]

_HIDDEN = frozenset({"id", "created_at", "type", "source"})
# An event's own id and time, and those of the message an AgentResultEvent carries.
_UNCOMPARED: dict[str, Any] = {"id": True, "created_at": True,
                               "result": {"id": True, "created_at": True}}


def describe(item: Any, limit: int = 48) -> str:
    """A short, readable form of an item (an event shows its class and own fields)."""
    if isinstance(item, AgentEvent):
        parts = []
        for name, value in item.__dict__.items():
            if name in _HIDDEN or (name == "metadata" and not value):
                continue
            text = repr(value)
            parts.append(f"{name}={text if len(text) <= limit else text[:limit - 1] + '…'}")
        return f"{type(item).__name__}({', '.join(parts)})"
    if isinstance(item, type):
        return item.__name__
    text = repr(item)
    return text if len(text) <= 2 * limit else text[:2 * limit - 1] + "…"


def _same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, type):
        return isinstance(actual, expected)
    if isinstance(expected, AgentEvent) and isinstance(actual, AgentEvent):
        # Two events are the same when everything but their own id and time agree.
        return type(expected) is type(actual) and expected.model_dump(
            exclude=_UNCOMPARED) == actual.model_dump(exclude=_UNCOMPARED)
    return bool(expected == actual)


@dataclass(frozen=True)
class Signal:
    """One notification the verifier saw: ``kind`` is ``"next"``, ``"error"`` or
    ``"completed"``; ``at`` is virtual seconds (with a TestScheduler) or real
    seconds since subscription."""

    kind: str
    value: Any
    at: float

    def __str__(self) -> str:
        if self.kind == "next":
            return f"on_next({describe(self.value)})"
        if self.kind == "error":
            return f"on_error({type(self.value).__name__}: {self.value})"
        return "on_completed()"


Wait = Generator[tuple[float, int], bool, Any]
Step = Callable[["Run"], Wait]


class Run:
    """The state of one verification: the signals seen and where the steps are."""

    def __init__(self, source: Observable[Any], scheduler: rxabc.SchedulerBase | None,
                 timeout: float) -> None:
        self.source = source
        self.scheduler = scheduler
        self.timeout = timeout
        self.signals: list[Signal] = []
        self.pos = 0
        self.lock = threading.Condition()
        self.cancelled = False
        self.subscription: rxabc.DisposableBase | None = None
        self.virtual = isinstance(scheduler, TestScheduler)
        self.started = time.monotonic()
        self.origin = scheduler.clock if self.virtual else 0.0  # type: ignore[union-attr]
        self.wakeup: Callable[[], None] | None = None
        self.step_name = ""
        self.steps = 0

    def when(self, sig: Signal) -> str:
        at = sig.at - self.origin
        return f"{at:g} s" if self.virtual else f"{at:.3f} s"

    def now(self) -> float:
        if self.virtual:
            return float(self.scheduler.clock)  # type: ignore[union-attr]
        return time.monotonic() - self.started

    def _add(self, kind: str, value: Any) -> None:
        with self.lock:
            self.signals.append(Signal(kind, value, self.now()))
            self.lock.notify_all()
        wake = self.wakeup
        if wake is not None:
            wake()

    def subscribe(self) -> None:
        self.subscription = self.source.subscribe(
            lambda x: self._add("next", x),
            lambda e: self._add("error", e),
            lambda: self._add("completed", None),
            scheduler=self.scheduler,
        )

    def dispose(self) -> None:
        if self.subscription is not None:
            self.subscription.dispose()

    def ended(self) -> bool:
        return bool(self.signals) and self.signals[-1].kind != "next"

    def need(self) -> Wait:
        """Make the next signal available; False when none will come."""
        deadline = time.monotonic() + self.timeout
        while self.pos >= len(self.signals):
            if self.cancelled or self.ended():
                return False
            if self.virtual:
                if not run_next(self.scheduler):  # type: ignore[arg-type]
                    return False
                self.count()
                continue
            if time.monotonic() >= deadline:
                return False
            yield deadline, len(self.signals)
        return True

    def count(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            self.fail("a signal", f"none after {MAX_STEPS} scheduled actions (an endless "
                      "stream? use then_cancel())")

    def peek(self) -> Signal:
        return self.signals[self.pos]

    def take(self) -> Signal:
        sig = self.signals[self.pos]
        self.pos += 1
        return sig

    def missing(self) -> str:
        if self.cancelled:
            return "nothing: the subscription was cancelled"
        if self.ended():
            return "nothing: the stream had already ended"
        if self.virtual:
            return (f"nothing: at {self.now():g} s of virtual time the stream has no work "
                    "scheduled (it never emits again)")
        return f"nothing within {self.timeout:g} s"

    def fail(self, expected: str, actual: str) -> None:
        clock = "virtual seconds" if self.virtual else "seconds"
        seen = "\n".join(
            f"  {'->' if i == self.pos else '  '} {s.at - self.origin:>8.3f}  {s}"
            for i, s in enumerate(self.signals)
        ) or "     (none)"
        raise AssertionError(
            f"verify() failed at step {self.step_name}\n"
            f"  expected: {expected}\n"
            f"  actual:   {actual}\n"
            f"  signals so far ({clock}; -> is where the step looked):\n{seen}"
        )


# -- the steps ------------------------------------------------------------------------


def next_step(expected: Any) -> Step:
    def step(run: Run) -> Wait:
        if not (yield from run.need()):
            run.fail(f"on_next({describe(expected)})", run.missing())
        sig = run.peek()
        if sig.kind != "next" or not _same(expected, sig.value):
            run.fail(f"on_next({describe(expected)})", f"{sig} at {run.when(sig)}")
        run.take()

    return step


def matches_step(predicate: Callable[[Any], Any], what: str) -> Step:
    def step(run: Run) -> Wait:
        if not (yield from run.need()):
            run.fail(f"an item matching {what}", run.missing())
        sig = run.peek()
        if sig.kind != "next":
            run.fail(f"an item matching {what}", str(sig))
        try:
            ok = predicate(sig.value)
            why = ""
        except AssertionError as exc:
            ok, why = False, f" ({exc})"
        if not ok:
            run.fail(f"an item matching {what}", f"{sig}, which does not match{why}")
        run.take()

    return step


def count_step(n: int) -> Step:
    def step(run: Run) -> Wait:
        for i in range(n):
            if not (yield from run.need()):
                run.fail(f"{n} items", f"{i}, then {run.missing()}")
            sig = run.peek()
            if sig.kind != "next":
                run.fail(f"{n} items", f"{i}, then {sig}")
            run.take()

    return step


def consume_step(predicate: Callable[[Any], Any]) -> Step:
    def step(run: Run) -> Wait:
        while (yield from run.need()):
            sig = run.peek()
            if sig.kind != "next" or not predicate(sig.value):
                return
            run.take()

    return step


def quiet_step(seconds: float) -> Step:
    def step(run: Run) -> Wait:
        expected = f"no signal for {seconds:g} s"
        if run.pos < len(run.signals):
            sig = run.peek()
            run.fail(expected, f"{sig} at {run.when(sig)}")
        if run.virtual:
            scheduler: Any = run.scheduler
            end = scheduler.clock + seconds
            while True:
                due = next_due(scheduler)
                if due is None or due >= end:
                    break
                run_next(scheduler)
                run.count()
                if run.pos < len(run.signals):
                    sig = run.peek()
                    run.fail(expected, f"{sig} at {run.when(sig)}")
            if end > scheduler.clock:
                scheduler.sleep(end - scheduler.clock)
            return
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if (yield deadline, len(run.signals)):
                sig = run.peek()
                run.fail(expected, f"{sig} at {run.when(sig)}")

    return step


def await_step(seconds: float | None) -> Step:
    def step(run: Run) -> Wait:
        if run.virtual:
            scheduler: Any = run.scheduler
            if seconds is None:
                while run_next(scheduler):
                    run.count()
            else:
                run.steps += run_until(scheduler, scheduler.clock + seconds)
            return
        deadline = time.monotonic() + (seconds or 0.0)
        while time.monotonic() < deadline:
            yield deadline, -1  # arrivals do not end the wait

    return step


def then_step(action: Callable[[], Any]) -> Step:
    def step(run: Run) -> Wait:
        action()
        return
        yield  # a generator, like every step

    return step


def cancel_step(run: Run) -> Wait:
    run.cancelled = True
    run.dispose()
    return
    yield


def complete_step(run: Run) -> Wait:
    if not (yield from run.need()):
        run.fail("on_completed()", run.missing())
    sig = run.peek()
    if sig.kind != "completed":
        run.fail("on_completed()", f"{sig} at {run.when(sig)}")
    run.take()


def error_step(error_type: type[BaseException]) -> tuple[str, Step]:
    if not (isinstance(error_type, type) and issubclass(error_type, BaseException)):
        raise TypeError(f"expect_error() takes an exception class, got {error_type!r}")

    def step(run: Run) -> Wait:
        expected = f"on_error({error_type.__name__})"
        if not (yield from run.need()):
            run.fail(expected, run.missing())
        sig = run.peek()
        if sig.kind != "error" or not isinstance(sig.value, error_type):
            run.fail(expected, f"{sig} at {run.when(sig)}")
        run.take()

    return f"expect_error({error_type.__name__})", step


def error_matches_step(predicate: Callable[[BaseException], Any]) -> tuple[str, Step]:
    what = getattr(predicate, "__name__", "predicate")

    def step(run: Run) -> Wait:
        expected = f"an error matching {what}"
        if not (yield from run.need()):
            run.fail(expected, run.missing())
        sig = run.peek()
        if sig.kind != "error" or not predicate(sig.value):
            run.fail(expected, f"{sig} at {run.when(sig)}")
        run.take()

    return f"expect_error_matches({what})", step
