"""The ReAct loop of one call: rounds of reasoning and acting, the summary, the end.

Each step returns its value: :meth:`ReActLoop.reason` a :class:`Round`, the loop the
final :class:`Msg`. A round's assistant message is rebuilt from the events that leave
the ``on_model_call`` chain (so a middleware's rewrite is what the context stores).
"""

from __future__ import annotations

from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import Disposable

from .._record import new_id
from .._rx import DirectObservable, on_loop, subscribe_direct
from .._text import check_value
from ..context import AgentState
from ..event import AgentEvent, ExceedMaxItersEvent, ModelCallStartEvent
from ..message import GenerateReason, HintBlock, Msg, Role, TextBlock, ToolUseBlock
from ..middleware.base import ExtensionPoint
from ..middleware.inputs import AgentInput, ModelCallInput, ReasoningInput
from ._acting import Acting
from ._blocks import MessageAccumulator
from ._hitl import check_resume
from ._model_call import ModelAttempts
from ._steps import CallScope, Interrupted

__all__ = ["ReActLoop", "Round"]

_EMPTY_ANSWER_REMINDER = (
    "Your last reply had no visible answer and no tool call. Reply to the user with "
    "text, or call a tool."
)
_SUMMARY_HINT = (
    "You have used the maximum number of reasoning rounds. Do not call any tools; "
    "summarize what you found and answer the user as well as you can now."
)


class Round:
    """What one reasoning step produced.

    ``msg`` is the assistant message rebuilt from the last model call below
    ``on_reasoning``; ``capture`` rebuilds one from what left ``on_reasoning`` when a
    middleware answered without calling the model; ``acc`` is the model call in
    flight (its partial message is kept when the round is interrupted).
    """

    __slots__ = ("acc", "capture", "msg")

    def __init__(self) -> None:
        self.msg: Msg | None = None
        self.acc: MessageAccumulator | None = None
        self.capture: MessageAccumulator | None = MessageAccumulator()

    def partial(self, name: str) -> Msg | None:
        acc = self.acc
        return acc.build(name) if acc is not None and not acc.empty else None


class ReActLoop:
    """Rounds of ``on_reasoning`` (with ``on_model_call`` inside) and ``on_acting``."""

    __slots__ = ("acting", "model_chain", "reasoning_chain", "round", "scope", "system_msg")

    def __init__(self, scope: CallScope) -> None:
        self.scope = scope
        plan = scope.config.plan
        self.reasoning_chain = plan.wrap(ExtensionPoint.ON_REASONING, scope.agent, scope.ctx,
                                         self.core_reasoning)
        self.model_chain = plan.wrap(ExtensionPoint.ON_MODEL_CALL, scope.agent, scope.ctx,
                                     self.core_model_call)
        self.acting = Acting(scope)
        self.round: Round | None = None
        self.system_msg: Msg | None = None

    def _model_messages(self, state: AgentState) -> tuple[Msg, ...]:
        if self.system_msg is not None:
            return (self.system_msg, *state.context)
        return tuple(state.context)

    async def run(self, state: AgentState, input_messages: list[Msg], inp: AgentInput) -> Msg:
        """The whole loop; returns the reply's final message (stored in the context)."""
        scope = self.scope
        config = scope.config
        acting = self.acting
        resume = inp.resume
        for i, m in enumerate(input_messages):  # bad text never enters the context
            check_value(m, f"input message #{i}")
        if resume is not None:
            check_value(resume, type(resume).__name__)
            check_resume(state, resume, state.session_id)  # raises before anything changes
        elif state.pending is not None:
            acting.abandon_pending(state)
        state.context.extend(input_messages)
        if scope.interrupted:
            return scope.close_interrupted(state)
        prompt = await config.plan.system_prompt(scope.agent, scope.ctx, config.sys_prompt)
        if prompt.strip():
            block = TextBlock._fast({"type": "text", "text": prompt})
            self.system_msg = Msg.make(Role.SYSTEM, [block])
        tools = tuple(config.toolkit.schemas())
        options = config.generate_options
        if resume is not None:
            ended = await self._after_acting(state, await acting.resume(state, resume))
            if ended is not None:
                return ended

        # A continue request may raise the limit, never past twice max_iters.
        limit, cap = config.max_iters, 2 * config.max_iters
        iteration = 0
        while iteration < limit:
            iteration += 1
            if scope.interrupted:
                return scope.close_interrupted(state)
            rin = ReasoningInput(self._model_messages(state), tools, options, iteration)
            rnd = Round()
            scope.continue_request = None  # heard per round
            try:
                msg = await self.reason(rin, rnd)
            except Interrupted:
                return scope.close_interrupted(state, rnd.partial(config.name))
            if msg is not None and msg.content:
                if msg.tool_calls:
                    msg.generate_reason = GenerateReason.TOOL_CALLS
                state.context.append(msg)
            # interrupt() may have returned while the step was finishing: no tool of
            # this reply may start, whatever the step produced.
            if scope.interrupted:
                return scope.close_interrupted(state)
            if scope.stop_request is not None:
                return scope.close_stopped(state, msg)
            if msg is not None and msg.tool_calls:
                if scope.checkpoint is not None:  # the calls are stored before they run
                    await scope.checkpoint()
                ended = await self._after_acting(state,
                                                 await acting.dispatch(state, msg.tool_calls))
                if ended is not None:
                    return ended
                continue
            if msg is not None and msg.has_visible_text:
                request = scope.continue_request
                if request is None:
                    msg.generate_reason = GenerateReason.MODEL_STOP
                    return msg
                # Not the reply's end: stored without a generate_reason, like a round
                # the loop goes on from.
                limit = min(limit + request.extra_iters, cap)
                hint = request.hint
                if not hint:
                    continue
                check_value(hint, "RequestContinueEvent.hint")
            else:
                hint = _EMPTY_ANSWER_REMINDER
            state.context.append(Msg(role=Role.USER, content=[HintBlock(hint=hint)]))

        scope.emit(
            ExceedMaxItersEvent.make(scope.source, max_iters=config.max_iters,
                                     current_iter=iteration)
        )
        return await self.summarize(state)

    async def _after_acting(self, state: AgentState, ended: Msg | None) -> Msg | None:
        """After a batch (run or resumed): the reply's end, or ``None`` to go on (its
        results then are checkpointed)."""
        scope = self.scope
        if ended is not None:
            return ended
        if scope.interrupted:
            return scope.close_interrupted(state)
        if scope.stop_request is not None:
            return scope.close_stopped(state, None)
        if scope.checkpoint is not None:  # the batch's results are complete
            await scope.checkpoint()
        return None

    async def reason(self, rin: ReasoningInput, rnd: Round) -> Msg | None:
        """One reasoning step through the ``on_reasoning`` chain; the round's message."""
        self.round = rnd
        try:
            await self.scope.run_step(self.reasoning_chain(rin), ExtensionPoint.ON_REASONING,
                                      rnd)
        finally:
            self.round = None
        if rnd.msg is None and rnd.capture is not None and not rnd.capture.empty:
            return rnd.capture.build(self.scope.config.name)  # on_reasoning short-circuited
        return rnd.msg

    async def summarize(self, state: AgentState) -> Msg:
        """The call after ``max_iters`` rounds: no tools, answer with what you have."""
        scope = self.scope
        messages = (*self._model_messages(state),
                    Msg(role=Role.USER, content=[HintBlock(hint=_SUMMARY_HINT)]))
        rnd = Round()
        rnd.capture = None
        self.round = rnd
        try:
            await scope.run_step(
                self.core_reasoning(ReasoningInput(messages, (), scope.config.generate_options)),
                None,
            )
        except Interrupted:
            return scope.close_interrupted(state, rnd.partial(scope.config.name))
        finally:
            self.round = None
        if scope.interrupted:
            return scope.close_interrupted(state, rnd.msg)
        msg = rnd.msg or Msg(role=Role.ASSISTANT, content=[], name=scope.config.name)
        # Tools were not offered; a tool call here would never get a result.
        msg.content = [b for b in msg.content if not isinstance(b, ToolUseBlock)]
        msg.generate_reason = GenerateReason.MAX_ITERATIONS
        state.context.append(msg)
        return msg

    # -- core handlers -------------------------------------------------------------

    def core_reasoning(self, rin: ReasoningInput) -> Observable[AgentEvent]:
        """Core of ``on_reasoning``: one model call; the message is rebuilt from what
        leaves the ``on_model_call`` chain."""
        scope = self.scope

        def subscribe(
            observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
        ) -> rxabc.DisposableBase:
            rnd = self.round
            acc = MessageAccumulator()
            if rnd is not None:
                rnd.capture = None  # the model answers: the capture is not needed
                rnd.acc = acc
            feed = acc.feed
            forward = observer.on_next

            # Items that are not events (an on_model_call middleware's mistake) are
            # ignored by the accumulator and refused by the reasoning step's check.
            def on_next(event: AgentEvent) -> None:
                feed(event)
                forward(event)

            def on_completed() -> None:
                if rnd is not None:
                    rnd.msg = acc.build(scope.config.name) if not acc.empty else None
                observer.on_completed()

            mci = ModelCallInput(rin.messages, rin.tools, rin.options, scope.config.model)
            return subscribe_direct(self.model_chain(mci), on_next, observer.on_error,
                                    on_completed)

        assert scope.affinity is not None
        return DirectObservable(on_loop(scope.affinity, subscribe))

    def core_model_call(self, mci: ModelCallInput) -> Observable[AgentEvent]:
        """Core of ``on_model_call``: stream the model, retrying and failing over
        before the first chunk."""
        scope = self.scope

        def subscribe(
            observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
        ) -> rxabc.DisposableBase:
            reply_id = new_id()
            observer.on_next(ModelCallStartEvent.make(scope.source, reply_id=reply_id,
                                                      model_name=mci.model.name))
            attempt = ModelAttempts(scope.config, scope.source, scope.loop, mci, reply_id,
                                    observer)
            attempt.start()
            return Disposable(attempt.dispose)

        assert scope.affinity is not None
        return DirectObservable(on_loop(scope.affinity, subscribe))
