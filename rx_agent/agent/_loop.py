"""The ReAct loop of one call: rounds of reasoning and acting, the summary, the end.

Each step returns its value: :meth:`ReActLoop.reason` a :class:`Round`, the loop the
final :class:`Msg`. A round's assistant message is rebuilt from the events that leave
the ``on_model_call`` chain (so a middleware's rewrite is what the context stores).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import reactivex
from pydantic import BaseModel
from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import Disposable

from .._record import new_id
from .._rx import DirectObservable, on_loop, subscribe_observer
from .._text import check_value, is_clean
from ..context import AgentState
from ..event import AgentEvent, ExceedMaxItersEvent, ModelCallStartEvent
from ..message import GenerateReason, HintBlock, Msg, Role, TextBlock, ToolUseBlock
from ..middleware.base import ExtensionPoint
from ..middleware.inputs import AgentInput, CompressContextInput, ModelCallInput, ReasoningInput
from ..middleware.types import Handler
from ..tool._caller import CallerTools
from ._acting import Acting
from ._blocks import MessageAccumulator
from ._compress import replace_context
from ._hitl import check_resume
from ._model_call import ModelAttempts
from ._steps import CallScope, Interrupted
from ._structured import StructuredOutput, StructuredOutputError

__all__ = ["ReActLoop", "Round"]

_thread_id = threading.get_ident

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

    def __init__(self, capture: bool = True) -> None:
        self.msg: Msg | None = None
        self.acc: MessageAccumulator | None = None
        # Only an on_reasoning layer can answer without the model.
        self.capture: MessageAccumulator | None = MessageAccumulator() if capture else None

    def result(self, name: str) -> Msg | None:
        """The round's message: the model's, or what left ``on_reasoning`` when a
        middleware answered without calling the model."""
        capture = self.capture
        if self.msg is None and capture is not None and not capture.empty:
            return capture.build(name)
        return self.msg

    def partial(self, name: str) -> Msg | None:
        acc = self.acc
        return acc.build(name) if acc is not None and not acc.empty else None


class ReActLoop:
    """Rounds of ``on_reasoning`` (with ``on_model_call`` inside) and ``on_acting``."""

    __slots__ = ("_acting", "compress_chain", "compressed", "model_chain", "reasoning_chain",
                 "round", "scope", "structured", "system_msg")

    reasoning_chain: Handler[ReasoningInput] | None
    model_chain: Handler[ModelCallInput] | None

    def __init__(self, scope: CallScope, structured_model: type[BaseModel] | None = None) -> None:
        self.scope = scope
        self.structured = None if structured_model is None else \
            StructuredOutput(structured_model, scope.config.model)
        plan = scope.config.plan
        # None where no layer wraps the core (the core is called directly: no bound
        # method kept per call).
        self.reasoning_chain = plan.wrap(ExtensionPoint.ON_REASONING, scope.agent, scope.ctx,
                                         self.core_reasoning) \
            if ExtensionPoint.ON_REASONING in plan.layered else None
        self.model_chain = plan.wrap(ExtensionPoint.ON_MODEL_CALL, scope.agent, scope.ctx,
                                     self.core_model_call) \
            if ExtensionPoint.ON_MODEL_CALL in plan.layered else None
        point = ExtensionPoint.ON_COMPRESS_CONTEXT
        # No step at all unless a middleware hooks it (a Java port's rounds are as before).
        self.compress_chain = plan.wrap(point, scope.agent, scope.ctx, self.core_compress) \
            if point in plan.layered else None
        self.compressed = False
        self._acting: Acting | None = None  # made by the first round that calls a tool
        self.round: Round | None = None
        self.system_msg: Msg | None = None

    @property
    def acting(self) -> Acting:
        acting = self._acting
        if acting is None:
            acting = self._acting = Acting(self.scope)
        return acting

    def _model_messages(self, state: AgentState) -> tuple[Msg, ...]:
        if self.system_msg is not None:
            return (self.system_msg, *state.context)
        return tuple(state.context)

    async def run(self, state: AgentState, input_messages: Sequence[Msg],
                  inp: AgentInput) -> Msg:
        """The whole loop; returns the reply's final message (stored in the context)."""
        scope = self.scope
        config = scope.config
        resume = inp.resume
        if not is_clean(input_messages):  # bad text never enters the context
            for i, m in enumerate(input_messages):
                check_value(m, f"input message #{i}")
        if resume is not None:
            check_value(resume, type(resume).__name__)
            check_resume(state, resume, state.session_id)  # raises before anything changes
        elif state.pending is not None:
            self.acting.abandon_pending(state)
        state.context.extend(input_messages)
        if scope.interrupted:
            return scope.close_interrupted(state)
        plan = config.plan
        prompt = await plan.system_prompt(scope.agent, scope.ctx, config.sys_prompt) \
            if ExtensionPoint.ON_SYSTEM_PROMPT in plan.layered else config.sys_prompt.strip()
        if prompt.strip():
            block = TextBlock._fast({"type": "text", "text": prompt})
            self.system_msg = Msg.make(Role.SYSTEM, [block])
        if config.toolkit.has_sources:  # MCP servers: tools listed once per connection
            await config.toolkit.refresh()
        options = config.generate_options
        structured = self.structured
        if structured is not None:  # the response tool joins this call's tools
            scope.toolkit = structured.toolkit(config.toolkit)
            scope.response_tool = structured.tool
            options = structured.options(options)
        caller = scope.ctx.get(CallerTools)
        if caller is not None:  # the caller's own tools (a protocol client's) join too
            scope.toolkit = caller.overlay(scope.toolkit)
        tools = tuple(scope.toolkit.schemas())
        if resume is not None:
            ended = await self._after_acting(state, await self.acting.resume(state, resume))
            if ended is not None:
                return ended
            if structured is not None and structured.result is not None:
                return self._structured_end(state, structured)

        # A continue request may raise the limit, never past twice max_iters.
        limit, cap = config.max_iters, 2 * config.max_iters
        iteration = 0
        while iteration < limit:
            iteration += 1
            if scope.interrupted:
                return scope.close_interrupted(state)
            if self.compress_chain is not None:
                ended = await self.compress(state, tools, iteration)
                if ended is not None:
                    return ended
            rin = ReasoningInput(self._model_messages(state), tools, options, iteration)
            rnd = Round(self.reasoning_chain is not None)
            scope.continue_request = None  # heard per round (one from compression too)
            # One reasoning step through the on_reasoning chain (inline: no coroutine
            # per round).
            self.round = rnd
            chain = self.reasoning_chain
            try:
                await scope.run_step(chain(rin) if chain is not None else _ReasoningCall(self, rin),
                                     ExtensionPoint.ON_REASONING, rnd)
            except Interrupted:
                return scope.close_interrupted(state, rnd.partial(config.name))
            finally:
                self.round = None
            msg = rnd.result(config.name)
            calls = msg.tool_calls if msg is not None else None
            if msg is not None and msg.content:
                if calls:
                    msg.generate_reason = GenerateReason.TOOL_CALLS
                state.context.append(msg)
            # interrupt() may have returned while the step was finishing: no tool of
            # this reply may start, whatever the step produced.
            if scope.interrupted:
                return scope.close_interrupted(state)
            if scope.stop_request is not None:
                return scope.close_stopped(state, msg)
            if calls:
                if scope.checkpoint is not None:  # the calls are stored before they run
                    await scope.checkpoint()
                ended = await self._after_acting(
                    state, await self.acting.dispatch(state, calls))
                if ended is not None:
                    return ended
                if structured is not None:
                    if structured.result is not None:
                        return self._structured_end(state, structured)
                    structured.check_attempts()  # bad arguments count
                continue
            visible = msg is not None and msg.has_visible_text
            if visible and structured is not None:
                assert msg is not None
                # Not the end until the answer validates (native: the text itself).
                hint = structured.from_text(msg) if structured.native else structured.reminder()
                if hint is None:
                    return self._structured_end(state, structured, msg)
                structured.check_attempts()
            elif visible:
                assert msg is not None
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
        if structured is not None:
            raise StructuredOutputError(
                f"no valid {structured.model.__name__} within max_iters={config.max_iters} "
                "rounds")
        return await self.summarize(state)

    def _structured_end(
        self, state: AgentState, structured: StructuredOutput, answer: Msg | None = None
    ) -> Msg:
        """The reply's end with the validated data (``answer``: the native-mode text
        message, already stored, which becomes the final one)."""
        final = structured.final(self.scope.config.name)
        if answer is not None and state.context and state.context[-1] is answer:
            state.context.pop()
        state.context.append(final)
        return final

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

    async def compress(
        self, state: AgentState, tools: tuple[dict[str, Any], ...], iteration: int
    ) -> Msg | None:
        """The ``on_compress_context`` step at the top of a round: the reply's end when
        it was interrupted or stopped, else ``None`` (a replaced context is saved)."""
        scope = self.scope
        assert self.compress_chain is not None
        cin = CompressContextInput(tuple(state.context), scope.config.model, self.system_msg,
                                   tools, iteration)
        self.compressed = False
        try:
            await scope.run_step(self.compress_chain(cin), ExtensionPoint.ON_COMPRESS_CONTEXT)
        except Interrupted:
            return scope.close_interrupted(state)
        if scope.interrupted:
            return scope.close_interrupted(state)
        if scope.stop_request is not None:
            return scope.close_stopped(state, None)
        if self.compressed and scope.checkpoint is not None:
            await scope.checkpoint()
        return None

    async def summarize(self, state: AgentState) -> Msg:
        """The call after ``max_iters`` rounds: no tools, answer with what you have."""
        scope = self.scope
        messages = (*self._model_messages(state),
                    Msg(role=Role.USER, content=[HintBlock(hint=_SUMMARY_HINT)]))
        rnd = Round(capture=False)
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

    def close(self) -> None:
        """At the call's end: drop the chains (they hold this loop's bound cores, a
        cycle reference counting alone would not free)."""
        if self.reasoning_chain is not None:
            self.reasoning_chain = _closed
        if self.model_chain is not None:
            self.model_chain = _closed
        acting = self._acting
        if acting is not None and acting.chain is not None:
            acting.chain = _closed

    # -- core handlers -------------------------------------------------------------

    def core_reasoning(self, rin: ReasoningInput) -> Observable[AgentEvent]:
        """Core of ``on_reasoning``: one model call; the message is rebuilt from what
        leaves the ``on_model_call`` chain."""
        return _ReasoningCall(self, rin)

    def core_compress(self, cin: CompressContextInput) -> Observable[AgentEvent]:
        """Core of ``on_compress_context``: store the context it was handed, when a
        middleware replaced it (checked first: no tool call loses its result)."""
        scope = self.scope

        def subscribe(
            observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
        ) -> rxabc.DisposableBase:
            state = scope.state
            assert state is not None
            try:
                event = replace_context(state, cin, scope.source, scope.config.plan)
            except Exception as exc:
                observer.on_error(exc)
                return Disposable()
            if event is not None:
                self.compressed = True
                observer.on_next(event)
            observer.on_completed()
            return Disposable()

        assert scope.affinity is not None
        return DirectObservable(on_loop(scope.affinity, subscribe))

    def core_model_call(self, mci: ModelCallInput) -> Observable[AgentEvent]:
        """Core of ``on_model_call``: stream the model, retrying and failing over
        before the first chunk."""
        return _ModelCall(self.scope, mci)


def _closed(inp: Any) -> Observable[AgentEvent]:
    return reactivex.throw(RuntimeError("the call has ended"))


class _ReasoningCall(DirectObservable[AgentEvent]):
    """One subscription of the reasoning core: the ``on_model_call`` chain, its events
    fed to the round's accumulator on their way out; with no layer there, the model
    call itself builds the round's message (and, on a quiet call, emits no events)."""

    def __init__(self, react: ReActLoop, rin: ReasoningInput) -> None:
        self._subscribe = None
        self.react = react
        self.rin = rin

    def direct(
        self, observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
    ) -> rxabc.DisposableBase:
        react = self.react
        scope = react.scope
        where = scope.affinity
        assert where is not None
        if _thread_id() != where.thread:  # next() called on another thread
            return on_loop(where, self.direct)(observer, scheduler)
        rnd = react.round
        acc = MessageAccumulator()
        if rnd is not None:
            rnd.capture = None  # the model answers: the capture is not needed
            rnd.acc = acc
        rin = self.rin
        mci = ModelCallInput(rin.messages, rin.tools, rin.options, scope.config.model)
        chain = react.model_chain
        if chain is None:
            # Nothing between the core and this round: the converter builds the
            # message and its events go straight to ``observer``; when no layer at
            # all reads them (a quiet call), it makes none.
            silent = scope.quiet and react.reasoning_chain is None
            return _ModelCall(scope, mci, acc, observer.on_next, silent, rnd).direct(observer)
        return subscribe_observer(chain(mci), _Accumulating(acc, rnd, observer, scope.config.name))


class _Accumulating(rxabc.ObserverBase[AgentEvent]):
    """Feeds what leaves the ``on_model_call`` chain to the round's accumulator.

    Items that are not events (an on_model_call middleware's mistake) are ignored by
    the accumulator and refused by the reasoning step's check."""

    __slots__ = ("acc", "name", "observer", "rnd")

    def __init__(self, acc: MessageAccumulator, rnd: Round | None,
                 observer: rxabc.ObserverBase[AgentEvent], name: str) -> None:
        self.acc = acc
        self.rnd = rnd
        self.observer = observer
        self.name = name

    def on_next(self, event: AgentEvent) -> None:
        self.acc.feed(event)
        self.observer.on_next(event)

    def on_error(self, error: Exception) -> None:
        self.observer.on_error(error)

    def on_completed(self) -> None:
        rnd, acc = self.rnd, self.acc
        if rnd is not None:
            rnd.msg = acc.build(self.name) if not acc.empty else None
        self.observer.on_completed()


class _ModelCall(DirectObservable[AgentEvent]):
    """One subscription of the model-call core: a :class:`ModelAttempts`."""

    def __init__(self, scope: CallScope, mci: ModelCallInput,
                 acc: MessageAccumulator | None = None,
                 emit: Callable[[AgentEvent], None] | None = None,
                 silent: bool = False, into: Round | None = None) -> None:
        self._subscribe = None
        self.scope = scope
        self.mci = mci
        self.acc = acc  # see ModelAttempts
        self.emit = emit
        self.silent = silent
        self.into = into

    def direct(
        self, observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
    ) -> rxabc.DisposableBase:
        scope = self.scope
        where = scope.affinity
        assert where is not None
        if _thread_id() != where.thread:
            return on_loop(where, self.direct)(observer, scheduler)
        mci = self.mci
        reply_id = new_id()
        if not self.silent:
            emit = self.emit or observer.on_next
            emit(ModelCallStartEvent.make(scope.source, reply_id=reply_id,
                                          model_name=mci.model.name))
        attempt = ModelAttempts(scope.config, scope.source, scope.loop, mci, reply_id,
                                observer, self.acc, self.emit, self.silent, self.into)
        attempt.start()
        return attempt
