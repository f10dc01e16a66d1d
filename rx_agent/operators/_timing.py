"""Time: ``with_timeout`` and ``rate_limit``.

Both take ``scheduler=None`` and otherwise use the scheduler given at subscription
(RxPY's convention), so ``reactivex.testing.TestScheduler`` drives them; without
either they wait on the running event loop (a hook runs on its call's loop), so no
thread is held and events stay on the loop.
"""

from __future__ import annotations

import threading
from typing import Any

from reactivex import Observable, abc
from reactivex.disposable import Disposable, SerialDisposable, SingleAssignmentDisposable

from ..event import AgentEvent
from ..model.errors import ModelTimeoutError
from ._base import FIRST_CONTENT, Op, Operator, check_seconds, clock, default_scheduler, direct
from ._base import subscribe_to as _subscribe_to

__all__ = ["RateLimit", "rate_limit", "with_timeout"]


def with_timeout(
    first_event: float | None = None,
    between_events: float | None = None,
    total: float | None = None,
    scheduler: abc.SchedulerBase | None = None,
) -> Operator[AgentEvent, AgentEvent]:
    """Fail a stalled stream with :class:`~rx_agent.model.ModelTimeoutError`.

    * ``first_event``: seconds from subscription to the first text, thinking or
      tool-call event (``ModelCallStartEvent`` does not count);
    * ``between_events``: the longest silence between two events once that first
      content arrived; without ``first_event`` it also bounds the wait for every
      event before it, counted from subscription (RxJS's ``timeout({each})``);
    * ``total``: seconds from subscription to completion.

    On a timeout the source is disposed (the model call is cancelled) and the error
    says which limit passed. ``ModelTimeoutError`` is retryable, so
    :func:`retry_model` (or any retry that reads ``error.retryable``) tries again.
    Used in ``on_model_call``, the built-in ``max_retries`` sit below it and never
    see this error: wrap it in ``retry_model`` to retry a stall.
    """
    who = "with_timeout"
    first = check_seconds(who, "first_event", first_event, optional=True)
    gap = check_seconds(who, "between_events", between_events, optional=True)
    whole = check_seconds(who, "total", total, optional=True)
    if first is None and gap is None and whole is None:
        raise ValueError("with_timeout() needs first_event, between_events or total")
    content = FIRST_CONTENT

    def operator(source: Observable[AgentEvent]) -> Observable[AgentEvent]:
        def subscribe(
            observer: abc.ObserverBase[AgentEvent], scheduler_: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            sched = default_scheduler(scheduler, scheduler_)
            now = clock(sched)
            lock = threading.RLock()
            upstream = SingleAssignmentDisposable()
            first_timer = SerialDisposable()
            gap_timer = SerialDisposable()
            total_timer = SerialDisposable()
            done = False
            seen = first is None  # with no first_event limit, every event counts
            last = now()
            forward = observer.on_next

            def finish() -> bool:
                nonlocal done
                with lock:
                    if done:
                        return False
                    done = True
                first_timer.dispose()
                gap_timer.dispose()
                total_timer.dispose()
                return True

            def expire(message: str) -> None:
                if finish():
                    upstream.dispose()  # cancels the model call
                    observer.on_error(ModelTimeoutError(message))

            def first_due(_: abc.SchedulerBase, __: Any = None) -> None:
                if not seen:
                    expire(f"no text, thinking or tool call within {first:g}s "
                           f"(with_timeout(first_event={first:g}))")

            def gap_due(_: abc.SchedulerBase, __: Any = None) -> None:
                assert gap is not None
                if done:
                    return
                # Re-armed lazily: events only note their time, the timer checks.
                idle = now() - last
                if idle + 1e-9 >= gap:
                    expire(f"no event for {gap:g}s (with_timeout(between_events={gap:g}))")
                else:
                    gap_timer.disposable = sched.schedule_relative(gap - idle, gap_due)

            def total_due(_: abc.SchedulerBase, __: Any = None) -> None:
                expire(f"the stream did not complete within {whole:g}s "
                       f"(with_timeout(total={whole:g}))")

            def on_next(event: AgentEvent) -> None:
                nonlocal last, seen
                with lock:
                    if done:
                        return
                    if gap is not None:
                        last = now()
                    if not seen and type(event) in content:
                        seen = True
                        if gap is not None:  # the silence limit starts with the content
                            gap_timer.disposable = sched.schedule_relative(gap, gap_due)
                    forward(event)

            def on_error(exc: Exception) -> None:
                if finish():
                    observer.on_error(exc)

            def on_completed() -> None:
                if finish():
                    observer.on_completed()

            if first is not None:
                first_timer.disposable = sched.schedule_relative(first, first_due)
            elif gap is not None:
                gap_timer.disposable = sched.schedule_relative(gap, gap_due)
            if whole is not None:
                total_timer.disposable = sched.schedule_relative(whole, total_due)
            upstream.disposable = _subscribe_to(source, on_next, on_error, on_completed,
                                                scheduler_)

            def dispose() -> None:
                finish()
                upstream.dispose()

            return Disposable(dispose)

        return direct(subscribe)

    return Op("with_timeout()", operator)


class RateLimit:
    """The operator :func:`rate_limit` returns: it keeps the schedule shared by every
    subscription it sees, so create it once (in the middleware's ``__init__``) and
    apply the same instance in every call."""

    __slots__ = ("_lock", "_next_slot", "min_interval", "scheduler")

    def __init__(self, min_interval: float, scheduler: abc.SchedulerBase | None) -> None:
        self.min_interval = min_interval
        self.scheduler = scheduler
        self._lock = threading.Lock()
        self._next_slot: float | None = None  # when the next subscription may start

    def _reserve(self, at: float) -> float:
        # Reserved at subscription, under a lock: concurrent calls queue one interval
        # apart instead of all waiting the same interval and starting together.
        with self._lock:
            start = at if self._next_slot is None else max(at, self._next_slot)
            self._next_slot = start + self.min_interval
            return start

    def _give_back(self, start: float) -> None:
        # A subscription disposed while waiting frees its slot if no later one
        # was reserved after it.
        with self._lock:
            if self._next_slot == start + self.min_interval:
                self._next_slot = start

    def __call__(self, source: Observable[AgentEvent]) -> Observable[AgentEvent]:
        def subscribe(
            observer: abc.ObserverBase[AgentEvent], scheduler_: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            sched = default_scheduler(self.scheduler, scheduler_)
            at = clock(sched)()
            start = self._reserve(at)
            wait = start - at
            if wait <= 0:
                return _subscribe_to(source, observer.on_next, observer.on_error,
                                     observer.on_completed, scheduler_)
            holder = SingleAssignmentDisposable()
            started = False

            def begin(_: abc.SchedulerBase, __: Any = None) -> None:
                nonlocal started
                started = True
                if not holder.is_disposed:
                    holder.disposable = _subscribe_to(
                        source, observer.on_next, observer.on_error, observer.on_completed,
                        scheduler_)

            timer = sched.schedule_relative(wait, begin)

            def dispose() -> None:
                timer.dispose()
                if not started:
                    self._give_back(start)
                holder.dispose()

            return Disposable(dispose)

        return direct(subscribe)


def rate_limit(
    min_interval: float, scheduler: abc.SchedulerBase | None = None
) -> RateLimit:
    """Space the subscriptions (model calls) one instance sees ``min_interval``
    seconds apart: the first starts at once, each later one waits for its slot.

    Slots are reserved when a subscription arrives, so concurrent calls queue up one
    interval apart. The wait is a timer on the scheduler (by default the running
    event loop's), so it holds no thread and the call's events stay on the caller's
    loop. Keep one instance for everything it should limit (a fresh instance per
    call limits nothing)::

        class RateLimited(MiddlewareBase):
            def __init__(self) -> None:
                self.limit = aops.rate_limit(0.5)

            def on_model_call(self, agent, ctx, input, next):
                return next(input).pipe(self.limit)
    """
    interval = check_seconds("rate_limit", "min_interval", min_interval, optional=False)
    assert interval is not None
    return RateLimit(interval, scheduler)
