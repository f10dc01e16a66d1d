"""``verify(observable)``: step-by-step expectations on a stream, like Reactor's
``StepVerifier``.

The chain records steps; a terminal call (:meth:`StepVerifier.verify_complete`,
:meth:`~StepVerifier.expect_error`, :meth:`~StepVerifier.expect_error_matches` or
:meth:`~StepVerifier.verify`) subscribes and runs them. Three kinds of source:

- synchronous ones emit during subscription;
- with ``scheduler=TestScheduler()`` the source is subscribed with it and virtual
  time moves only as the steps need it: a step waiting for a signal runs the
  scheduled work up to the next signal, :meth:`~StepVerifier.then_await` and
  :meth:`~StepVerifier.expect_no_event` move the clock by the given seconds. Nothing
  waits in real time;
- sources that emit later, on another thread (``agent.stream()`` from synchronous
  code) or on the running event loop: a step waits up to ``timeout`` real seconds.
  Inside an ``async def`` use the awaitable forms (``await ....averify_complete()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc

from .._rx import running_loop
from ._verify_steps import (
    Run,
    Signal,
    Step,
    Wait,
    await_step,
    cancel_step,
    complete_step,
    consume_step,
    count_step,
    describe,
    error_matches_step,
    error_step,
    matches_step,
    next_step,
    quiet_step,
    then_step,
)

__all__ = ["Signal", "StepVerifier", "Verified", "describe", "verify"]


@dataclass
class Verified:
    """What a successful verification saw: the items, the error the stream ended
    with (for ``expect_error``), every signal, and the seconds it took (virtual ones
    with a TestScheduler)."""

    items: list[Any] = field(default_factory=list)
    error: BaseException | None = None
    signals: list[Signal] = field(default_factory=list)
    elapsed: float = 0.0


def verify(source: Observable[Any], scheduler: rxabc.SchedulerBase | None = None, *,
           timeout: float = 10.0) -> StepVerifier:
    """Start a verification of ``source``: chain expectations, end with
    ``verify_complete()`` or ``expect_error(T)``, which subscribe and run them.

    ``scheduler`` is given to the subscription; a ``TestScheduler`` makes the steps
    run on its virtual clock. Without one, a step waits up to ``timeout`` real
    seconds for a signal that comes later (another thread, the event loop)."""
    return StepVerifier(source, scheduler, timeout=timeout)


class StepVerifier:
    """A chain of expectations on one stream; each method returns the verifier.

    Items given to :meth:`expect_next` match when equal; a class matches its
    instances; two events match when every field but ``id`` and ``created_at``
    agrees (also in the message of an ``AgentResultEvent``). A failed step raises
    ``AssertionError`` naming the step, what it expected, what came, and every
    signal seen so far. The terminal calls return a :class:`Verified`.
    """

    def __init__(self, source: Observable[Any], scheduler: rxabc.SchedulerBase | None = None,
                 *, timeout: float = 10.0) -> None:
        if not isinstance(source, Observable):
            raise TypeError(f"verify() takes an Observable, got {type(source).__name__}")
        self.source = source
        self.scheduler = scheduler
        self.timeout = timeout
        self._steps: list[tuple[str, Step]] = []
        self._ran = False

    def _add(self, name: str, step: Step) -> StepVerifier:
        self._steps.append((name, step))
        return self

    # -- expectations ---------------------------------------------------------------

    def expect_next(self, *items: Any) -> StepVerifier:
        """The next signals are ``on_next`` of ``items``, in order."""
        for item in items:
            self._add(f"expect_next({describe(item)})", next_step(item))
        return self

    def expect_next_matches(self, predicate: Callable[[Any], Any],
                            description: str | None = None) -> StepVerifier:
        """The next signal is an item for which ``predicate`` is true (an
        ``AssertionError`` it raises counts as false, its text is shown)."""
        what = description or str(getattr(predicate, "__name__", "predicate"))
        return self._add(f"expect_next_matches({what})", matches_step(predicate, what))

    def expect_next_count(self, count: int) -> StepVerifier:
        """The next ``count`` signals are items (any)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        return self._add(f"expect_next_count({count})", count_step(count))

    def consume_while(self, predicate: Callable[[Any], Any]) -> StepVerifier:
        """Skip the items for which ``predicate`` is true (none is fine)."""
        return self._add(f"consume_while({getattr(predicate, '__name__', 'predicate')})",
                         consume_step(predicate))

    def expect_no_event(self, seconds: float) -> StepVerifier:
        """No signal for ``seconds`` (one exactly at the end is allowed); with a
        TestScheduler the clock moves by ``seconds``, otherwise this really waits."""
        return self._add(f"expect_no_event({seconds:g})", quiet_step(float(seconds)))

    def then_await(self, seconds: float | None = None) -> StepVerifier:
        """Let ``seconds`` pass (virtual with a TestScheduler; ``None``: run every
        scheduled piece of work). Signals arriving meanwhile wait for the next steps."""
        name = "then_await()" if seconds is None else f"then_await({seconds:g})"
        return self._add(name, await_step(seconds))

    def then(self, action: Callable[[], Any]) -> StepVerifier:
        """Run ``action()`` (push into a subject, interrupt an agent ...)."""
        return self._add(f"then({getattr(action, '__name__', 'action')})", then_step(action))

    def then_cancel(self) -> StepVerifier:
        """Dispose the subscription; end the chain with :meth:`verify`."""
        return self._add("then_cancel()", cancel_step)

    # -- terminal -------------------------------------------------------------------

    def verify_complete(self) -> Verified:
        """Run the steps; the stream must then complete."""
        return self._run_sync(("verify_complete()", complete_step))

    def expect_error(self, error_type: type[BaseException] = Exception) -> Verified:
        """Run the steps; the stream must then fail with ``error_type``."""
        return self._run_sync(error_step(error_type))

    def expect_error_matches(self, predicate: Callable[[BaseException], Any]) -> Verified:
        """Run the steps; the stream must then fail with an error ``predicate`` accepts."""
        return self._run_sync(error_matches_step(predicate))

    def verify(self) -> Verified:
        """Run the steps and nothing more (after :meth:`then_cancel`, say)."""
        return self._run_sync(None)

    async def averify_complete(self) -> Verified:
        """:meth:`verify_complete` for sources that emit on the running loop."""
        return await self._run_async(("verify_complete()", complete_step))

    async def aexpect_error(self, error_type: type[BaseException] = Exception) -> Verified:
        """:meth:`expect_error` for sources that emit on the running loop."""
        return await self._run_async(error_step(error_type))

    async def aexpect_error_matches(self, predicate: Callable[[BaseException], Any]) -> Verified:
        """:meth:`expect_error_matches` for sources that emit on the running loop."""
        return await self._run_async(error_matches_step(predicate))

    async def averify(self) -> Verified:
        """:meth:`verify` for sources that emit on the running loop."""
        return await self._run_async(None)

    # -- running --------------------------------------------------------------------

    def _program(self, run: Run, final: tuple[str, Step] | None) -> Wait:
        steps = [*self._steps, *([final] if final is not None else [])]
        run.step_name = "subscribe"
        run.subscribe()
        for i, (name, step) in enumerate(steps, 1):
            run.step_name = f"{i} of {len(steps)}, {name}"
            yield from step(run)
        return Verified(
            items=[s.value for s in run.signals if s.kind == "next"],
            error=next((s.value for s in run.signals if s.kind == "error"), None),
            signals=list(run.signals),
            elapsed=run.now() - run.origin,
        )

    def _start(self) -> Run:
        if self._ran:
            raise RuntimeError("this verify() chain already ran; build a new one")
        self._ran = True
        return Run(self.source, self.scheduler, self.timeout)

    def _run_sync(self, final: tuple[str, Step] | None) -> Verified:
        run = self._start()
        program = self._program(run, final)
        try:
            request = next(program)
            while True:
                deadline, seen = request
                if running_loop() is not None:
                    raise RuntimeError(
                        "the stream emits later and this thread runs an event loop, which "
                        "a blocking check would stall; use the awaitable form "
                        "(`await ....averify_complete()`, `aexpect_error(...)`, `averify()`)"
                    )
                with run.lock:  # seen < 0: a plain wait until the deadline
                    while (seen < 0 or len(run.signals) == seen) and \
                            time.monotonic() < deadline:
                        run.lock.wait(max(0.0, deadline - time.monotonic()))
                    arrived = len(run.signals) > seen
                request = program.send(arrived)
        except StopIteration as stop:
            result: Verified = stop.value
            return result
        finally:
            run.dispose()

    async def _run_async(self, final: tuple[str, Step] | None) -> Verified:
        run = self._start()
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        loop_thread = threading.get_ident()

        def wake() -> None:
            if threading.get_ident() == loop_thread:
                event.set()
            else:
                loop.call_soon_threadsafe(event.set)

        run.wakeup = wake
        program = self._program(run, final)
        try:
            request = next(program)
            while True:
                deadline, seen = request
                event.clear()
                if seen < 0:
                    await asyncio.sleep(max(0.0, deadline - time.monotonic()))
                elif len(run.signals) == seen:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(event.wait(),
                                               max(0.0, deadline - time.monotonic()))
                request = program.send(len(run.signals) > seen)
        except StopIteration as stop:
            result: Verified = stop.value
            return result
        finally:
            run.wakeup = None
            run.dispose()

    def __del__(self) -> None:
        try:
            if self._steps and not self._ran:
                warnings.warn(
                    f"a verify() chain of {len(self._steps)} step(s) never ran: end it with "
                    "verify_complete(), expect_error(...) or verify()",
                    RuntimeWarning,
                    stacklevel=2,
                )
        except Exception:  # never raise from a finalizer
            pass


