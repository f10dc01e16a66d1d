"""One call of an agent: the session slot, the hooks and the ReAct loop.

A ``_Run`` lives for one subscription. Everything it does happens on one event loop
thread (the subscriber's loop, or the runtime's when the subscriber has none), so
its state needs no locks; other threads reach it through ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import reactivex
from reactivex import Observable
from reactivex import abc as rxabc
from reactivex import operators as ops
from reactivex.disposable import Disposable

from .._record import new_id
from .._rx import (
    DirectObservable,
    await_observable,
    from_coroutine,
    on_loop,
    refuse_blocking_run,
    running_loop,
    runtime_loop,
    subscribe_direct,
)
from .._text import check_value, scrub
from ..context import AgentState, PendingToolCalls, RuntimeContext
from ..event import (
    AgentEndEvent,
    AgentEvent,
    AgentResultEvent,
    AgentStartEvent,
    AllToolsDeniedEvent,
    ExceedMaxItersEvent,
    ExternalExecutionResultEvent,
    ModelCallStartEvent,
    RequestStopEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
    UserConfirmResultEvent,
)
from ..message import (
    DataBlock,
    GenerateReason,
    HintBlock,
    Msg,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
)
from ..middleware.base import ExtensionPoint
from ..middleware.inputs import (
    ActingInput,
    AgentFinishOutcome,
    AgentInput,
    ModelCallInput,
    ReasoningInput,
)
from ..session import ANONYMOUS_USER, InMemorySessionStore, SessionKey
from ..tool.toolkit import Tool, ToolArgumentError, is_stream, resolve, tool_output_text
from ._blocks import MessageAccumulator
from ._hitl import ResumeEvent, apply_edits, check_resume, decide
from ._model_call import ModelAttempts

if TYPE_CHECKING:
    from .react import ReActAgent

logger = logging.getLogger("rx_agent")
# Which thread a signal arrives on decides whether it must hop back to the loop.
# get_ident is ~5x cheaper than asyncio's get_running_loop (which checks the pid).
_thread_id = threading.get_ident

_EMPTY_ANSWER_REMINDER = (
    "Your last reply had no visible answer and no tool call. Reply to the user with "
    "text, or call a tool."
)
_SUMMARY_HINT = (
    "You have used the maximum number of reasoning rounds. Do not call any tools; "
    "summarize what you found and answer the user as well as you can now."
)
_INTERRUPTED_TEXT = "The reply was interrupted."


class _Interrupted(Exception):
    """Internal: the current step was cut short by ``agent.interrupt``."""


# Event classes seen so far: an exact-type set lookup is much cheaper per event than
# isinstance against pydantic's ABC metaclass; a new subclass is added on first sight.
_EVENT_TYPES: set[type] = set()


def _is_event(item: object) -> bool:
    if isinstance(item, AgentEvent):
        _EVENT_TYPES.add(type(item))
        return True
    return False


class _Batch:
    """The tool calls of one ``on_acting`` step and the results they got so far.

    Results enter the context only through :meth:`Run.close_batch`, in call order, so
    an interrupt can keep the finished ones and synthesize the rest exactly once.
    """

    __slots__ = ("calls", "closed", "results")

    def __init__(self, calls: tuple[ToolUseBlock, ...]) -> None:
        self.calls = calls
        self.results: dict[str, ToolResultBlock] = {}
        self.closed = False


class _Step:
    __slots__ = ("future", "subscription")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.subscription: rxabc.DisposableBase | None = None


class Run:
    """The state of one call (one subscription of ``agent.stream``)."""

    def __init__(
        self,
        agent: ReActAgent,
        caller_ctx: RuntimeContext | None,
        inp: AgentInput,
    ) -> None:
        self.agent = agent
        self.caller_ctx = caller_ctx
        ctx = caller_ctx.copy() if caller_ctx is not None else RuntimeContext()
        if ctx.session_id is None:
            ctx.session_id = agent.name
        ctx.agent_state = None
        self.ctx = ctx
        self.tool_ctx = ctx._with_fallback(agent.tool_execution_context)
        self.key = SessionKey(ctx.user_id or ANONYMOUS_USER, ctx.session_id)
        self.input = inp
        self.reply_id = new_id()
        self.source = agent.name

        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread = -1
        self.observer: rxabc.ObserverBase[AgentEvent] | None = None
        self.subscription: rxabc.DisposableBase | None = None
        self.state: AgentState | None = None
        self.slot_held = False
        self.state_ready_done = False
        self.state_ready_failed = False
        self.result: Msg | None = None
        self.finished = False
        self.disposed = False
        self.released = False
        self.interrupted = False
        # The outcome is fixed (finished or disposed): nothing more enters the context.
        self.sealed = False
        self.failed = False
        self.driving = False
        self.batch: _Batch | None = None
        self.step: _Step | None = None
        self.stop_request: RequestStopEvent | None = None
        self.round_msg: Msg | None = None
        self.round_acc: MessageAccumulator | None = None
        self.capture: MessageAccumulator | None = None
        self.system_prompt: str | None = None
        self.user_denied: dict[str, str] = {}
        self.batch_reply_id: str | None = None
        self.tools: tuple[dict[str, Any], ...] = ()

        plan = agent.plan
        self.reasoning_chain = plan.wrap(ExtensionPoint.ON_REASONING, agent, ctx,
                                         self._core_reasoning)
        self.model_chain = plan.wrap(ExtensionPoint.ON_MODEL_CALL, agent, ctx,
                                     self._core_model_call)
        self.acting_chain = plan.wrap(ExtensionPoint.ON_ACTING, agent, ctx, self._core_acting)

    # -- subscription lifecycle ----------------------------------------------------

    def subscribe(
        self, observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
    ) -> rxabc.DisposableBase:
        refuse_blocking_run(scheduler)
        loop = running_loop()
        if loop is not None:
            self.loop = loop
            self._start(observer)
        else:
            self.loop = runtime_loop()
            self.loop.call_soon_threadsafe(self._start, observer)
        return Disposable(self._dispose_threadsafe)

    def _start(self, observer: rxabc.ObserverBase[AgentEvent]) -> None:
        self.loop_thread = _thread_id()  # _start always runs on the loop's thread
        self.observer = observer
        if self.disposed:
            return
        chain = self.agent.plan.wrap(ExtensionPoint.ON_AGENT, self.agent, self.ctx,
                                     self._core_agent)
        try:
            source = chain(self.input)
        except Exception as exc:
            source = reactivex.throw(exc)
        self.subscription = subscribe_direct(source, self._on_next, self._on_error,
                                             self._on_completed)

    def _on_next(self, event: AgentEvent) -> None:
        if _thread_id() != self.loop_thread:  # an on_agent middleware hopped threads
            assert self.loop is not None
            self.loop.call_soon_threadsafe(self._on_next, event)
            return
        kind = type(event)
        if kind is AgentResultEvent:
            self.result = event.result  # type: ignore[attr-defined]  # exact type checked
        elif kind not in _EVENT_TYPES and not _is_event(event):
            if not self.finished and not self.disposed:
                if self.subscription is not None:
                    self.subscription.dispose()
                self._finish(self._not_an_event(ExtensionPoint.ON_AGENT, event))
            return
        if not self.disposed and not self.finished and self.observer is not None:
            self.observer.on_next(event)

    def _not_an_event(self, point: ExtensionPoint, item: Any) -> TypeError:
        who = ", ".join(
            f"{type(m).__name__}.{point.value}()" for m in self.agent.plan.participants(point)
        ) or "the runtime"
        return TypeError(
            f"{who} emitted {type(item).__name__} {item!r:.80}, not an AgentEvent, into the "
            f"{point.value} stream (a port of Mono.delay(...).thenMany(...) emits the "
            "timer's 0: drop it with ops.ignore_elements() or use ops.flat_map)"
        )

    def _on_error(self, error: Exception) -> None:
        if _thread_id() != self.loop_thread:
            assert self.loop is not None
            self.loop.call_soon_threadsafe(self._finish, error)
            return
        self._finish(error)

    def _on_completed(self) -> None:
        if _thread_id() != self.loop_thread:
            assert self.loop is not None
            self.loop.call_soon_threadsafe(self._finish, None)
            return
        self._finish(None)

    def _finish(self, error: BaseException | None) -> None:
        if self.finished or self.disposed:
            return
        self.finished = True
        self.failed = error is not None
        if type(self.agent.session_store) is InMemorySessionStore and (
            self.state_ready_failed or not self.agent.plan.finish_hooks()
        ):
            # Nothing to await: finish now instead of paying for a task.
            self._release_now()
            self._deliver(error)
            return
        assert self.loop is not None
        self.loop.create_task(self._finalize(error))

    def _deliver(self, error: BaseException | None) -> None:
        observer = self.observer
        if observer is None or self.disposed:
            return
        if error is not None:
            observer.on_error(error if isinstance(error, Exception) else RuntimeError(error))
        else:
            observer.on_completed()

    async def _finalize(self, error: BaseException | None) -> None:
        try:
            if not self.state_ready_failed:
                error = await self._run_finish_hooks(error)
        finally:
            await self._release()
        self._deliver(error)

    async def _run_finish_hooks(self, error: BaseException | None) -> BaseException | None:
        hooks = self.agent.plan.finish_hooks()
        if not hooks:
            return error
        result = self.result if error is None else None
        outcome = AgentFinishOutcome(
            result=result,
            error=error,
            reason=result.generate_reason if result is not None else None,
        )
        for _mw, hook in hooks:
            try:
                value = hook(self.agent, self.ctx, outcome)
                if value is not None:
                    if isinstance(value, Observable):
                        await await_observable(value)
                    elif asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
                        await value
                    else:
                        raise TypeError(
                            f"{type(_mw).__name__}.on_agent_finish() returned "
                            f"{type(value).__name__}; expected None, an Observable or an "
                            "awaitable"
                        )
            except Exception as exc:
                if error is not None and exc is not error:
                    exc.__context__ = error
                return exc
        return error

    async def _release(self) -> None:
        """Save the state and free the session slot (once)."""
        if self.released:
            return
        self.released = True
        try:
            saved = self._save()
            if saved is not None:
                await saved
        except Exception:
            logger.exception("saving session %s failed", self.key)
        finally:
            self._free_slot()

    def _release_now(self) -> None:
        """:meth:`_release` for a synchronous store."""
        if self.released:
            return
        self.released = True
        try:
            self._save()
        except Exception:
            logger.exception("saving session %s failed", self.key)
        finally:
            self._free_slot()

    def _save(self) -> Any:
        state = self.state
        self.sealed = True  # a cancelled step still unwinding must not append now
        if (self.disposed or self.failed) and state is not None and state.pending is None:
            # Cut off mid-step: no tool call may stay without a result.
            if self.disposed:
                result_state, text = ToolResultState.INTERRUPTED, "Cancelled before it finished."
            else:
                result_state, text = ToolResultState.ERROR, "Not executed: the reply failed."
            self._close_orphans(state, result_state, text, emit_events=False)
        if self.slot_held and state is not None:
            return self.agent.session_store.save(self.key, state)
        return None

    def _free_slot(self) -> None:
        if self.slot_held:
            self.slot_held = False
            self.agent._slots.release(self.key, self)

    def _dispose_threadsafe(self) -> None:
        loop = self.loop
        if loop is None or loop.is_closed() or running_loop() is loop:
            self._dispose()
        else:
            loop.call_soon_threadsafe(self._dispose)

    def _dispose(self) -> None:
        if self.disposed:
            return
        self.disposed = True
        if self.subscription is not None:
            self.subscription.dispose()
        if self.step is not None and self.step.subscription is not None:
            self.step.subscription.dispose()
        if self.loop is not None and not self.released:
            # No finish hooks on dispose; state is still saved and the slot released
            # (after the cancelled step has unwound, hence a task).
            if self.loop.is_closed():
                self._release_now()
            else:
                self.loop.create_task(self._release())

    # -- interrupt -----------------------------------------------------------------

    def request_interrupt(self) -> None:
        """Thread-safe: end the call with ``INTERRUPTED`` at the current step."""
        self.interrupted = True
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._cut_step)

    def _cut_step(self) -> None:
        step = self.step
        if step is not None and not step.future.done():
            step.future.set_exception(_Interrupted())
            if step.subscription is not None:
                step.subscription.dispose()

    # -- the core of on_agent --------------------------------------------------------

    def _core_agent(self, inp: AgentInput) -> Observable[AgentEvent]:
        async def body(observer: rxabc.ObserverBase[AgentEvent]) -> None:
            if self.driving:
                who = ", ".join(f"{type(m).__name__}.on_agent()" for m in
                                self.agent.plan.participants(ExtensionPoint.ON_AGENT))
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

        return from_coroutine(body, self.loop)

    async def _bind(self) -> AgentState:
        agent = self.agent
        if not agent._slots.try_acquire(self.key, self):
            await agent._slots.acquire(self.key, self)
        self.slot_held = True
        loaded = agent.session_store.load(self.key)
        if loaded is not None and not isinstance(loaded, AgentState):
            loaded = await loaded
        state = loaded if loaded is not None else AgentState(
            session_id=self.key.session_id, user_id=self.ctx.user_id
        )
        self.state = state
        self.ctx.agent_state = state
        self.tool_ctx.agent_state = state
        if self.caller_ctx is not None:
            self.caller_ctx.agent_state = state
        return state

    async def _drive(self, inp: AgentInput, emit: Callable[[AgentEvent], None]) -> None:
        state = self.state if self.slot_held and self.state is not None else await self._bind()
        input_messages = list(inp.msgs)
        if not self.state_ready_done:
            try:
                self.agent.plan.notify_state_ready(self.agent, self.ctx, state, input_messages)
            except BaseException:
                self.state_ready_failed = True
                raise
            self.state_ready_done = True
        self.emit = emit
        emit(
            AgentStartEvent.make(
                self.source, session_id=self.key.session_id, reply_id=self.reply_id,
                name=self.agent.name, user_id=self.ctx.user_id,
            )
        )
        final = await self._react(state, input_messages, inp)
        emit(AgentResultEvent.make(self.source, result=final))
        emit(AgentEndEvent.make(self.source, reply_id=self.reply_id))

    async def _system_prompt(self) -> str:
        prompt = self.agent.sys_prompt.strip()
        for mw, hook in self.agent.plan.system_prompt_hooks():
            value = hook(self.agent, self.ctx, prompt)
            if isinstance(value, Observable):
                items: list[Any] = await await_observable(value.pipe(ops.to_list()), [])
                if len(items) != 1:
                    raise TypeError(
                        f"{type(mw).__name__}.on_system_prompt() emitted {len(items)} "
                        "items; expected exactly one str"
                    )
                value = items[0]
            elif asyncio.iscoroutine(value):
                value = await value
            if not isinstance(value, str):
                raise TypeError(
                    f"{type(mw).__name__}.on_system_prompt() produced "
                    f"{type(value).__name__}; expected a str"
                )
            prompt = value
        return prompt

    def _model_messages(self, state: AgentState) -> tuple[Msg, ...]:
        if self.system_prompt and self.system_prompt.strip():
            return (self._system_msg, *state.context)
        return tuple(state.context)

    # -- the ReAct loop ------------------------------------------------------------

    async def _react(
        self, state: AgentState, input_messages: list[Msg], inp: AgentInput
    ) -> Msg:
        agent = self.agent
        resume = inp.resume
        for i, m in enumerate(input_messages):  # bad text never enters the context
            check_value(m, f"input message #{i}")
        if resume is not None:
            check_value(resume, type(resume).__name__)
            check_resume(state, resume, self.key.session_id)  # raises before anything changes
        elif state.pending is not None:
            self._abandon_pending(state)
        state.context.extend(input_messages)
        if self.interrupted:
            return self._close_interrupted(state)
        self.system_prompt = await self._system_prompt()
        prompt_block = TextBlock._fast({"type": "text", "text": self.system_prompt})
        self._system_msg = Msg.make(Role.SYSTEM, [prompt_block])
        self.tools = tuple(agent.toolkit.schemas())
        options = agent.generate_options
        if resume is not None:
            paused = await self._resume(state, resume)
            if paused is not None:
                return paused
            if self.interrupted:
                return self._close_interrupted(state)
            if self.stop_request is not None:
                return self._close_stopped(state, None)

        for iteration in range(1, agent.max_iters + 1):
            if self.interrupted:
                return self._close_interrupted(state)
            self.round_msg = None
            self.round_acc = None
            self.capture = MessageAccumulator()
            rin = ReasoningInput(self._model_messages(state), self.tools, options, iteration)
            try:
                await self._step(self.reasoning_chain(rin), ExtensionPoint.ON_REASONING)
            except _Interrupted:
                return self._close_interrupted(state, partial=True)
            msg = self.round_msg
            if msg is None and self.capture is not None and not self.capture.empty:
                msg = self.capture.build(agent.name)  # on_reasoning short-circuited
            self.capture = None
            if msg is not None and msg.content:
                if msg.tool_calls:
                    msg.generate_reason = GenerateReason.TOOL_CALLS
                state.context.append(msg)
            # interrupt() may have returned while the step was finishing: no tool of
            # this reply may start, whatever the step produced.
            if self.interrupted:
                return self._close_interrupted(state)
            if self.stop_request is not None:
                return self._close_stopped(state, msg)
            if msg is not None and msg.tool_calls:
                paused = await self._act(state, msg)
                if paused is not None:
                    return paused
                if self.interrupted:
                    return self._close_interrupted(state)
                if self.stop_request is not None:
                    return self._close_stopped(state, None)
                continue
            if msg is not None and msg.has_visible_text:
                msg.generate_reason = GenerateReason.MODEL_STOP
                return msg
            reminder = HintBlock(hint=_EMPTY_ANSWER_REMINDER)
            state.context.append(Msg(role=Role.USER, content=[reminder]))

        self.emit(
            ExceedMaxItersEvent.make(self.source, max_iters=agent.max_iters,
                                     current_iter=agent.max_iters)
        )
        return await self._summarize(state)

    async def _summarize(self, state: AgentState) -> Msg:
        messages = (*self._model_messages(state),
                    Msg(role=Role.USER, content=[HintBlock(hint=_SUMMARY_HINT)]))
        self.round_msg = None
        try:
            await self._step(
                self._core_reasoning(ReasoningInput(messages, (), self.agent.generate_options)),
                None,
            )
        except _Interrupted:
            return self._close_interrupted(state, partial=True)
        if self.interrupted:
            return self._close_interrupted(state, partial=True)
        msg = self.round_msg or Msg(role=Role.ASSISTANT, content=[], name=self.agent.name)
        # Tools were not offered; a tool call here would never get a result.
        msg.content = [b for b in msg.content if not isinstance(b, ToolUseBlock)]
        msg.generate_reason = GenerateReason.MAX_ITERATIONS
        state.context.append(msg)
        return msg

    async def _step(self, source: Observable[AgentEvent], point: ExtensionPoint | None) -> None:
        """Run one step's stream to completion, forwarding its events to the caller.

        ``point`` is the hook chain the stream leaves (stop requests are watched there);
        ``None`` for the core's own stream."""
        assert self.loop is not None
        step = _Step(self.loop.create_future())
        emit = self.emit
        future = step.future
        loop = self.loop
        loop_thread = self.loop_thread

        # A middleware may move the stream to another thread (observe_on a thread
        # pool); signals are brought back to the loop so the call stays single-threaded.
        def late(fn: Callable[..., None], *args: Any) -> None:
            if not future.done():
                fn(*args)

        on_next: Callable[[AgentEvent], None]
        if point is not None:

            def on_next(event: AgentEvent) -> None:
                if _thread_id() != loop_thread:
                    loop.call_soon_threadsafe(late, on_next, event)
                    return
                if future.done():  # cut short: late events of a cancelled step
                    return
                kind = type(event)
                if kind not in _EVENT_TYPES and not _is_event(event):
                    future.set_exception(self._not_an_event(point, event))
                    return
                if isinstance(event, RequestStopEvent) and self.stop_request is None:
                    self.stop_request = event
                capture = self.capture
                if capture is not None:
                    capture.feed(event)
                emit(event)
        else:

            def on_next(event: AgentEvent) -> None:
                if _thread_id() != loop_thread:
                    loop.call_soon_threadsafe(late, on_next, event)
                    return
                if not future.done():
                    emit(event)

        def on_error(exc: Exception) -> None:
            if _thread_id() != loop_thread:
                loop.call_soon_threadsafe(late, on_error, exc)
            elif not future.done():
                future.set_exception(exc)

        def on_completed() -> None:
            if _thread_id() != loop_thread:
                loop.call_soon_threadsafe(late, on_completed)
            elif not future.done():
                future.set_result(None)

        self.step = step
        try:
            step.subscription = subscribe_direct(source, on_next, on_error, on_completed)
            await future
        finally:
            self.step = None
            if step.subscription is not None:
                step.subscription.dispose()

    # -- final messages ------------------------------------------------------------

    def _placeholder(self, state: AgentState, reason: GenerateReason, text: str = "") -> Msg:
        msg = Msg(role=Role.ASSISTANT, content=text, name=self.agent.name,
                  generate_reason=reason)
        state.context.append(msg)
        return msg

    def _close_stopped(self, state: AgentState, msg: Msg | None) -> Msg:
        stop = self.stop_request
        assert stop is not None
        reason = stop.generate_reason
        self._close_orphans(state, ToolResultState.INTERRUPTED,
                            f"Not executed: the reply was stopped ({stop.reason or reason.value}).")
        if msg is not None and msg.has_visible_text and not msg.tool_calls:
            msg.generate_reason = reason
            return msg
        placeholder = self._placeholder(state, reason)
        if stop.reason:
            placeholder.metadata = {"stop_reason": stop.reason}
        return placeholder

    def _close_interrupted(self, state: AgentState, partial: bool = False) -> Msg:
        if partial:
            acc = self.round_acc
            if acc is not None and not acc.empty:
                msg = acc.build(self.agent.name)
                if msg.content and (not state.context or state.context[-1] is not msg):
                    state.context.append(msg)
        text = "Interrupted before it finished."
        if self.batch is not None:  # the acting step was cut: finished results stay
            self.close_batch(self.batch, ToolResultState.INTERRUPTED, text)
        self._close_orphans(state, ToolResultState.INTERRUPTED, text)
        return self._placeholder(state, GenerateReason.INTERRUPTED, _INTERRUPTED_TEXT)

    def _close_orphans(
        self,
        state: AgentState,
        result_state: ToolResultState,
        text: str,
        only: set[str] | None = None,
        emit_events: bool = True,
    ) -> None:
        """Give every tool call in the context that has no result a synthesized one
        (only the calls in ``only`` when given)."""
        context = state.context
        answered: set[str] = set()
        start = 0
        if only is not None:
            # The batch's calls and results sit at the end: scan back to its message
            # instead of the whole conversation.
            for i in range(len(context) - 1, -1, -1):
                msg = context[i]
                if msg.role is Role.TOOL:
                    answered.update(b.id for b in msg.tool_results)
                elif msg.role is Role.ASSISTANT and any(c.id in only for c in msg.tool_calls):
                    start = i
                    break
        else:
            answered = {b.id for m in context if m.role is Role.TOOL for b in m.tool_results}
        reply_id = new_id()  # the synthesized results form one batch
        for msg in context[start:]:
            if msg.role is not Role.ASSISTANT:
                continue
            for call in msg.tool_calls:
                if call.id not in answered and (only is None or call.id in only):
                    answered.add(call.id)
                    block = ToolResultBlock(id=call.id, name=call.name, output=text,
                                            state=result_state)
                    if emit_events:
                        self.emit_result_events(reply_id, block)
                    state.context.append(Msg.make(Role.TOOL, [block], call.name))

    def emit_result_events(self, reply_id: str, block: ToolResultBlock) -> None:
        self._emit_block(reply_id, block, self.emit)

    def _emit_block(
        self, reply_id: str, block: ToolResultBlock, emit: Callable[[AgentEvent], None]
    ) -> None:
        common = {"reply_id": reply_id, "tool_call_id": block.id, "tool_call_name": block.name}
        emit(ToolResultStartEvent.make(self.source, **common))
        if block.text:
            emit(ToolResultTextDeltaEvent.make(self.source, delta=block.text, **common))
        emit(ToolResultEndEvent.make(self.source, state=block.state, **common))

    # -- core handlers -------------------------------------------------------------

    def _core_reasoning(self, rin: ReasoningInput) -> Observable[AgentEvent]:
        """Core of ``on_reasoning``: one model call; the message is rebuilt from what
        leaves the ``on_model_call`` chain."""

        def subscribe(
            observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
        ) -> rxabc.DisposableBase:
            self.capture = None
            acc = MessageAccumulator()
            self.round_acc = acc
            feed = acc.feed
            forward = observer.on_next
            failed: list[bool] = []

            def on_next(event: AgentEvent) -> None:
                if failed:
                    return
                if type(event) not in _EVENT_TYPES and not _is_event(event):
                    failed.append(True)
                    observer.on_error(self._not_an_event(ExtensionPoint.ON_MODEL_CALL, event))
                    return
                feed(event)
                forward(event)

            def on_error(exc: Exception) -> None:
                if not failed:
                    observer.on_error(exc)

            def on_completed() -> None:
                if failed:
                    return
                self.round_msg = acc.build(self.agent.name) if not acc.empty else None
                observer.on_completed()

            mci = ModelCallInput(rin.messages, rin.tools, rin.options, self.agent.model)
            return subscribe_direct(self.model_chain(mci), on_next, on_error, on_completed)

        assert self.loop is not None
        return DirectObservable(on_loop(self.loop, subscribe))

    def _core_model_call(self, mci: ModelCallInput) -> Observable[AgentEvent]:
        """Core of ``on_model_call``: stream the model, retrying and failing over
        before the first chunk."""
        run = self

        def subscribe(
            observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
        ) -> rxabc.DisposableBase:
            reply_id = new_id()
            emit = observer.on_next
            emit(ModelCallStartEvent.make(run.source, reply_id=reply_id,
                                          model_name=mci.model.name))
            attempt = ModelAttempts(run, mci, reply_id, observer)
            attempt.start()
            return Disposable(attempt.dispose)

        assert self.loop is not None
        return DirectObservable(on_loop(self.loop, subscribe))

    def _core_acting(self, ain: ActingInput) -> Observable[AgentEvent]:
        async def body(observer: rxabc.ObserverBase[AgentEvent]) -> None:
            await self._execute_batch(ain.tool_calls, observer.on_next)

        return from_coroutine(body, self.loop)

    # -- acting ------------------------------------------------------------------

    async def _resume(self, state: AgentState, event: ResumeEvent) -> Msg | None:
        """Continue the paused batch; a message when the reply pauses or ends again."""
        pending = state.pending
        assert pending is not None
        state.pending = None
        if isinstance(event, ExternalExecutionResultEvent):
            self.emit(ExternalExecutionResultEvent.make(
                self.source, reply_id=event.reply_id, tool_results=list(event.tool_results)))
            by_id = {r.id: r for r in event.tool_results}
            for call in pending.tool_calls:
                result = by_id[call.id]
                state.context.append(Msg.make(Role.TOOL, [result], result.name))
            return None
        self.emit(UserConfirmResultEvent.make(
            self.source, reply_id=event.reply_id, confirm_results=list(event.confirm_results)))
        denied: dict[str, str] = {}
        edited: dict[str, ToolUseBlock] = {}
        for decision in event.confirm_results:
            if decision.rules:
                state.permission_rules.extend(decision.rules)
            call = decision.tool_call
            if decision.confirmed:
                edited[call.id] = call
            else:
                denied[call.id] = decision.reason or "Denied by the user."
        if edited:
            apply_edits(state, edited)
        calls = [edited.get(c.id, c) for c in pending.batch]
        return await self._dispatch(state, calls, confirmed=set(edited), denied=denied)

    def _abandon_pending(self, state: AgentState) -> None:
        """A new message arrived instead of an answer: close the paused calls."""
        state.pending = None
        self._close_orphans(state, ToolResultState.INTERRUPTED,
                            "Not executed: the user sent a new message instead of answering.")

    async def _act(self, state: AgentState, msg: Msg) -> Msg | None:
        """Run the round's tool calls; a message when the reply pauses."""
        return await self._dispatch(state, msg.tool_calls)

    async def _dispatch(
        self,
        state: AgentState,
        calls: list[ToolUseBlock],
        confirmed: set[str] | None = None,
        denied: dict[str, str] | None = None,
    ) -> Msg | None:
        """Decide permissions, run what may run through ``on_acting``, and pause for
        confirmation or external execution when needed."""
        if self.interrupted:
            return self._close_interrupted(state)
        confirmed = confirmed or set()
        denied = denied or {}
        toolkit = self.agent.toolkit
        # One reply id for every result of this batch, however it is decided.
        self.batch_reply_id = new_id()
        run: list[ToolUseBlock] = []
        ask: list[ToolUseBlock] = []
        external: list[ToolUseBlock] = []
        for call in calls:
            tool = toolkit.get(call.name)
            if call.id in denied:
                run.append(call)  # the core writes the user's denial
                continue
            if call.id not in confirmed:
                decision, reason = decide(
                    call, tool, [*state.permission_rules, *self.agent.permission_rules])
                if decision == "deny":
                    self._write_denied(state, call, reason or "permission denied by rules")
                    continue
                if decision == "ask":
                    ask.append(call)
                    continue
            if tool is not None and tool.external:
                external.append(call)
            else:
                run.append(call)
        if ask:
            waiting = {c.id for c in ask}
            rest = {c.id for c in run} | {c.id for c in external}
            batch = [c for c in calls if c.id in waiting or c.id in rest]
            return self._pause(state, "confirm", ask, batch, denied)
        if run:
            if self.interrupted:
                return self._close_interrupted(state)
            self.user_denied = denied
            try:
                await self._step(self.acting_chain(ActingInput(tuple(run))),
                                 ExtensionPoint.ON_ACTING)
            except _Interrupted:
                return self._close_interrupted(state)
            finally:
                self.user_denied = {}
            if self.interrupted:
                return self._close_interrupted(state)
            # Calls the chain did not run (a middleware short-circuited) still get results.
            self._close_orphans(state, ToolResultState.ERROR,
                                "Not executed: the on_acting chain did not run this tool call.",
                                only={c.id for c in run})
        if external and not self.interrupted and self.stop_request is None:
            return self._pause(state, "external", external, external, {})
        return None

    def _pause(
        self,
        state: AgentState,
        kind: Literal["confirm", "external"],
        waiting: list[ToolUseBlock],
        batch: list[ToolUseBlock],
        denied: dict[str, str],
    ) -> Msg:
        reply_id = new_id()
        # Denials the user already gave (a mixed batch paused again) are kept as results.
        for call in batch:
            if call.id in denied:
                self._write_denied(state, call, denied[call.id])
        batch = [c for c in batch if c.id not in denied]
        state.pending = PendingToolCalls(reply_id=reply_id, kind=kind,
                                         tool_calls=list(waiting), batch=list(batch))
        if kind == "confirm":
            reason = GenerateReason.PERMISSION_ASKING
            self.emit(RequireUserConfirmEvent.make(self.source, reply_id=reply_id,
                                                   tool_calls=list(waiting)))
            self.emit(RequestStopEvent.make(
                self.source, reason="Waiting for the user to confirm tool calls.",
                generate_reason=reason))
        else:
            reason = GenerateReason.TOOL_SUSPENDED
            self.emit(RequireExternalExecutionEvent.make(self.source, reply_id=reply_id,
                                                         tool_calls=list(waiting)))
        # Not stored: the context must go on with the results of these calls.
        return Msg(role=Role.ASSISTANT, content=list(waiting), name=self.agent.name,
                   generate_reason=reason, metadata={"reply_id": reply_id})

    def _write_denied(self, state: AgentState, call: ToolUseBlock, reason: str) -> None:
        block = _denied(call, reason)
        self.emit_result_events(self.batch_reply_id or new_id(), block)
        state.context.append(Msg.make(Role.TOOL, [block], call.name))

    async def _execute_batch(
        self, calls: tuple[ToolUseBlock, ...], emit: Callable[[AgentEvent], None]
    ) -> None:
        """Core of ``on_acting``: run the batch, adding results to the context in call
        order. Calls run concurrently only when every tool is concurrency-safe."""
        reply_id = self.batch_reply_id or new_id()
        toolkit = self.agent.toolkit
        denied = self.user_denied
        batch = _Batch(calls)
        self.batch = batch
        results = batch.results
        try:
            if denied and all(c.id in denied for c in calls):
                for call in calls:
                    block = _denied(call, denied[call.id])
                    self._emit_block(reply_id, block, emit)
                    results[call.id] = block
                self.close_batch(batch)
                emit(AllToolsDeniedEvent.make(self.source, denied_tool_calls=list(calls)))
                return
            concurrent = len(calls) > 1 and not denied and all(
                (t := toolkit.get(c.name)) is not None and t.concurrency_safe for c in calls
            )
            if not concurrent:
                for call in calls:
                    if self.interrupted:  # a tool of this batch asked: the rest never start
                        break
                    if call.id in denied:
                        block = _denied(call, denied[call.id])
                        self._emit_block(reply_id, block, emit)
                        results[call.id] = block
                    else:
                        results[call.id] = await self.run_tool(call, reply_id, emit)
            elif not self.interrupted:
                await self._run_concurrently(batch, reply_id, emit)
            self.close_batch(batch)
        finally:
            # Cancelled midway (disposed or cut): keep what finished, in call order.
            self.close_batch(batch, ToolResultState.INTERRUPTED, "Cancelled before it finished.")

    async def _run_concurrently(
        self, batch: _Batch, reply_id: str, emit: Callable[[AgentEvent], None]
    ) -> None:
        results = batch.results

        async def one(call: ToolUseBlock) -> None:
            block = await self.run_tool(call, reply_id, emit)
            if not batch.closed:  # a cancelled tool finishing late is not recorded
                results[call.id] = block

        assert self.loop is not None
        tasks = [self.loop.create_task(one(c)) for c in batch.calls]
        try:
            await asyncio.wait(tasks)
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()

    def close_batch(
        self,
        batch: _Batch,
        missing_state: ToolResultState | None = None,
        missing_text: str = "",
    ) -> None:
        """Write the batch's results into the context in call order (once); calls
        without a result get a synthesized one when ``missing_state`` is given."""
        if batch.closed:
            return
        batch.closed = True
        if self.batch is batch:
            self.batch = None
        state = self.state
        if state is None or self.sealed:
            return  # the run already closed the context (it synthesized what was missing)
        reply_id = self.batch_reply_id or new_id()
        for call in batch.calls:
            block = batch.results.get(call.id)
            if block is None:
                if missing_state is None:
                    continue
                block = ToolResultBlock(id=call.id, name=call.name, output=missing_text,
                                        state=missing_state)
                self.emit_result_events(reply_id, block)
            state.context.append(Msg.make(Role.TOOL, [block], block.name))

    # -- tools -------------------------------------------------------------------

    async def run_tool(
        self, call: ToolUseBlock, reply_id: str, emit: Callable[[AgentEvent], None]
    ) -> ToolResultBlock:
        """Execute one tool call, streaming its result events; never raises (but for
        cancellation): failures become ERROR results the model can read."""
        source = self.source
        common = {"reply_id": reply_id, "tool_call_id": call.id, "tool_call_name": call.name}
        emit(ToolResultStartEvent.make(source, **common))
        tool: Tool | None = self.agent.toolkit.get(call.name)
        state = ToolResultState.SUCCESS
        output: str | list[Any]
        streamed = False
        if tool is None:
            names = ", ".join(self.agent.toolkit.names) or "none"
            output = f"Error: there is no tool named {call.name!r}. Available tools: {names}."
            state = ToolResultState.ERROR
        elif call.raw_input is not None:
            output = (
                f"Error: the arguments of tool {call.name!r} are not a valid JSON object: "
                f"{call.raw_input[:200]!r}"
            )
            state = ToolResultState.ERROR
        else:
            try:
                kwargs = tool.validate(call.input)
                started = tool.invoke(kwargs, self.tool_ctx, self.agent.toolkit.executor)
                if is_stream(started):
                    parts: list[str] = []
                    async for chunk in started:
                        text = scrub(tool_output_text(chunk))
                        if text:
                            parts.append(text)
                            emit(ToolResultTextDeltaEvent.make(source, delta=text, **common))
                    output = "".join(parts)
                    streamed = True
                else:
                    value = await resolve(started)
                    output, state = _tool_value(value)
            except asyncio.CancelledError as exc:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # the call is being cancelled (dispose, interrupt)
                # The tool's own inner await was cancelled: a tool failure.
                output = _tool_error(call.name, exc)
                state = ToolResultState.ERROR
            except ToolArgumentError as exc:
                output, state = f"Error: {exc}", ToolResultState.ERROR
            except BaseException as exc:
                # SystemExit (argparse in a tool), KeyboardInterrupt, ...: left alone they
                # would stop the shared event loop; they are this tool's failure.
                output = _tool_error(call.name, exc)
                state = ToolResultState.ERROR
        if not streamed:
            if isinstance(output, str):
                output = scrub(output)
                if output:
                    emit(ToolResultTextDeltaEvent.make(source, delta=output, **common))
            else:
                for block in output:
                    if isinstance(block, TextBlock) and block.text:
                        emit(ToolResultTextDeltaEvent.make(source, delta=block.text, **common))
                    elif isinstance(block, DataBlock):
                        emit(ToolResultDataDeltaEvent.make(source, delta=block, **common))
        emit(ToolResultEndEvent.make(source, state=state, **common))
        return ToolResultBlock(id=call.id, name=call.name, output=output, state=state)


def _tool_error(name: str, exc: BaseException) -> str:
    return f"Error: tool {name!r} raised {type(exc).__name__}: {exc}"


def _denied(call: ToolUseBlock, reason: str) -> ToolResultBlock:
    return ToolResultBlock(id=call.id, name=call.name, output=reason,
                           state=ToolResultState.DENIED)


def _tool_value(value: Any) -> tuple[str | list[Any], ToolResultState]:
    if isinstance(value, ToolResultBlock):
        return value.output, value.state
    if isinstance(value, (TextBlock, DataBlock)):
        return [value], ToolResultState.SUCCESS
    if isinstance(value, list) and value and all(
        isinstance(v, (TextBlock, DataBlock)) for v in value
    ):
        return list(value), ToolResultState.SUCCESS
    return tool_output_text(value), ToolResultState.SUCCESS
