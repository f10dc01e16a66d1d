"""``MiddlewareHarness``: one hook of one middleware, run alone on virtual time.

The harness calls the hook the way the runtime does (the plan adapts the ctx-less
form and ``async def`` hooks and checks what the hook returns), gives it a scripted
``next`` and subscribes what the hook returns with a ``reactivex.testing.TestScheduler``
at virtual time 0. Time-based operators that use the subscription's scheduler (RxPY's
default) run on that clock, so a delay of an hour passes in microseconds. The run
happens on a private event loop, so ``async def`` hooks and loop callbacks work;
virtual time moves only when the loop has nothing left to do.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import reactivex
from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import Disposable
from reactivex.testing import TestScheduler

from .._rx import running_loop
from ..agent import ReActAgent
from ..context import AgentState, RuntimeContext
from ..event import AgentEvent
from ..message import GenerateReason, Msg, Role, ToolUseBlock
from ..middleware._forms import FULL, form, without_ctx
from ..middleware._layers import INPUT_TYPES
from ..middleware._plan import ExecutionPlan
from ..middleware.base import ExtensionPoint, MiddlewareBase
from ..middleware.inputs import (
    ActingInput,
    AgentFinishOutcome,
    AgentInput,
    ModelCallInput,
    ReasoningInput,
)
from ..model.scripted import ScriptedModel
from ..options import GenerateOptions
from ._clock import MAX_STEPS, next_due, run_next, settle_loop
from ._grammar import assert_well_formed
from ._scripted import Upstream, answer, one_str, to_observable
from ._sequences import DEFAULT_SOURCE, agent_reply, text_round, tool_results

__all__ = ["HarnessResult", "MiddlewareHarness", "UpstreamCall"]

DEFAULT_PROMPT = "You are a helpful assistant."


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
        user = Msg(role=Role.USER, content="hello")
        system = Msg(role=Role.SYSTEM, content=DEFAULT_PROMPT)
        point = self.point
        if point is ExtensionPoint.ON_AGENT:
            return AgentInput((user,))
        if point is ExtensionPoint.ON_REASONING:
            return ReasoningInput((system, user), (), GenerateOptions(), 1)
        if point is ExtensionPoint.ON_MODEL_CALL:
            return ModelCallInput((system, user), (), GenerateOptions(), self.agent.model)
        if point is ExtensionPoint.ON_ACTING:
            return ActingInput((ToolUseBlock(id="call_1", name="lookup", input={"q": "x"}),))
        if point is ExtensionPoint.ON_SYSTEM_PROMPT:
            return DEFAULT_PROMPT
        if point.kind == "onion":  # on_compress_context: the session context to compress
            return INPUT_TYPES[point](messages=(user,), model=self.agent.model, system=system)
        if point is ExtensionPoint.ON_AGENT_STATE_READY:
            return [user]
        reply = Msg(role=Role.ASSISTANT, content="hello", name=DEFAULT_SOURCE,
                    generate_reason=GenerateReason.MODEL_STOP)
        return AgentFinishOutcome(result=reply, reason=GenerateReason.MODEL_STOP)

    def default_upstream(self, inp: Any) -> Upstream:
        """What ``next`` streams when ``run`` is given no upstream."""
        if self.point is ExtensionPoint.ON_ACTING:
            return tool_results(*inp.tool_calls)
        if self.point is ExtensionPoint.ON_AGENT:
            return agent_reply(text_round("hello"))
        if self.point in (ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_REASONING):
            return text_round("hello")
        return []  # context compression: the context was left as it was

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
        point = self.point
        agent, ctx = self.agent, result.ctx
        if point.kind == "onion":
            core = self._core(result, upstream, legend, timespan, error)
            return self.plan.wrap(point, agent, ctx, core)(inp)
        hook = getattr(self.mw, point.value)
        label = type(self.mw).__name__
        if form(label, point, hook) != FULL:
            hook = without_ctx(hook)
        if point is ExtensionPoint.ON_SYSTEM_PROMPT:
            if not isinstance(inp, str):
                raise TypeError(f"on_system_prompt takes the current prompt (a str), got {inp!r}")
            return one_str(label, answer(hook(agent, ctx, inp)))
        if point is ExtensionPoint.ON_AGENT_STATE_READY:
            messages = list(inp)
            result.input_messages = messages
            value = hook(agent, ctx, result.state, messages)
            # The runtime awaits an awaitable and ignores any other answer.
            return answer(value) if inspect.isawaitable(value) else reactivex.empty()
        if not isinstance(inp, AgentFinishOutcome):
            raise TypeError(f"on_agent_finish takes an AgentFinishOutcome, got {inp!r}")
        value = hook(agent, ctx, inp)
        if value is not None and not isinstance(value, Observable) and \
                not inspect.isawaitable(value):
            raise TypeError(f"{label}.on_agent_finish() returned {type(value).__name__}; "
                            "expected None, an Observable or an awaitable")
        return answer(value)

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
