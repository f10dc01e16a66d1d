"""``MiddlewareHarness``: one hook of one middleware, run alone on virtual time.

The harness calls the hook the way the runtime does (the plan adapts the ctx-less
form and ``async def`` hooks and checks what an onion hook returns; a non-onion hook's
answer is settled by its point's own settle function), gives it a scripted ``next``
and subscribes what the hook returns with a ``reactivex.testing.TestScheduler`` at
virtual time 0. Time-based operators that use the subscription's scheduler (RxPY's
default) run on that clock, so a delay of an hour passes in microseconds. The run
happens on a private event loop, so ``async def`` hooks and loop callbacks work;
virtual time moves only when the loop has nothing left to do. What the harness knows
of a point (its default input and upstream, what its hook is handed) is the point's
row in ``rx_agent.middleware._points``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import Disposable
from reactivex.testing import TestScheduler

from .._rx import running_loop
from ..agent import ReActAgent
from ..context import AgentState, RuntimeContext
from ..event import AgentEvent
from ..message import Msg
from ..middleware._notify import Watch
from ..middleware._plan import ExecutionPlan
from ..middleware._points import SPECS, PointKind
from ..middleware.base import ExtensionPoint, MiddlewareBase
from ..model.scripted import ScriptedModel
from . import _sequences
from ._clock import MAX_STEPS, next_due, run_next, settle_loop
from ._grammar import assert_well_formed
from ._scripted import Upstream, to_observable
from ._sequences import DEFAULT_SOURCE

__all__ = ["HarnessResult", "MiddlewareHarness", "UpstreamCall"]


@dataclass
class UpstreamCall:
    """One subscription of the scripted ``next``: with which input, when, and how it
    ended (``disposed_at`` is set when the hook disposed it before it terminated)."""

    input: Any
    subscribed_at: float
    ended_at: float | None = None
    disposed_at: float | None = None


@dataclass
class HarnessResult:
    """What one :meth:`MiddlewareHarness.run` saw.

    ``events`` is what the hook emitted (for ``on_system_prompt``: the prompt),
    ``timeline`` the same as ``(virtual seconds, item)`` pairs; ``error`` the error
    the hook's stream ended with (``None`` when it completed), ``completed`` whether
    it completed, ``ended_at`` when it terminated. ``inputs`` are the inputs the hook
    passed to ``next``, ``upstream`` one :class:`UpstreamCall` per subscription of
    ``next`` (``subscriptions`` counts them: retries re-subscribe). ``ctx``, ``state``
    and ``input_messages`` are what the hook was given (after any change it made).
    """

    point: ExtensionPoint
    input: Any
    ctx: RuntimeContext
    agent: Any
    state: AgentState
    timeline: list[tuple[float, Any]] = field(default_factory=list)
    error: BaseException | None = None
    completed: bool = False
    ended_at: float | None = None
    inputs: list[Any] = field(default_factory=list)
    upstream: list[UpstreamCall] = field(default_factory=list)
    input_messages: list[Msg] | None = None

    @property
    def events(self) -> list[Any]:
        return [item for _t, item in self.timeline]

    @property
    def subscriptions(self) -> int:
        return len(self.upstream)

    @property
    def terminated(self) -> bool:
        return self.completed or self.error is not None

    def assert_well_formed(self) -> None:
        """Fail unless the emitted events keep the runtime's block and call grammar
        (see :func:`~rx_agent.testing.assert_well_formed`; all closed when the hook's
        stream completed)."""
        assert_well_formed(self.events, complete=self.completed)

    def times(self, kind: type | None = None) -> list[float]:
        """The virtual times of the emitted items (of class ``kind`` when given)."""
        return [t for t, item in self.timeline if kind is None or isinstance(item, kind)]


class MiddlewareHarness:
    """Runs one hook of ``mw`` (at ``point``) in isolation against a scripted upstream.

    ``agent`` defaults to a ``ReActAgent`` named ``"agent"`` with ``mw`` and a
    ``ScriptedModel``; ``ctx`` to a ``RuntimeContext`` whose ``agent_state`` is an
    empty session. Each :meth:`run` uses a new ``TestScheduler`` (``scheduler``).
    """

    def __init__(
        self,
        mw: MiddlewareBase,
        point: ExtensionPoint | str,
        *,
        agent: Any = None,
        ctx: RuntimeContext | None = None,
    ) -> None:
        self.point = point if isinstance(point, ExtensionPoint) else ExtensionPoint(point)
        self.spec = SPECS[self.point]
        self.mw = mw
        self.plan = ExecutionPlan([mw])  # checks the middleware as an agent build would
        if not self.plan.participants(self.point):
            raise ValueError(
                f"{type(mw).__name__} does not take part in {self.point.value} "
                "(its active_points() leave it out), so the runtime never calls that hook"
            )
        self.model = ScriptedModel(["hello"])
        self.agent = agent if agent is not None else ReActAgent(
            name=DEFAULT_SOURCE, model=self.model, middlewares=[mw])
        self._ctx = ctx
        self.scheduler = TestScheduler()

    # -- inputs ---------------------------------------------------------------------

    def default_input(self) -> Any:
        """The input ``run`` gives the hook when none is passed."""
        sample = self.spec.sample_input
        if sample is None:
            raise TypeError(f"{self.point.value} has no default input; pass input=")
        return sample(self.agent.model, DEFAULT_SOURCE)

    def default_upstream(self, inp: Any) -> Upstream:
        """What ``next`` streams when ``run`` is given no upstream."""
        sample = self.spec.sample_upstream
        return [] if sample is None else sample(inp, _sequences)

    # -- running --------------------------------------------------------------------

    def run(
        self,
        upstream: Upstream = None,
        input: Any = None,
        *,
        legend: Mapping[str, Any] | None = None,
        timespan: float = 0.1,
        error: BaseException | None = None,
        starts: Sequence[float] = (0.0,),
        dispose_at: float | None = None,
        until: float | None = None,
        timeout: float = 10.0,
    ) -> HarnessResult:
        """Invoke the hook and run its stream until it ends and no work is left.

        ``upstream`` is what ``next`` streams (see :data:`Upstream`; a marble's
        characters come from ``legend``, one frame is ``timespan`` virtual seconds,
        ``#`` fails with ``error``); ``input`` the hook's input (default
        :meth:`default_input`). ``starts`` invokes the hook once per time given (a
        rate limiter sees several calls); ``dispose_at`` disposes the subscription
        then; ``until`` stops the clock there (for streams that never end). ``timeout``
        bounds the real seconds spent waiting for asyncio timers a hook started.
        Call it from synchronous code; inside an event loop ``await`` :meth:`arun`.
        """
        if running_loop() is not None:
            raise RuntimeError(
                "MiddlewareHarness.run() was called inside a running event loop; "
                "use `await harness.arun(...)` there"
            )
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(self.arun(
                upstream, input, legend=legend, timespan=timespan, error=error,
                starts=starts, dispose_at=dispose_at, until=until, timeout=timeout))
        finally:
            loop.close()

    async def arun(
        self,
        upstream: Upstream = None,
        input: Any = None,
        *,
        legend: Mapping[str, Any] | None = None,
        timespan: float = 0.1,
        error: BaseException | None = None,
        starts: Sequence[float] = (0.0,),
        dispose_at: float | None = None,
        until: float | None = None,
        timeout: float = 10.0,
    ) -> HarnessResult:
        """:meth:`run` on the running event loop."""
        if not starts:
            raise ValueError("starts must name at least one virtual time")
        if upstream is not None and self.point.kind != "onion":
            raise TypeError(f"{self.point.value} has no upstream; pass its value as input=")
        if upstream is not None and not callable(upstream):
            to_observable(upstream, legend, timespan, error)  # a mistake in the script raises
        scheduler = self.scheduler = TestScheduler()
        inp = self.default_input() if input is None else input
        ctx = self._ctx or RuntimeContext(session_id=DEFAULT_SOURCE)
        if ctx.agent_state is None:
            ctx.agent_state = AgentState(session_id=ctx.session_id or DEFAULT_SOURCE)
        result = HarnessResult(self.point, inp, ctx, self.agent, ctx.agent_state)
        pending = [len(starts)]
        subscriptions: list[rxabc.DisposableBase] = []

        def record(item: Any) -> None:
            result.timeline.append((float(scheduler.clock), item))

        def ended(exc: BaseException | None) -> None:
            pending[0] -= 1
            if exc is not None and result.error is None:
                result.error = exc
            if pending[0] == 0:
                result.ended_at = float(scheduler.clock)
                result.completed = result.error is None

        def invoke(_s: rxabc.SchedulerBase, _state: Any = None) -> None:
            try:
                source = self._source(result, inp, upstream, legend, timespan, error)
            except Exception as exc:
                ended(exc)
                return
            subscriptions.append(source.subscribe(
                record, ended, lambda: ended(None), scheduler=scheduler))

        for at in starts:
            scheduler.schedule_absolute(float(at), invoke)
        if dispose_at is not None:
            def dispose(_s: rxabc.SchedulerBase, _state: Any = None) -> None:
                for sub in subscriptions:
                    sub.dispose()
            scheduler.schedule_absolute(float(dispose_at), dispose)
        await self._drive(scheduler, until, timeout, lambda: pending[0] == 0)
        return result

    async def _drive(self, scheduler: TestScheduler, until: float | None, timeout: float,
                     finished: Callable[[], bool]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        steps = 0
        while True:
            await settle_loop()
            if finished():  # every invocation ended: what is still scheduled is not ours
                break
            due = next_due(scheduler)
            if due is not None and (until is None or due <= until):
                run_next(scheduler)
                steps += 1
                if steps > MAX_STEPS:
                    raise RuntimeError(
                        f"the hook scheduled more than {MAX_STEPS} actions by "
                        f"{scheduler.clock} s of virtual time: pass until=<seconds> to stop "
                        "the clock of a stream that never ends"
                    )
                continue
            # Nothing due on the virtual clock: wait (really) only for timers the hook
            # set on the event loop itself, within the timeout.
            timers = getattr(loop, "_scheduled", ())  # CPython's timer heap
            if loop.time() < deadline and any(not t.cancelled() for t in timers):
                await asyncio.sleep(0.001)
                continue
            break
        if until is not None and until > scheduler.clock:
            scheduler.sleep(until - scheduler.clock)

    def _source(self, result: HarnessResult, inp: Any, upstream: Upstream,
                legend: Mapping[str, Any] | None, timespan: float,
                error: BaseException | None) -> Observable[Any]:
        spec = self.spec
        agent, ctx = self.agent, result.ctx
        if spec.kind is PointKind.ONION:
            core = self._core(result, upstream, legend, timespan, error)
            return self.plan.wrap(spec.point, agent, ctx, core)(inp)
        handed = inp if spec.given is None else spec.given(inp)
        if "input_messages" in spec.params:
            result.input_messages = handed
        (_mw, hook), = self.plan.hooks(spec.point)  # adapted as the runtime calls it
        value = hook(agent, ctx, *spec.arguments(result.state, handed))
        settle = spec.settle
        assert settle is not None, f"{spec.point.value}: a non-onion point names its settle"
        label, method = type(self.mw).__name__, spec.point.value
        return _settled(lambda watch: settle(label, method, value, watch))

    def _core(self, result: HarnessResult, upstream: Upstream,
              legend: Mapping[str, Any] | None, timespan: float,
              error: BaseException | None) -> Callable[[Any], Observable[AgentEvent]]:
        scheduler = self.scheduler

        def core(inp: Any) -> Observable[AgentEvent]:
            result.inputs.append(inp)

            def subscribe(observer: rxabc.ObserverBase[Any],
                          _scheduler: rxabc.SchedulerBase | None = None) -> rxabc.DisposableBase:
                call = UpstreamCall(inp, float(scheduler.clock))
                result.upstream.append(call)
                spec = upstream if upstream is not None else self.default_upstream(inp)
                if callable(spec) and not isinstance(spec, Observable):
                    spec = spec(inp)
                source = to_observable(spec, legend, timespan, error)

                def on_error(exc: Exception) -> None:
                    call.ended_at = float(scheduler.clock)
                    observer.on_error(exc)

                def on_completed() -> None:
                    call.ended_at = float(scheduler.clock)
                    observer.on_completed()

                # Always the virtual clock, whatever the hook subscribed with.
                inner = source.subscribe(observer.on_next, on_error, on_completed,
                                         scheduler=scheduler)

                def dispose() -> None:
                    if call.ended_at is None and call.disposed_at is None:
                        call.disposed_at = float(scheduler.clock)
                    inner.dispose()

                return Disposable(dispose)

            return Observable(subscribe)

        return core


def _settled(settle: Callable[[Watch], Awaitable[Any]]) -> Observable[Any]:
    """A hook's answer being settled, as a stream: per subscription, ``settle`` runs
    on the running loop, watched on the subscriber's scheduler; it emits the answer's
    items as they arrive and ends as the settling does. Disposing cancels it."""

    def subscribe(observer: rxabc.ObserverBase[Any],
                  scheduler: rxabc.SchedulerBase | None = None) -> rxabc.DisposableBase:
        async def run() -> None:
            try:
                await settle(Watch(scheduler, observer.on_next))
            except Exception as exc:
                observer.on_error(exc)
                return
            observer.on_completed()

        task = asyncio.get_running_loop().create_task(run())

        def cancel() -> None:
            task.cancel()

        return Disposable(cancel)

    return Observable(subscribe)
