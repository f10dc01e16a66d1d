"""What the steps of one call share: running a step's stream, interrupts, the
closers every ending shares.

A step (:mod:`._step`, :mod:`._machine`) that runs a hook chain's stream (a
reasoning round, an acting batch, the summary call) runs it to completion through
:meth:`CallScope.run_step` while its events go to the caller. Everything here
happens on the call's event-loop thread (see ``docs/internals.md``, "Threading").
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from reactivex import Observable
from reactivex import abc as rxabc

from .._record import new_id
from .._rx import LoopAffinity, subscribe_observer
from ..context import AgentState, RuntimeContext
from ..event import AgentEvent, RequestContinueEvent, RequestStopEvent
from ..message import GenerateReason, Msg, Role, ToolResultState
from ..middleware.base import Agent, ExtensionPoint
from ..middleware.inputs import ModelCallInput
from ..middleware.types import ModelLike
from ..tool._execute import execute
from ..tool._ledger import Ledger
from ._blocks import MessageAccumulator
from ._config import AgentConfig
from ._results import close_unanswered, emit_result_events
from ._step import Step, ToolRunner

__all__ = ["EVENT_TYPES", "INTERRUPTED_TEXT", "CallScope", "Captures", "Interrupted", "is_event"]

# Which thread a signal arrives on decides whether it must hop back to the loop.
# get_ident is ~5x cheaper than asyncio's get_running_loop (which checks the pid).
_thread_id = threading.get_ident

_INTERRUPTED_TEXT = "The reply was interrupted."
INTERRUPTED_TEXT = "Interrupted before it finished."
"""The result of a tool call an interrupt left without one."""

# Event classes seen so far: an exact-type set lookup is much cheaper per event than
# isinstance against pydantic's ABC metaclass; a new subclass is added on first sight.
EVENT_TYPES: set[type] = set()
# The subset that steers the loop (stop and continue requests, subclasses included),
# filled by is_event alongside EVENT_TYPES, so the watch is one set lookup per event.
_CONTROL_TYPES: set[type] = set()


def is_event(item: object) -> bool:
    """Whether ``item`` is an :class:`AgentEvent`. Per-event paths test
    ``type(item) in EVENT_TYPES`` inline first and call this only for a new class."""
    if type(item) in EVENT_TYPES:
        return True
    if isinstance(item, AgentEvent):
        cls = type(item)
        if issubclass(cls, (RequestStopEvent, RequestContinueEvent)):
            _CONTROL_TYPES.add(cls)
        EVENT_TYPES.add(cls)
        return True
    return False


class Captures(Protocol):
    """A round whose ``capture`` (while not ``None``) is fed what leaves the chain."""

    capture: MessageAccumulator | None


class Interrupted(Exception):
    """Internal: the current step was cut short by ``agent.interrupt``."""


class _StepSink(asyncio.Future[None]):
    """One running step (see :meth:`CallScope.run_step`): the observer of its stream,
    the future it completes (itself: one object per step) and the stream's
    subscription.

    A middleware may move the stream to another thread (observe_on a thread pool);
    signals are brought back to the loop so the call stays single-threaded."""

    __slots__ = ("emit", "loop_thread", "scope", "subscription", "where")

    def __init__(self, scope: CallScope, where: LoopAffinity) -> None:
        super().__init__(loop=where.loop)
        self.scope = scope
        self.emit = scope.emit
        self.loop_thread = where.thread
        self.where = where
        self.subscription: rxabc.DisposableBase | None = None

    def late(self, fn: Callable[..., None], *args: Any) -> None:
        if not self.done():
            fn(*args)

    def on_next(self, event: AgentEvent) -> None:
        raise NotImplementedError  # pragma: no cover

    def on_error(self, exc: Exception) -> None:
        if _thread_id() != self.loop_thread:
            self.where.hop(self.late, self.on_error, exc)
        elif not self.done():
            self.set_exception(exc)

    def on_completed(self) -> None:
        if _thread_id() != self.loop_thread:
            self.where.hop(self.late, self.on_completed)
        elif not self.done():
            self.set_result(None)


class _CoreSink(_StepSink):
    __slots__ = ()

    def on_next(self, event: AgentEvent) -> None:
        if _thread_id() != self.loop_thread:
            self.where.hop(self.late, self.on_next, event)
            return
        self.emit(event)


class _ActingSink(_StepSink):
    __slots__ = ()

    def on_next(self, event: AgentEvent) -> None:
        if _thread_id() != self.loop_thread:
            self.where.hop(self.late, self.on_next, event)
            return
        if not self.done():  # a cut batch's cancelled tools may finish late
            self.emit(event)


class _HookedSink(_StepSink):
    """A stream that left a middleware: its items are checked, stop and continue
    requests watched, and (while the round has one) the capture fed."""

    __slots__ = ("acting", "point", "rnd")

    def __init__(self, scope: CallScope, where: LoopAffinity, point: ExtensionPoint,
                 rnd: Captures | None) -> None:
        super().__init__(scope, where)
        self.point = point
        self.acting = point is ExtensionPoint.ON_ACTING
        self.rnd = rnd

    def on_next(self, event: AgentEvent) -> None:
        if _thread_id() != self.loop_thread:
            self.where.hop(self.late, self.on_next, event)
            return
        if self.done():  # cut short: late events of a cancelled step
            return
        if type(event) not in EVENT_TYPES and not is_event(event):
            self.set_exception(self.scope.not_an_event(self.point, event, self.rnd))
            return
        if type(event) in _CONTROL_TYPES:
            self.scope._control(event, self.acting)
        rnd = self.rnd
        if rnd is not None:
            capture = rnd.capture  # dropped once the model answers
            if capture is not None:
                capture.feed(event)
        self.emit(event)


class _LedgerSink(_HookedSink):
    """What leaves ``on_acting``'s outermost hook: checked as any hook's stream, then
    handed to the batch's ledger, which delivers it or refuses it."""

    __slots__ = ("ledger",)

    def __init__(self, scope: CallScope, where: LoopAffinity, ledger: Ledger) -> None:
        super().__init__(scope, where, ExtensionPoint.ON_ACTING, None)
        self.ledger = ledger

    def on_next(self, event: AgentEvent) -> None:
        if _thread_id() != self.loop_thread:
            self.where.hop(self.late, self.on_next, event)
            return
        if self.done():  # cut short: late events of a cancelled step
            return
        if type(event) not in EVENT_TYPES and not is_event(event):
            self.set_exception(self.scope.not_an_event(ExtensionPoint.ON_ACTING, event))
            return
        if type(event) in _CONTROL_TYPES:
            self.scope._control(event, True)
        error = self.ledger.out(event)
        if error is not None:
            self.set_exception(error)


class CallScope:
    """The per-call facts and controls every step uses."""

    __slots__ = (
        "affinity",
        "agent",
        "checkpoint",
        "config",
        "continue_request",
        "ctx",
        "emit",
        "execute_tool",
        "hooked",
        "interrupt_msg",
        "interrupted",
        "loop",
        "model_stream",
        "quiet",
        "response_tool",
        "sealed",
        "sink",
        "source",
        "state",
        "step",
        "stop_request",
        "tool_ctx",
        "toolkit",
    )

    def __init__(
        self, agent: Agent, config: AgentConfig, ctx: RuntimeContext, tool_ctx: RuntimeContext
    ) -> None:
        self.agent = agent  # handed to hooks; the steps read ``config`` only
        self.config = config
        plan = config.plan
        # Which step streams pass through a middleware (their items are checked and
        # stop requests watched); the others are the runtime's own and need neither.
        self.hooked = plan.hooked
        # Only the result event reaches anybody (acall with no on_agent layer): the
        # steps may skip building events no layer reads.
        self.quiet = False
        self.ctx = ctx
        self.tool_ctx = tool_ctx
        self.source = config.name
        self.loop: asyncio.AbstractEventLoop | None = None
        self.affinity: LoopAffinity | None = None  # set with ``loop`` when the call starts
        self.emit: Callable[[AgentEvent], None] = _nowhere
        self.state: AgentState | None = None
        self.interrupted = False
        self.interrupt_msg: Msg | None = None
        self.stop_request: RequestStopEvent | None = None
        # The first continue request of the current reasoning round (the loop resets it).
        self.continue_request: RequestContinueEvent | None = None
        self.step: Step | None = None  # the step the driver runs (an acting batch, ...)
        self.sink: _StepSink | None = None  # the stream that step runs, if any
        # The call's outcome is saved: a cancelled step still unwinding must not
        # append to the context any more.
        self.sealed = False
        # Saves the state mid-call (durable stores only): after a round's assistant
        # message and after its tool results.
        self.checkpoint: Callable[[], Awaitable[None]] | None = None
        # The two effects of a call, which a driver may run elsewhere (docs/internals.md,
        # "The step machine"): one attempt of a model call (None: the model's own
        # ``stream``), one tool call.
        self.model_stream: Callable[[ModelLike, ModelCallInput], Observable[Any]] | None = None
        self.execute_tool: ToolRunner = execute
        # The call's tools: the agent's, plus the response tool of a structured-output
        # call (which no permission rule applies to).
        self.toolkit = config.toolkit
        self.response_tool: object | None = None

    # -- interrupt -----------------------------------------------------------------

    def request_interrupt(self, msg: Msg | None = None) -> None:
        """Thread-safe: end the call with ``INTERRUPTED`` at the current step.

        The driver reads the flag between two steps and a batch before each tool
        starts (``agent/_batch.py``: how an interrupt stops tools), so once this
        returns no tool of the reply starts; the running step is also cut short.
        ``msg`` is recorded with the interrupted reply (the latest one wins)."""
        if msg is not None:
            self.interrupt_msg = msg
        self.interrupted = True
        where = self.affinity
        if where is not None and (where.here() or not where.loop.is_closed()):
            where.hop(self._cut_step)  # after the event being handled, never inside it

    def _cut_step(self) -> None:
        sink = self.sink
        if sink is not None and not sink.done():
            step = self.step
            if step is not None and step.finishing():
                return  # tools that finish first run on; the driver closes after them
            sink.set_exception(Interrupted())
            if sink.subscription is not None:
                sink.subscription.dispose()

    # -- steps -----------------------------------------------------------------------

    async def run_step(
        self,
        source: Observable[AgentEvent],
        point: ExtensionPoint | None,
        rnd: Captures | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        """Run one step's stream to completion, forwarding its events to the caller.

        ``point`` is the hook chain the stream leaves: its items are checked and stop and
        continue requests watched there (``None`` for the core's own stream). While
        ``rnd`` has a capture, it is fed every event (a round ``on_reasoning`` answers by
        itself). ``ledger`` (acting with a layer) decides what of the stream reaches
        the caller.
        """
        sink = self.start_step(source, point, rnd, ledger)
        del source  # held by its subscription, if at all: not by this frame
        try:
            await sink
        finally:
            self.end_step(sink)

    def start_step(
        self,
        source: Observable[AgentEvent],
        point: ExtensionPoint | None,
        rnd: Captures | None = None,
        ledger: Ledger | None = None,
    ) -> _StepSink:
        """:meth:`run_step`'s first half: the step's sink (the future to await), its
        stream subscribed. A step that awaits it, then calls :meth:`end_step` however
        the wait ended, needs no coroutine of run_step's (the reasoning round)."""
        where = self.affinity
        assert where is not None
        sink: _StepSink
        if point is None:
            # The runtime's own reasoning stream: disposal stops it synchronously.
            sink = _CoreSink(self, where)
        elif point is ExtensionPoint.ON_ACTING:
            sink = (_LedgerSink(self, where, ledger) if ledger is not None
                    else _ActingSink(self, where))
        elif point in self.hooked:
            sink = _HookedSink(self, where, point, rnd)
        else:
            sink = _CoreSink(self, where)
        self.sink = sink
        try:
            sink.subscription = subscribe_observer(source, sink)
        except BaseException:
            self.end_step(sink)
            raise
        return sink

    def end_step(self, sink: _StepSink) -> None:
        """:meth:`run_step`'s second half: the step's stream is let go (disposed)."""
        self.sink = None
        subscription, sink.subscription = sink.subscription, None
        if subscription is not None:
            subscription.dispose()

    def _control(self, event: AgentEvent, acting: bool) -> None:
        """Record a stop or continue request (the first of each kind wins)."""
        if isinstance(event, RequestStopEvent):
            if self.stop_request is None:
                self.stop_request = event
        elif not acting and self.continue_request is None:  # acting's are ignored
            assert isinstance(event, RequestContinueEvent)
            self.continue_request = event

    def not_an_event(self, point: ExtensionPoint, item: Any, rnd: Any = None) -> TypeError:
        # Items of on_model_call reach the reasoning step's check too: the round's model
        # call accumulator kept the last item it had no use for.
        acc = getattr(rnd, "acc", None)
        if acc is None and isinstance(rnd, MessageAccumulator):
            acc = rnd  # a round is its first model call's accumulator
        if point is ExtensionPoint.ON_REASONING and acc is not None and acc.unused is item:
            point = ExtensionPoint.ON_MODEL_CALL
        return self.config.plan.not_an_event(point, item)

    # -- ending a reply ----------------------------------------------------------------

    def close_unanswered(
        self,
        state: AgentState,
        result_state: ToolResultState,
        text: str,
        only: set[str] | None = None,
    ) -> None:
        """Synthesize results for the calls left open, telling the caller."""
        reply_id: str | None = None
        for block in close_unanswered(state, result_state, text, only):
            if reply_id is None:
                reply_id = new_id()  # the synthesized results form one batch
            emit_result_events(self.emit, self.source, reply_id, block)

    def placeholder(self, state: AgentState, reason: GenerateReason, text: str = "") -> Msg:
        """A final message without model text (stored, so the session stays whole)."""
        msg = Msg(role=Role.ASSISTANT, content=text, name=self.config.name,
                  generate_reason=reason)
        state.context.append(msg)
        return msg

    def close_stopped(self, state: AgentState, msg: Msg | None) -> Msg:
        stop = self.stop_request
        assert stop is not None
        reason = stop.generate_reason
        why = stop.reason or reason.value
        self.close_unanswered(state, ToolResultState.INTERRUPTED,
                              f"Not executed: the reply was stopped ({why}).")
        if msg is not None and msg.has_visible_text and not msg.tool_calls:
            msg.generate_reason = reason
            return msg
        placeholder = self.placeholder(state, reason)
        if stop.reason:
            placeholder.metadata = {"stop_reason": stop.reason}
        return placeholder

    def close_interrupted(self, state: AgentState, partial: Msg | None = None) -> Msg:
        """End the reply as INTERRUPTED; ``partial`` is what a cut round produced (the
        step that was cut closed what it left open first: :meth:`Step.cut`)."""
        if partial is not None and partial.content and (
            not state.context or state.context[-1] is not partial
        ):
            state.context.append(partial)
        self.close_unanswered(state, ToolResultState.INTERRUPTED, INTERRUPTED_TEXT)
        if self.interrupt_msg is not None:  # why the user stopped it, before the end
            state.context.append(self.interrupt_msg)
        return self.placeholder(state, GenerateReason.INTERRUPTED, _INTERRUPTED_TEXT)


def _nowhere(event: AgentEvent) -> None:
    """The emit of a scope whose call has not started."""
