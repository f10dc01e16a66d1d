"""The state of one call's ReAct loop, its hook chains and their core handlers.

The loop's steps (:mod:`._machine`: compress, reason, act, summarize, ...) read and
change a :class:`ReActLoop`; a driver (:mod:`._driver`) runs them. A round's
reasoning step runs the ``on_reasoning`` chain, whose core (:class:`ReasoningCall`)
runs ``on_model_call``, whose core (:class:`ModelCall`) streams the model. A round's
assistant message is rebuilt from the events that leave the ``on_model_call`` chain
(so a middleware's rewrite is what the context stores): a :class:`Round` holds it.
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

from .._history import History, snapshot
from .._record import new_id
from .._rx import DirectObservable, on_loop, subscribe_observer
from .._text import check_value, is_clean
from ..context import AgentState
from ..event import AgentEvent, ModelCallStartEvent
from ..message import Msg
from ..middleware.base import ExtensionPoint
from ..middleware.inputs import AgentInput, CompressContextInput, ModelCallInput, ReasoningInput
from ..middleware.types import Handler
from ..options import GenerateOptions
from ._acting import Acting
from ._blocks import MessageAccumulator
from ._compress import replace_context
from ._hitl import ResumeEvent, check_resume
from ._model_call import ModelAttempts
from ._steps import CallScope
from ._structured import StructuredOutput

__all__ = ["ModelCall", "ReActLoop", "ReasoningCall", "Round"]

_thread_id = threading.get_ident


class Round(MessageAccumulator):
    """What one reasoning step produced.

    ``msg`` is the assistant message rebuilt from the last model call below
    ``on_reasoning``; ``capture`` rebuilds one from what left ``on_reasoning`` when a
    middleware answered without calling the model. The round is the accumulator of
    its first model call (no object of its own per call in flight); a later one (a
    middleware calling ``next()`` again) builds into its own, ``acc``. The model call
    in flight's partial message is kept when the round is interrupted.
    """

    __slots__ = ("acc", "capture", "msg", "started")

    def __init__(self, capture: bool = True) -> None:
        MessageAccumulator.__init__(self)
        self.msg: Msg | None = None
        self.acc: MessageAccumulator | None = None  # None: the round itself, if started
        self.started = False
        # Only an on_reasoning layer can answer without the model.
        self.capture: MessageAccumulator | None = MessageAccumulator() if capture else None

    def accumulator(self) -> MessageAccumulator:
        """The accumulator of a model call that begins in this round."""
        if not self.started:
            self.started = True
            return self  # not kept in ``acc``: no reference cycle
        acc = self.acc = MessageAccumulator()
        return acc

    def result(self, name: str) -> Msg | None:
        """The round's message: the model's, or what left ``on_reasoning`` when a
        middleware answered without calling the model."""
        capture = self.capture
        if self.msg is None and capture is not None and not capture.empty:
            return capture.build(name)
        return self.msg

    def partial(self, name: str) -> Msg | None:
        acc = self.acc if self.acc is not None else self
        return acc.build(name) if not acc.empty else None


class ReActLoop:
    """One call's loop: what its steps share (the state, the round in flight, the
    rounds counted), the ``on_reasoning``, ``on_model_call`` and
    ``on_compress_context`` chains and their cores."""

    __slots__ = ("_acting", "compress_chain", "compressed", "iteration", "limit",
                 "model_chain", "options", "reasoning_chain", "round", "scope", "state",
                 "structured", "system_msg", "tools")

    reasoning_chain: Handler[ReasoningInput] | None
    model_chain: Handler[ModelCallInput] | None
    state: AgentState  # bound by begin()

    def __init__(self, scope: CallScope, structured_model: type[BaseModel] | None = None) -> None:
        self.scope = scope
        config = scope.config
        self.structured = None if structured_model is None else \
            StructuredOutput(structured_model, config.model)
        plan = config.plan
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
        # What every round offers the model (set by the prepare step).
        self.tools: tuple[dict[str, Any], ...] = ()
        self.options: GenerateOptions = config.generate_options
        # Rounds begun, and the most there may be (a continue request may raise it, never
        # past twice max_iters).
        self.iteration = 0
        self.limit = config.max_iters

    @property
    def acting(self) -> Acting:
        acting = self._acting
        if acting is None:
            acting = self._acting = Acting(self.scope)
        return acting

    def begin(self, state: AgentState, messages: Sequence[Msg],
              inp: AgentInput) -> ResumeEvent | None:
        """Take the call's input: checked, then added to the context (a new message
        instead of a paused batch's answer closes that batch); the resume event, if
        the call answers a pause. The driver's first check follows."""
        self.state = state
        if type(state.context) is not History:  # once per state object (see _history.py)
            state.context = History(state.context)
        resume = inp.resume
        if not is_clean(messages):  # bad text never enters the context
            for i, m in enumerate(messages):
                check_value(m, f"input message #{i}")
        if resume is not None:
            check_value(resume, type(resume).__name__)
            check_resume(state, resume, state.session_id)  # raises before anything changes
        elif state.pending is not None:
            self.acting.abandon_pending(state)
        state.context.extend(messages)
        return resume

    def model_messages(self) -> Sequence[Msg]:
        """What a round shows the model: the system prompt, then the context (a view
        of it, not a copy: ``_history.py``)."""
        return snapshot(self.system_msg, self.state.context)

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
        return ReasoningCall(self, rin)

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
        return ModelCall(self.scope, mci)


def _closed(inp: Any) -> Observable[AgentEvent]:
    return reactivex.throw(RuntimeError("the call has ended"))


class ReasoningCall(DirectObservable[AgentEvent]):
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
        if rnd is not None:
            rnd.capture = None  # the model answers: the capture is not needed
            acc = rnd.accumulator()
        else:
            acc = MessageAccumulator()
        rin = self.rin
        mci = ModelCallInput(rin.messages, rin.tools, rin.options, scope.config.model)
        chain = react.model_chain
        if chain is None:
            # Nothing between the core and this round: the converter builds the
            # message and its events go straight to ``observer``; when no layer at
            # all reads them (a quiet call), it makes none.
            silent = scope.quiet and react.reasoning_chain is None
            return ModelCall(scope, mci, acc, observer.on_next, silent, rnd).direct(observer)
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


class ModelCall(DirectObservable[AgentEvent]):
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
                                observer, self.acc, self.emit, self.silent, self.into,
                                scope.model_stream)
        attempt.start()
        return attempt
