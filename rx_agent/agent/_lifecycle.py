"""One call of an agent, from subscription to the caller's terminal signal.

A :class:`Run` lives for one subscription of ``agent.stream``. It walks the phases of
:class:`Phase`: the ``on_agent`` chain starts, the session is bound (slot, state,
``on_agent_state_ready``), the ReAct loop (:mod:`._loop`) runs, the outcome is
known, finish hooks run, the state is saved and the slot freed, and the caller gets
``on_completed`` / ``on_error``. Disposal can cut in at any phase. Everything happens
on one event-loop thread (the subscriber's loop, or the runtime's when it has none),
so the state needs no locks; other threads reach it through the loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, cast

import reactivex
from pydantic import BaseModel
from reactivex import Observable
from reactivex import abc as rxabc

from .. import event as _events
from .._record import new_id
from .._rx import (
    LoopAffinity,
    affinity,
    from_coroutine,
    refuse_blocking_run,
    running_loop,
    runtime_loop,
    subscribe_direct,
)
from ..context import RuntimeContext
from ..event import (
    AgentEndEvent,
    AgentEvent,
    AgentResultEvent,
    AgentStartEvent,
    SessionRecoveredEvent,
)
from ..message import Msg, ToolResultState
from ..middleware.base import Agent, ExtensionPoint
from ..middleware.inputs import AgentInput
from ..session import ANONYMOUS_USER, AsyncSessionStore, SessionKey
from ._binding import SessionBinding
from ._config import AgentConfig
from ._driver import DRIVER, Driver
from ._durable import DurableHold
from ._loop import ReActLoop
from ._machine import Prepare
from ._phase import Phase
from ._slots import SessionSlots
from ._steps import EVENT_TYPES, CallScope, is_event
from ._watchdog import watch

__all__ = ["Phase", "Run"]

logger = logging.getLogger("rx_agent")

_thread_id = threading.get_ident


def _dropped(event: AgentEvent) -> None:
    """The emit of a call that has ended (a step still unwinding emits nowhere)."""


def _cancelled_here(exc: BaseException) -> bool:
    """Whether ``exc`` is the running task's own cancellation."""
    task = asyncio.current_task() if isinstance(exc, asyncio.CancelledError) else None
    return task is not None and task.cancelling() > 0


_TAKEN = AgentInput(())  # a Run's input once its body took it

_ENDED = (Phase.FINISHING, Phase.DONE, Phase.DISPOSED)

# The runtime's own event classes that are not results: what a quiet call drops.
_PLAIN_EVENTS = frozenset(
    cls for cls in vars(_events).values()
    if isinstance(cls, type) and issubclass(cls, AgentEvent)
    and not issubclass(cls, AgentResultEvent)
)


class Run(rxabc.DisposableBase):
    """The lifecycle of one call (one subscription of ``agent.stream``)."""

    __slots__ = ("binding", "caller_ctx", "checked", "config", "driver", "driving", "failed",
                 "input", "observer", "phase", "quiet", "react", "reply_id", "result", "scope",
                 "subscription", "task", "thread")

    def __init__(
        self,
        agent: Agent,
        config: AgentConfig,
        slots: SessionSlots,
        caller_ctx: RuntimeContext | None,
        inp: AgentInput,
        structured_model: type[BaseModel] | None = None,
        quiet: bool = False,
        driver: Driver | None = None,
    ) -> None:
        self.config = config
        self.caller_ctx = caller_ctx
        ctx = caller_ctx.copy() if caller_ctx is not None else RuntimeContext()
        if ctx.session_id is None:
            ctx.session_id = config.name
        ctx.agent_state = None
        tool_ctx = ctx._with_fallback(config.tool_execution_context)
        self.scope = scope = CallScope(agent, config, ctx, tool_ctx)
        key = SessionKey(ctx.user_id or ANONYMOUS_USER, ctx.session_id)
        durable = None
        if config.durable:
            durable = DurableHold(
                cast(AsyncSessionStore, config.session_store), key, ctx.run_id,
                ttl=config.session_lease_ttl, wait=config.session_wait,
                policy=config.conflict_policy,
            )
            scope.checkpoint = self._checkpoint
        self.binding = SessionBinding(slots, config.session_store, key, self, durable)
        self.input = inp
        self.reply_id = new_id()
        self.phase = Phase.NEW
        self.observer: rxabc.ObserverBase[AgentEvent] | None = None
        self.subscription: rxabc.DisposableBase | None = None
        self.result: Msg | None = None
        self.failed = False
        self.driving = False
        self.task: asyncio.Task[None] | None = None  # the call's own task (no on_agent layer)
        self.thread = 0  # the loop's thread, once subscribed
        self.react = ReActLoop(scope, structured_model)
        if driver is None:
            driver = DRIVER
        else:
            driver.bind(scope)  # the default's effects are the scope's already
        self.driver = driver
        # Only an on_agent middleware can put a non-event into the caller's stream.
        self.checked = ExtensionPoint.ON_AGENT in config.plan.layered
        # The caller reads only the result event (acall): the runtime's other events
        # stop here instead of costing the caller's observer a call each, and with no
        # on_agent layer the steps need not build what nobody reads.
        self.quiet = quiet
        scope.quiet = quiet and not self.checked

    @property
    def key(self) -> SessionKey:
        return self.binding.key

    # -- subscription ----------------------------------------------------------------

    def subscribe(
        self, observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
    ) -> rxabc.DisposableBase:
        refuse_blocking_run(scheduler)
        loop = running_loop()
        if loop is not None:
            self._place(loop)
            self._start(observer)
        else:
            self._place(runtime_loop()).hop(self._start, observer)
        return self  # the subscription: dispose() is thread-safe

    def body_here(
        self, observer: rxabc.ObserverBase[AgentEvent], loop: asyncio.AbstractEventLoop
    ) -> Coroutine[Any, Any, None] | None:
        """``acall``'s start on its running ``loop``. With no ``on_agent`` layer: the
        call's body, for the caller's own task to await (no task, future or context
        copy of the call's own: the body runs in the caller's context, as any awaited
        coroutine does). With one: ``None``, the chain subscribed as by subscribe()."""
        self._place(loop)
        return self._start(observer, here=True)

    def _place(self, loop: asyncio.AbstractEventLoop) -> LoopAffinity:
        """The call runs on ``loop``: its affinity, and the lag watch if configured."""
        scope = self.scope
        where = affinity(loop)
        scope.loop, scope.affinity, self.thread = loop, where, where.thread
        lag = self.config.loop_lag
        if lag is not None:
            watch(where, lag)
        return where

    def dispose(self) -> None:
        """Dispose this call's subscription (thread-safe)."""
        self._dispose_threadsafe()

    def _start(
        self, observer: rxabc.ObserverBase[AgentEvent], here: bool = False
    ) -> Coroutine[Any, Any, None] | None:
        if self.phase is Phase.DISPOSED:
            return None
        self.observer = observer
        self.phase = self.phase.to(Phase.STARTED)
        scope = self.scope
        if not self.checked:
            # No on_agent layer: the call's body is this task (``here``: the caller's);
            # no Observable, sink or disposable sits between it and the caller. The Run
            # itself is the emit (``__call__``): no bound method kept per call.
            inp, self.input = self.input, _TAKEN  # the body alone holds it
            body = self._drive(inp, self, True)
            if here:
                return body
            assert scope.loop is not None
            self.task = scope.loop.create_task(body)
            return None
        chain = self.config.plan.wrap(ExtensionPoint.ON_AGENT, scope.agent, scope.ctx,
                                      self._core_agent)
        try:
            source = chain(self.input)
        except Exception as exc:
            source = reactivex.throw(exc)
        self.subscription = subscribe_direct(source, self._on_next, self._on_error,
                                             self._on_completed)
        return None

    def _on_next(self, event: AgentEvent) -> None:
        if _thread_id() != self.thread:  # an on_agent middleware hopped threads
            where = self.scope.affinity
            assert where is not None
            where.hop(self._on_next, event)
            return
        observer = self.observer
        if observer is None:  # finishing or disposed: nothing more reaches the caller
            return
        kind = type(event)
        if kind is AgentResultEvent:
            self.result = event.result  # type: ignore[attr-defined]  # an AgentResultEvent
        elif self.quiet and kind in _PLAIN_EVENTS:
            return
        elif self.checked and kind not in EVENT_TYPES and not is_event(event):
            if self.subscription is not None:
                self.subscription.dispose()
            self._finish(self.scope.not_an_event(ExtensionPoint.ON_AGENT, event))
            return
        observer.on_next(event)

    __call__ = _on_next

    def _on_error(self, error: Exception) -> None:
        assert self.scope.affinity is not None
        self.scope.affinity.run(self._finish, error)

    def _on_completed(self) -> None:
        assert self.scope.affinity is not None
        self.scope.affinity.run(self._finish, None)

    # -- the core of on_agent --------------------------------------------------------

    def _core_agent(self, inp: AgentInput) -> Observable[AgentEvent]:
        async def body(observer: rxabc.ObserverBase[AgentEvent]) -> None:
            if self.driving:
                who = ", ".join(f"{type(m).__name__}.on_agent()" for m in
                                self.config.plan.participants(ExtensionPoint.ON_AGENT))
                raise RuntimeError(
                    f"{who} subscribed next() twice at once; one call runs one inner "
                    "pipeline at a time on its session (call next() again only after the "
                    "first stream ended, e.g. with ops.catch or ops.concat)"
                )
            self.driving = True
            try:
                await self._drive(inp, observer.on_next)
            finally:
                self.driving = False

        return from_coroutine(body, self.scope.loop)

    async def _drive(self, inp: AgentInput, emit: Any, finish: bool = False) -> None:
        """The call's body. With ``finish`` (no ``on_agent`` layer: this is the call's
        own task) it ends the call itself, as :func:`from_coroutine` would signal it;
        one coroutine, not two."""
        try:
            scope = self.scope
            ctx = scope.ctx
            try:
                state = await self.binding.bind(ctx.user_id)
            except BaseException as exc:
                # Busy, unreadable or unreachable: the call never entered the pipeline.
                self._refused(exc)
                raise
            scope.state = state
            ctx.agent_state = state
            scope.tool_ctx.agent_state = state
            if self.caller_ctx is not None:
                self.caller_ctx.agent_state = state
            input_messages: Sequence[Msg] = inp.msgs
            if self.phase is Phase.STARTED:
                try:
                    plan = self.config.plan
                    if ExtensionPoint.ON_AGENT_STATE_READY in plan.layered:
                        input_messages = edited = list(inp.msgs)  # the hooks may edit it
                        pending = plan.notify_state_ready(scope.agent, ctx, state, edited)
                        if pending is not None:  # an async hook
                            await pending
                except BaseException as exc:
                    self._refused(exc)
                    raise
                self.phase = self.phase.to(Phase.READY)
            scope.emit = emit
            if not scope.quiet:
                emit(AgentStartEvent.make(
                    scope.source, session_id=self.key.session_id, reply_id=self.reply_id,
                    name=self.config.name, user_id=ctx.user_id,
                ))
            if self.binding.recovered:
                emit(SessionRecoveredEvent.make(scope.source, session_id=self.key.session_id,
                                                tool_call_ids=list(self.binding.recovered)))
            react = self.react
            resume = react.begin(state, input_messages, inp)
            del inp, input_messages  # the context holds the messages now
            # No local for the first step: the driver lets it go once it has run.
            final = await self.driver.run(react, Prepare(resume))
            emit(AgentResultEvent.make(scope.source, result=final))
            if not scope.quiet:
                emit(AgentEndEvent.make(scope.source, reply_id=self.reply_id))
        except asyncio.CancelledError as exc:
            if not finish or _cancelled_here(exc):
                raise  # disposed
            self._finish(RuntimeError(f"the step failed with {exc!r}"))
            return
        except Exception as exc:
            if not finish:
                raise
            self._finish(exc)
            return
        except BaseException as exc:
            if not finish:
                raise
            # SystemExit / KeyboardInterrupt must not stop the shared loop.
            self._finish(RuntimeError(f"the step failed with {exc!r}"))
            return
        if finish:
            self._finish(None)

    async def _checkpoint(self) -> None:
        await self.binding.checkpoint()

    def _refused(self, exc: BaseException) -> None:
        # Binding failed before the call entered the pipeline. A disposal that cut it
        # short is the call's phase already, or (acall's body in the caller's task,
        # cancelled) will be once the caller's task has unwound.
        if self.phase is Phase.STARTED and not _cancelled_here(exc):
            self.phase = Phase.STARTED.to(Phase.REFUSED)

    # -- the end -----------------------------------------------------------------------

    def _finish(self, error: BaseException | None) -> None:
        if self.phase in _ENDED:
            return
        refused = self.phase is Phase.REFUSED
        self.phase = self.phase.to(Phase.FINISHING)
        self.failed = error is not None
        observer, self.observer = self.observer, None
        if self.binding.sync and (refused or not self.config.plan.finish_hooks()):
            # Nothing to await: finish now instead of paying for a task.
            self._seal()
            unsaved = self.binding.release_now()
            self._deliver(observer, self._outcome(error, unsaved))
            return
        loop = self.scope.loop
        assert loop is not None
        loop.create_task(self._finalize(observer, error, refused))

    async def _finalize(
        self,
        observer: rxabc.ObserverBase[AgentEvent] | None,
        error: BaseException | None,
        refused: bool,
    ) -> None:
        try:
            if not refused:
                outcome_error = await self.config.plan.notify_finish(
                    self.scope.agent, self.scope.ctx, self.result if error is None else None,
                    error,
                )
                error = outcome_error
        finally:
            self._seal()
            unsaved = await self.binding.release()
        self._deliver(observer, self._outcome(error, unsaved))

    def _outcome(
        self, error: BaseException | None, unsaved: BaseException | None
    ) -> BaseException | None:
        """The call's error; a failed final save is one (the caller must know its
        session was not saved), unless the call failed first."""
        if unsaved is None:
            return error
        if error is not None:
            logger.error("session %s: the state was not saved after the call failed",
                         self.binding.key, exc_info=unsaved)
            return error
        return unsaved

    def _deliver(
        self, observer: rxabc.ObserverBase[AgentEvent] | None, error: BaseException | None
    ) -> None:
        if self.phase is Phase.DISPOSED:
            self._unlink()
            return
        self.phase = self.phase.to(Phase.DONE)
        self._unlink()
        if observer is None:
            return
        if error is not None:
            observer.on_error(error if isinstance(error, Exception) else RuntimeError(error))
        else:
            observer.on_completed()

    def _unlink(self) -> None:
        """The call is over: drop the references that point back into it (bound
        methods, chains), so reference counting frees it without the cyclic GC."""
        scope = self.scope
        scope.emit = _dropped
        scope.checkpoint = None
        self.react.close()
        self.subscription = None
        binding = self.binding
        if binding.released and not binding.held:
            binding.owner = None

    def _seal(self) -> None:
        """Close the context for saving: no tool call may stay without a result."""
        scope = self.scope
        state = scope.state
        scope.sealed = True  # a cancelled step still unwinding must not append now
        if state is None or state.pending is not None:
            return
        if self.phase is Phase.DISPOSED:
            scope.close_unanswered(state, ToolResultState.INTERRUPTED,
                                   "Cancelled before it finished.")
        elif self.failed:
            scope.close_unanswered(state, ToolResultState.ERROR,
                                   "Not executed: the reply failed.")

    # -- disposal and interrupt ----------------------------------------------------------

    def _dispose_threadsafe(self) -> None:
        where = self.scope.affinity
        # ``here()`` first: a loop that runs this code is open (a workflow engine's loop
        # does not implement ``is_closed``).
        if where is None or where.here() or where.loop.is_closed():
            self._dispose()
        else:
            where.hop(self._dispose)

    def _dispose(self) -> None:
        if self.phase is Phase.DISPOSED:
            return
        finishing = self.phase in (Phase.FINISHING, Phase.DONE)
        self.phase = self.phase.to(Phase.DISPOSED)
        self.observer = None
        scope = self.scope
        if self.subscription is not None:
            self.subscription.dispose()
        task = self.task
        if task is not None and not task.done():
            task.cancel()
        sink = scope.sink
        if sink is not None and sink.subscription is not None:
            sink.subscription.dispose()
        if finishing or self.binding.released:
            return
        loop = scope.loop
        if loop is None:
            return
        # No finish hooks on dispose; state is still saved and the slot released
        # (after the cancelled step has unwound, hence a task).
        if loop.is_closed():
            self._seal()
            self.binding.release_now()
        else:
            loop.create_task(self._release_disposed())

    async def _release_disposed(self) -> None:
        # Runs after the cancelled step's task (scheduled first) has unwound.
        self._seal()
        unsaved = await self.binding.release()
        if unsaved is not None:  # nobody is subscribed to be told
            logger.error("session %s: the state of a disposed call was not saved",
                         self.binding.key, exc_info=unsaved)
        self._unlink()

    def request_interrupt(self, msg: Msg | None = None) -> None:
        """Thread-safe: end the call with ``INTERRUPTED`` at the current step."""
        self.scope.request_interrupt(msg)
