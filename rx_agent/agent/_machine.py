"""The steps of one call's ReAct loop: each does one thing and names the next.

::

    prepare ─┬──────────────── round ── [compress] → reason ─┬→ act ⇄ consult
             └→ resume → act ─┐                              │   ↓
                              └→ batch → [pause] / [structured] → round
                                            reason → respond → end, continue → round
    round past the limit → summarize → summarized;  interrupt or stop → close

The loop takes the call's input first (:meth:`~._loop.ReActLoop.begin`). Acting's
steps (:class:`~._acting.Act`, :class:`~._batch.Batch`, ...) are handed what follows
them (:func:`after_batch`), so they know nothing of rounds. A driver
(:mod:`._driver`) runs the steps; before the first and between two of them it checks
for an interrupt and a stop request, saves a checkpoint, and counts the rounds (a
:class:`Continue` with ``round=True`` begins one; past the limit it runs
:class:`Summarize` instead). No step does those checks itself.
"""

from __future__ import annotations

from collections.abc import Awaitable

from .._text import check_value
from ..context import AgentState
from ..event import ExceedMaxItersEvent, RequestContinueEvent
from ..message import GenerateReason, HintBlock, Msg, Role, TextBlock, ToolUseBlock
from ..middleware.base import ExtensionPoint
from ..middleware.inputs import CompressContextInput, ReasoningInput
from ..tool._caller import CallerTools
from ._acting import Act, Resume
from ._hitl import ResumeEvent
from ._loop import ReActLoop, ReasoningCall, Round
from ._step import Continue, End, Outcome, Step, count
from ._structured import StructuredOutput, StructuredOutputError

__all__ = [
    "Close",
    "Compress",
    "ContinueRound",
    "Prepare",
    "Reason",
    "Respond",
    "Structured",
    "Summarize",
    "Summarized",
    "after_batch",
    "next_round",
]

_EMPTY_ANSWER_REMINDER = (
    "Your last reply had no visible answer and no tool call. Reply to the user with "
    "text, or call a tool."
)
_SUMMARY_HINT = (
    "You have used the maximum number of reasoning rounds. Do not call any tools; "
    "summarize what you found and answer the user as well as you can now."
)


def next_round(loop: ReActLoop, save: bool = False) -> Continue:
    """Go on with a new round (the driver counts it)."""
    return Continue(Compress() if loop.compress_chain is not None else Reason(), save, True)


def after_batch(loop: ReActLoop, calls: list[ToolUseBlock] | None) -> Continue:
    """What follows a batch (run or resumed) that did not end the reply: its results
    are saved, then a structured-output call may have its answer. ``calls``: the
    round's calls (a bad response call among them counts), ``None`` on resume."""
    if loop.structured is None:
        return next_round(loop, True)
    return Continue(Structured(calls), True)


def _structured_end(
    loop: ReActLoop, structured: StructuredOutput, answer: Msg | None = None
) -> End:
    """The reply's end with the validated data (``answer``: the native-mode text
    message, already stored, which becomes the final one)."""
    context = loop.state.context
    final = structured.final(loop.scope.config.name, context, answer)
    if answer is not None and context and context[-1] is answer:
        context.pop()
    context.append(final)
    return End(final)


def _system(prompt: str) -> Msg:
    return Msg.make(Role.SYSTEM, [TextBlock._fast({"type": "text", "text": prompt})])


def _hint(state: AgentState, hint: str) -> None:
    state.context.append(Msg(role=Role.USER, content=[HintBlock(hint=hint)]))


class Prepare(Step):
    """The first step (the loop took the call's input, :meth:`ReActLoop.begin`): what
    every round offers, the system prompt, the call's tools and options."""

    __slots__ = ("resume",)
    name = "prepare"

    def __init__(self, resume: ResumeEvent | None) -> None:
        self.resume = resume

    def run(self, loop: ReActLoop) -> Outcome | Awaitable[Outcome]:
        config = loop.scope.config
        if ExtensionPoint.ON_SYSTEM_PROMPT in config.plan.layered or config.toolkit.has_sources:
            return self._waiting(loop)  # a hook or MCP servers to wait for
        prompt = config.sys_prompt.strip()
        if prompt:
            loop.system_msg = _system(prompt)
        return self._offer(loop)

    def describe(self, loop: ReActLoop) -> str:
        resume = self.resume
        return count(len(loop.state.context), "message") + (
            f", resume with {type(resume).__name__}" if resume is not None else "")

    async def _waiting(self, loop: ReActLoop) -> Outcome:
        scope = loop.scope
        config = scope.config
        plan = config.plan
        prompt = await plan.system_prompt(scope.agent, scope.ctx, config.sys_prompt) \
            if ExtensionPoint.ON_SYSTEM_PROMPT in plan.layered else config.sys_prompt.strip()
        if prompt.strip():
            loop.system_msg = _system(prompt)
        if config.toolkit.has_sources:  # MCP servers: tools listed once per connection
            await config.toolkit.refresh()
        return self._offer(loop)

    def _offer(self, loop: ReActLoop) -> Outcome:
        scope = loop.scope
        caller = scope.ctx.get(CallerTools)
        if caller is not None:  # a protocol client's own tools, for this call only
            scope.toolkit = caller.overlay(scope.toolkit)
        structured = loop.structured
        if structured is not None:  # the response tool joins this call's tools
            scope.toolkit = structured.toolkit(scope.toolkit)
            scope.response_tool = structured.tool
            loop.options = structured.options(loop.options)
        loop.tools = scope.toolkit.schema_view()  # built once per change of the tools
        if self.resume is not None:
            return Continue(Resume(self.resume, after_batch(loop, None)))
        return next_round(loop)


class Compress(Step):
    """``on_compress_context`` at the top of a round (only when a middleware hooks
    it); a replaced context is saved."""

    __slots__ = ()
    name = "compress"

    async def run(self, loop: ReActLoop) -> Outcome:
        scope = loop.scope
        assert loop.compress_chain is not None
        cin = CompressContextInput(tuple(loop.state.context), scope.config.model,
                                   loop.system_msg, loop.tools, loop.iteration)
        loop.compressed = False
        await scope.run_step(loop.compress_chain(cin), ExtensionPoint.ON_COMPRESS_CONTEXT)
        return Continue(Reason(), loop.compressed)

    def describe(self, loop: ReActLoop) -> str:
        return f"round {loop.iteration}, {count(len(loop.state.context), 'message')}"


class Reason(Step, Round):
    """One round's ``on_reasoning`` (the model call inside); its message is stored.
    Tool calls go on to acting (saved first: the calls are stored before they run).
    The step is its round too (one object fewer while the model streams): ``msg`` is
    the model's message while the round runs, then the round's result."""

    __slots__ = ("done",)
    name = "reason"

    # No __init__ (one call less per round): the fields are set as it runs, before
    # anything can read them.
    done: bool

    async def run(self, loop: ReActLoop) -> Outcome:
        scope = loop.scope
        state = loop.state
        rin = ReasoningInput(loop.model_messages(), loop.tools, loop.options, loop.iteration)
        chain = loop.reasoning_chain
        self.done = False
        Round.__init__(self, chain is not None)
        scope.continue_request = None  # heard per round (one from compression too)
        loop.round = self
        try:
            # run_step's halves here: no coroutine of its own, nor the input kept, while
            # the round waits for its model.
            sink = scope.start_step(chain(rin) if chain is not None else ReasoningCall(loop, rin),
                                    ExtensionPoint.ON_REASONING, self)
            del rin
            try:
                await sink
            finally:
                scope.end_step(sink)
        finally:
            loop.round = None
        self.done = True
        msg = self.msg = self.result(scope.config.name)
        calls = msg.tool_calls if msg is not None else None
        if msg is not None and msg.content:
            if calls:
                msg.generate_reason = GenerateReason.TOOL_CALLS
            state.context.append(msg)
        if calls:
            return Continue(Act(calls, after_batch(loop, calls)), True)
        return Continue(Respond(msg))

    def cut(self, loop: ReActLoop) -> Msg | None:
        # Cut during the model call: what it streamed so far (a finished round's
        # message is stored already).
        return None if self.done else self.partial(loop.scope.config.name)

    def answer(self) -> Msg | None:
        return self.msg

    def describe(self, loop: ReActLoop) -> str:
        return (f"round {loop.iteration}, {count(len(loop.state.context), 'message')}, "
                f"{count(len(loop.tools), 'tool')}")


class Respond(Step):
    """A round without tool calls: the final answer (or a structured one), a continue
    request, or a reminder to answer."""

    __slots__ = ("msg",)
    name = "respond"

    def __init__(self, msg: Msg | None) -> None:
        self.msg = msg

    def run(self, loop: ReActLoop) -> Outcome:
        msg = self.msg
        structured = loop.structured
        if msg is not None and msg.has_visible_text:
            if structured is not None:
                # Not the end until the answer validates (native: the text itself).
                hint = structured.from_text(msg) if structured.native else structured.reminder()
                if hint is None:
                    return _structured_end(loop, structured, msg)
                structured.check_attempts()
            else:
                request = loop.scope.continue_request
                if request is None:
                    msg.generate_reason = GenerateReason.MODEL_STOP
                    return End(msg)
                # Not the reply's end: stored without a generate_reason, like a round
                # the loop goes on from.
                return Continue(ContinueRound(request))
        else:
            hint = _EMPTY_ANSWER_REMINDER
        _hint(loop.state, hint)
        return next_round(loop)

    def describe(self, loop: ReActLoop) -> str:
        msg = self.msg
        return "visible text" if msg is not None and msg.has_visible_text else "no visible text"


class ContinueRound(Step):
    """A middleware's continue request: more rounds allowed, its hint for the model."""

    __slots__ = ("request",)
    name = "continue"

    def __init__(self, request: RequestContinueEvent) -> None:
        self.request = request

    def run(self, loop: ReActLoop) -> Outcome:
        request = self.request
        loop.limit = min(loop.limit + request.extra_iters, 2 * loop.scope.config.max_iters)
        hint = request.hint
        if hint:
            check_value(hint, "RequestContinueEvent.hint")
            _hint(loop.state, hint)
        return next_round(loop)

    def describe(self, loop: ReActLoop) -> str:
        return f"+{count(self.request.extra_iters, 'round')}"


class Structured(Step):
    """After a structured-output call's batch: the answer it recorded, or one more
    round (a response call that did not validate counts as a bad answer)."""

    __slots__ = ("calls",)
    name = "structured"

    def __init__(self, calls: list[ToolUseBlock] | None) -> None:
        self.calls = calls

    def run(self, loop: ReActLoop) -> Outcome:
        structured = loop.structured
        assert structured is not None
        if structured.result is not None:
            return _structured_end(loop, structured)
        if self.calls is not None:
            structured.after_batch(self.calls)  # bad arguments count
        return next_round(loop)


class Summarize(Step):
    """The round limit is reached: one call without tools to answer with what the
    rounds found (a structured-output call fails instead)."""

    __slots__ = ("done", "rnd")
    name = "summarize"

    def __init__(self) -> None:
        self.rnd: Round | None = None
        self.done = False

    async def run(self, loop: ReActLoop) -> Outcome:
        scope = loop.scope
        config = scope.config
        scope.emit(ExceedMaxItersEvent.make(scope.source, max_iters=config.max_iters,
                                            current_iter=loop.iteration))
        structured = loop.structured
        if structured is not None:
            raise StructuredOutputError(
                f"no valid {structured.model.__name__} within max_iters={config.max_iters} "
                "rounds")
        messages = (*loop.model_messages(),
                    Msg(role=Role.USER, content=[HintBlock(hint=_SUMMARY_HINT)]))
        rnd = self.rnd = Round(capture=False)
        loop.round = rnd
        try:
            await scope.run_step(
                loop.core_reasoning(ReasoningInput(messages, (), config.generate_options)),
                None,
            )
        finally:
            loop.round = None
        self.done = True
        return Continue(Summarized(rnd.msg))

    def cut(self, loop: ReActLoop) -> Msg | None:
        rnd = self.rnd
        if rnd is None:
            return None
        return rnd.msg if self.done else rnd.partial(loop.scope.config.name)

    def describe(self, loop: ReActLoop) -> str:
        return f"after {count(loop.iteration, 'round')}"


class Summarized(Step):
    """The summary is the reply's final message (without tool calls: no tool was
    offered, and a call here would never get a result)."""

    __slots__ = ("msg",)
    name = "summarized"

    def __init__(self, msg: Msg | None) -> None:
        self.msg = msg

    def run(self, loop: ReActLoop) -> Outcome:
        msg = self.msg or Msg(role=Role.ASSISTANT, content=[], name=loop.scope.config.name)
        msg.content = [b for b in msg.content if not isinstance(b, ToolUseBlock)]
        msg.generate_reason = GenerateReason.MAX_ITERATIONS
        loop.state.context.append(msg)
        return End(msg)


class Close(Step):
    """The reply ends early: interrupted (``msg``: what the cut step produced) or
    stopped by a middleware's request (``msg``: the round's answer, if any)."""

    __slots__ = ("msg", "stopped")
    name = "close"

    def __init__(self, stopped: bool, msg: Msg | None) -> None:
        self.stopped = stopped
        self.msg = msg

    def run(self, loop: ReActLoop) -> Outcome:
        if self.stopped:
            return End(loop.scope.close_stopped(loop.state, self.msg))
        return End(loop.scope.close_interrupted(loop.state, self.msg))

    def describe(self, loop: ReActLoop) -> str:
        return "stopped" if self.stopped else "interrupted"
