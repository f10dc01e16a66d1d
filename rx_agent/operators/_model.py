"""Calling ``next`` again: ``retry_model`` and ``fallback_to`` for ``on_model_call``.

Both wrap the hook's ``next`` (a handler in, a handler out), so they compose like the
onion itself and read as Reactor's ``retryWhen`` / ``onErrorResume`` on the call::

    def on_model_call(self, agent, ctx, input, next):
        return aops.retry_model(3)(next, input)

    # Or composed: three attempts on the primary, then the backup (three attempts).
    return aops.fallback_to(backup)(aops.retry_model(3)(next))(input)

Only a failure before the first content event (text, thinking, tool call, data) is
retried or failed over, as the runtime's own retries do: once content reached the
caller, another attempt would show it twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

from reactivex import Observable, abc
from reactivex.disposable import Disposable, SerialDisposable, SingleAssignmentDisposable

from ..event import AgentEvent
from ..middleware.inputs import ModelCallInput
from ._base import CONTENT, check_seconds, default_scheduler, direct, subscribe_to

__all__ = ["NextWrapper", "fallback_to", "retry_model"]

Next = Callable[[ModelCallInput], Observable[AgentEvent]]
# attempt number (1-based) that failed, its error -> the next input, or None: give up.
Decide = Callable[[int, Exception], "tuple[ModelCallInput, float] | None"]


class NextWrapper:
    """What :func:`retry_model` and :func:`fallback_to` return: call it with the hook's
    ``next`` and get a ``next`` that retries (or fails over), or with
    ``(next, input)`` to get the call's events at once."""

    __slots__ = ("_name", "_plan", "_scheduler")

    def __init__(
        self,
        name: str,
        plan: Callable[[ModelCallInput], Decide],
        scheduler: abc.SchedulerBase | None = None,
    ) -> None:
        self._name = name
        self._plan = plan
        self._scheduler = scheduler

    @overload
    def __call__(self, next: Next, input: None = None) -> Next: ...
    @overload
    def __call__(self, next: Next, input: ModelCallInput) -> Observable[AgentEvent]: ...
    def __call__(
        self, next: Next, input: ModelCallInput | None = None
    ) -> Next | Observable[AgentEvent]:
        if not callable(next):
            raise TypeError(f"{self._name}(...) wraps the hook's next, not "
                            f"{type(next).__name__}")
        if input is None:

            def wrapped(inp: ModelCallInput) -> Observable[AgentEvent]:
                return self._run(next, inp)

            return wrapped
        return self._run(next, input)

    def __repr__(self) -> str:
        return f"<{self._name}>"

    def _run(self, next: Next, inp: ModelCallInput) -> Observable[AgentEvent]:
        if not isinstance(inp, ModelCallInput):
            raise TypeError(f"{self._name} is for on_model_call: next() was given "
                            f"{type(inp).__name__}, expected ModelCallInput")
        return _attempts(next, inp, self._plan(inp), self._scheduler)


def _attempts(
    next: Next, inp: ModelCallInput, decide: Decide, scheduler_given: abc.SchedulerBase | None
) -> Observable[AgentEvent]:

    def subscribe(
        observer: abc.ObserverBase[AgentEvent], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        current = SerialDisposable()
        attempt = 0
        seen = False
        disposed = False
        forward = observer.on_next
        content = CONTENT

        def start(use: ModelCallInput) -> None:
            nonlocal attempt, seen
            attempt += 1
            seen = False
            # One holder per attempt: a retry scheduled from inside this subscribe call
            # replaces it, and the late assignment then disposes the spent attempt.
            holder = SingleAssignmentDisposable()
            current.disposable = holder
            try:
                source = next(use)
                holder.disposable = subscribe_to(source, on_next, on_error, observer.on_completed,
                                                 scheduler)
            except Exception as exc:
                on_error(exc)

        def on_next(event: AgentEvent) -> None:
            nonlocal seen
            if not seen and type(event) in content:
                seen = True
            forward(event)

        def on_error(exc: Exception) -> None:
            if disposed:
                return
            if seen:
                observer.on_error(exc)
                return
            try:
                again = decide(attempt, exc)
            except Exception as failure:
                observer.on_error(failure)
                return
            if again is None:
                observer.on_error(exc)
                return
            use, delay = again
            if delay <= 0:
                start(use)
                return
            sched = default_scheduler(scheduler_given, scheduler)

            def later(_: abc.SchedulerBase, __: Any = None) -> None:
                if not disposed:
                    start(use)

            current.disposable = sched.schedule_relative(delay, later)

        def dispose() -> None:
            nonlocal disposed
            disposed = True
            current.dispose()

        start(inp)
        return Disposable(dispose)

    return direct(subscribe)


def _retryable(error: BaseException) -> bool:
    # The runtime's rule (RetryPolicy): a typed error says; anything else may be tried.
    return bool(getattr(error, "retryable", True))


def retry_model(
    n: int,
    backoff: float | Callable[[int], float] = 0.25,
    max_backoff: float = 8.0,
    scheduler: abc.SchedulerBase | None = None,
) -> NextWrapper:
    """Call ``next(input)`` up to ``n`` times in all (``n`` counts every attempt, like
    ``max_retries``) while it fails before its first content event with a retryable
    error (``error.retryable``, true for timeouts, 429 and 5xx; any error without the
    attribute).

    ``backoff`` is the wait before the second attempt, doubling for each later one up
    to ``max_backoff`` (no jitter: pass a function to add some), or a function
    ``backoff(failed_attempt) -> seconds``. A server's ``retry_after`` wins when
    longer. Waits run on ``scheduler``, else the scheduler given at subscription,
    else the running event loop. The error after the last attempt is the last
    attempt's.

    Each attempt enters the inner layers again, down to the model call with its own
    built-in ``max_retries``: a model that keeps failing is tried ``n`` x
    ``max_retries`` times. This is for failures the built-in retries cannot see (a
    :func:`with_timeout` inside it, an inner middleware's error).
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"retry_model(n): n must be an int, not {type(n).__name__}")
    if n <= 0:
        raise ValueError(f"retry_model(n): n counts every attempt and must be >= 1, got {n}")
    cap = check_seconds("retry_model", "max_backoff", max_backoff, optional=False)
    assert cap is not None
    if callable(backoff):
        delay_of: Callable[[int], Any] = backoff
    else:
        first = check_seconds("retry_model", "backoff", backoff, optional=False)
        assert first is not None

        def delay_of(attempt: int) -> Any:
            return min(cap, first * 2.0 ** (attempt - 1))

    def plan(inp: ModelCallInput) -> Decide:
        def decide(attempt: int, error: Exception) -> tuple[ModelCallInput, float] | None:
            if attempt >= n or not _retryable(error):
                return None
            delay = float(delay_of(attempt))
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > delay:
                delay = float(retry_after)
            return inp, delay

        return decide

    return NextWrapper(f"retry_model({n})", plan, scheduler)


def fallback_to(
    *models: Any, listener: Callable[[Any, Exception], Any] | None = None
) -> NextWrapper:
    """When ``next(input)`` fails before its first content event, call
    ``next(input.with_(model=m))`` with each backup model in turn (any error: a
    backup from another provider helps with a rejected key too). The error after
    the last model is the last model's.

    ``listener(failed_model, error)`` is called before each switch (as the builder's
    ``failover_listener``); if it raises, the call fails with that exception, like
    any callback of these operators.

    Unlike the builder's ``fallback_model``, this runs in the middleware chain: the
    inner layers see the backup call, and each backup gets the built-in
    ``max_retries`` of its own.
    """
    if not models:
        raise TypeError("fallback_to() needs at least one backup model")
    for model in models:
        if not callable(getattr(model, "stream", None)):
            raise TypeError(f"fallback_to(): {model!r} is not a chat model (it has no stream())")
    if listener is not None and not callable(listener):
        raise TypeError(f"fallback_to(): listener must be callable, not "
                        f"{type(listener).__name__}")
    backups: Sequence[Any] = models

    def plan(inp: ModelCallInput) -> Decide:
        def decide(attempt: int, error: Exception) -> tuple[ModelCallInput, float] | None:
            if attempt > len(backups):
                return None
            if listener is not None:
                listener(inp.model if attempt == 1 else backups[attempt - 2], error)
            return inp.with_(model=backups[attempt - 1]), 0.0

        return decide

    names = ", ".join(getattr(m, "name", type(m).__name__) for m in models)
    return NextWrapper(f"fallback_to({names})", plan)
