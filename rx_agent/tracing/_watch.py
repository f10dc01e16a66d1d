"""Per-span event readers: what each span learns from the events passing through it.

:class:`ToolBatchWatch` also owns the ``execute_tool <name>`` span of each tool call in
its batch: opened at the call's ``ToolResultStartEvent``, ended at its
``ToolResultEndEvent`` (or, if that never comes, when the batch span ends).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from contextvars import Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Tracer

from ..context import RuntimeContext
from ..event import (
    AgentEvent,
    AgentResultEvent,
    AgentStartEvent,
    DataBlockStartEvent,
    ExternalExecutionResultEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    ThinkingBlockDeltaEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)
from ..message import ChatUsage, Msg, ToolResultBlock, ToolResultState, ToolUseBlock
from . import _attributes as A
from ._content import OutputCollector, dumps, messages_json
from ._spans import SpanLife, set_usage

__all__ = ["TOOL_ERROR", "AgentWatch", "ChatWatch", "ToolBatchWatch"]

TOOL_ERROR = "tool_error"
"""``error.type`` of a tool call span whose result is an ``ERROR``."""

# Exact types, like the dispatch below: a set lookup, where ``isinstance`` on a
# pydantic class that does not match goes through ABCMeta (~5x slower).
_FIRST_CHUNK_EVENTS: frozenset[type[AgentEvent]] = frozenset(
    (TextBlockDeltaEvent, ThinkingBlockDeltaEvent, ToolCallStartEvent, DataBlockStartEvent)
)


class AgentWatch:
    """The ``invoke_agent`` span's reader: usage, result, and a pause's pending calls.

    The results an external execution brings (``ExternalExecutionResultEvent``, when a
    paused reply resumes) ran outside any ``on_acting`` step; each gets a compensating
    ``execute_tool <name>`` span here, child of the agent span, opened and ended as the
    results arrive (``rx_agent.tool.external``).
    """

    __slots__ = ("ctx", "describe", "inside", "pending", "record_content", "reply_id",
                 "result", "tool_common", "tracer", "usage")

    def __init__(
        self,
        record_content: bool,
        tracer: Tracer,
        inside: Context,
        tool_common: Mapping[str, Any],
        describe: Callable[[str], str],
        ctx: RuntimeContext,
    ) -> None:
        self.record_content = record_content
        self.tracer = tracer
        self.inside = inside  # the agent span's context
        self.tool_common = tool_common
        self.describe = describe  # tool name -> its description ("" when unknown)
        self.ctx = ctx
        self.usage: ChatUsage | None = None
        self.reply_id: str | None = None
        self.result: Msg | None = None
        # (kind, reply id to answer, waiting calls) of the pause that ended the reply
        self.pending: tuple[str, str, list[ToolUseBlock]] | None = None

    def observe(self, event: AgentEvent) -> None:
        handler = _AGENT.get(type(event))
        if handler is not None:
            handler(self, event)

    def _call_end(self, event: ModelCallEndEvent) -> None:
        usage = event.usage
        if usage is not None:
            self.usage = usage if self.usage is None else self.usage + usage

    def _agent_start(self, event: AgentStartEvent) -> None:
        self.reply_id = event.reply_id

    def _agent_result(self, event: AgentResultEvent) -> None:
        self.result = event.result

    def _ask(self, event: RequireUserConfirmEvent) -> None:
        self.pending = ("confirm", event.reply_id, list(event.tool_calls))

    def _suspend(self, event: RequireExternalExecutionEvent) -> None:
        self.pending = ("external", event.reply_id, list(event.tool_calls))

    def _external_results(self, event: ExternalExecutionResultEvent) -> None:
        for result in event.tool_results:
            self._external_span(result)

    def _external_span(self, result: ToolResultBlock) -> None:
        attributes = dict(self.tool_common)
        attributes[A.GEN_AI_TOOL_NAME] = result.name
        attributes[A.GEN_AI_TOOL_CALL_ID] = result.id
        description = self.describe(result.name)
        if description:
            attributes[A.GEN_AI_TOOL_DESCRIPTION] = description
        attributes[A.RX_AGENT_TOOL_EXTERNAL] = True
        attributes[A.RX_AGENT_TOOL_STATE] = result.state.value
        if self.record_content:
            call = _find_call(self.ctx, result.id)
            if call is not None:
                attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] = dumps(
                    call.input if call.raw_input is None else call.raw_input)
            attributes[A.GEN_AI_TOOL_CALL_RESULT] = result.text
        # Zero length, at the time the results arrived: when the tool ran is unknown.
        life = SpanLife(self.tracer.start_span(
            f"execute_tool {result.name}", context=self.inside, kind=SpanKind.INTERNAL,
            attributes=attributes,
        ))
        if result.state is ToolResultState.ERROR:
            life.error(TOOL_ERROR, "the tool call ended in ERROR")
        else:
            life.succeed()

    def close(self, span: Span) -> None:
        if self.reply_id:
            span.set_attribute(A.RX_AGENT_REPLY_ID, self.reply_id)
        if self.usage is not None:
            set_usage(span, self.usage)
        result = self.result
        if result is not None:
            if result.generate_reason is not None:
                span.set_attribute(A.RX_AGENT_GENERATE_REASON, result.generate_reason.value)
            if self.record_content:
                span.set_attribute(A.GEN_AI_OUTPUT_MESSAGES, messages_json([result]))
        if self.pending is not None:
            kind, reply_id, calls = self.pending
            span.set_attribute(A.RX_AGENT_PENDING_KIND, kind)
            span.set_attribute(A.RX_AGENT_PENDING_REPLY_ID, reply_id)
            span.set_attribute(A.RX_AGENT_PENDING_TOOL_NAMES, tuple(c.name for c in calls))
            span.set_attribute(A.RX_AGENT_PENDING_TOOL_CALL_IDS, tuple(c.id for c in calls))


def _find_call(ctx: RuntimeContext, call_id: str) -> ToolUseBlock | None:
    """The stored tool call ``call_id`` answers (the newest messages first)."""
    state = ctx.agent_state
    if state is None:
        return None
    for msg in reversed(state.context):
        for block in msg.content:
            if isinstance(block, ToolUseBlock) and block.id == call_id:
                return block
    return None


# Each watch dispatches on the exact event type through a dict of its typed handlers
# (as MessageAccumulator.feed does): one lookup per event, whatever passes.
_AGENT: dict[type[AgentEvent], Callable[[AgentWatch, Any], None]] = {
    ModelCallEndEvent: AgentWatch._call_end,
    AgentStartEvent: AgentWatch._agent_start,
    AgentResultEvent: AgentWatch._agent_result,
    RequireUserConfirmEvent: AgentWatch._ask,
    RequireExternalExecutionEvent: AgentWatch._suspend,
    ExternalExecutionResultEvent: AgentWatch._external_results,
}


class ChatWatch:
    __slots__ = ("finish_reason", "first_chunk", "output", "started", "usage")

    def __init__(self, record_content: bool) -> None:
        self.started = time.monotonic()
        self.first_chunk: float | None = None
        self.usage: ChatUsage | None = None
        self.finish_reason: str | None = None
        self.output = OutputCollector() if record_content else None

    def observe(self, event: AgentEvent) -> None:
        if self.first_chunk is None and type(event) in _FIRST_CHUNK_EVENTS:
            self.first_chunk = time.monotonic() - self.started
        handler = _CHAT.get(type(event))
        if handler is not None:
            handler(self, event)
        elif self.output is not None:
            self.output.feed(event)

    def _call_end(self, event: ModelCallEndEvent) -> None:
        self.usage = event.usage
        self.finish_reason = event.finish_reason

    def _call_start(self, event: ModelCallStartEvent) -> None:
        # A middleware below that retries starts a new call in the same span;
        # only the last call's output and usage describe the response.
        self.started = time.monotonic()
        self.first_chunk = None
        self.usage = None
        if self.output is not None:
            self.output.reset()

    def close(self, span: Span) -> None:
        if self.first_chunk is not None:
            span.set_attribute(A.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, self.first_chunk)
        if self.usage is not None:
            set_usage(span, self.usage)
        if self.finish_reason:
            span.set_attribute(A.GEN_AI_RESPONSE_FINISH_REASONS, (self.finish_reason,))
        if self.output is not None:
            span.set_attribute(A.GEN_AI_OUTPUT_MESSAGES, self.output.json(self.finish_reason))


# The call's own events; the others go to the output (when content is recorded).
_CHAT: dict[type[AgentEvent], Callable[[ChatWatch, Any], None]] = {
    ModelCallEndEvent: ChatWatch._call_end,
    ModelCallStartEvent: ChatWatch._call_start,
}


class _Call:
    """The span of one tool call, and its result text when content is recorded."""

    __slots__ = ("life", "parts")

    def __init__(self, life: SpanLife, parts: list[str] | None) -> None:
        self.life = life
        self.parts = parts


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop in this thread
        return None


class ToolBatchWatch:
    """The batch span's reader; opens and ends one child span per tool call.

    While a call runs, its span is also made the current context of the task that
    runs it (the runtime runs each call in an asyncio task and emits its start and end
    events there), so what the tool starts (an agent called as a tool, spans of your
    own, a sync tool's worker thread) nests under the call. Events that reach the
    middleware outside a task, or on another thread, only parent the call span
    explicitly.
    """

    __slots__ = (
        "attached", "calls", "closed", "common", "descriptions", "handlers", "lock", "open",
        "parent", "record_content", "states", "tracer",
    )

    def __init__(
        self,
        tracer: Tracer,
        parent: Context,
        common: dict[str, Any],
        calls: Mapping[str, ToolUseBlock],
        descriptions: Mapping[str, str],
        record_content: bool,
    ) -> None:
        self.tracer = tracer
        self.parent = parent  # the batch span's context
        self.common = common
        self.calls = calls
        self.descriptions = descriptions
        self.record_content = record_content
        # Without content a result's text is not read: its deltas miss the lookup.
        self.handlers = _TOOLS_CONTENT if record_content else _TOOLS
        self.lock = threading.Lock()
        self.open: dict[str, _Call] = {}
        self.closed = False
        self.states: dict[str, str] = {}
        # task -> (call id, token) of the call span attached as the task's context
        self.attached: dict[asyncio.Task[Any], tuple[str, Token[Context]]] = {}

    def observe(self, event: AgentEvent) -> None:
        handler = self.handlers.get(type(event))
        if handler is not None:
            handler(self, event)

    def _open(self, call_id: str, name: str) -> _Call:
        attributes = dict(self.common)
        attributes[A.GEN_AI_TOOL_NAME] = name
        attributes[A.GEN_AI_TOOL_CALL_ID] = call_id
        description = self.descriptions.get(name)
        if description:
            attributes[A.GEN_AI_TOOL_DESCRIPTION] = description
        if self.record_content:
            block = self.calls.get(call_id)
            if block is not None:
                attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] = dumps(
                    block.input if block.raw_input is None else block.raw_input
                )
        span = self.tracer.start_span(
            f"execute_tool {name}", context=self.parent, kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        return _Call(SpanLife(span), [] if self.record_content else None)

    def _result_text(self, event: ToolResultTextDeltaEvent) -> None:
        call = self.open.get(event.tool_call_id)
        if call is not None and call.parts is not None:
            call.parts.append(event.delta)

    def _start(self, event: ToolResultStartEvent) -> None:
        call_id = event.tool_call_id
        call = self._open(call_id, event.tool_call_name)
        with self.lock:
            closed = self.closed
            previous = None if closed else self.open.get(call_id)
            if not closed:
                self.open[call_id] = call
        if closed:  # the batch already ended (disposed from another thread)
            call.life.cancel()
            return
        if previous is not None:  # started again (a middleware re-ran the call)
            previous.life.cancel()
        task = _current_task()
        if task is not None:
            held = self.attached.pop(task, None)
            if held is not None:  # that call's end never came through this task
                otel_context.detach(held[1])
            inside = trace.set_span_in_context(call.life.span, self.parent)
            self.attached[task] = (call_id, otel_context.attach(inside))

    def _end(self, event: ToolResultEndEvent) -> None:
        call_id, state = event.tool_call_id, event.state
        task = _current_task()
        if task is not None:
            held = self.attached.get(task)
            if held is not None and held[0] == call_id:
                del self.attached[task]
                otel_context.detach(held[1])
        with self.lock:
            call = self.open.pop(call_id, None)
            closed = self.closed
            if not closed:
                self.states[call_id] = state.value
        if call is None:
            if closed:
                return
            call = self._open(call_id, event.tool_call_name)  # its start event did not pass here
        span = call.life.span
        span.set_attribute(A.RX_AGENT_TOOL_STATE, state.value)
        if call.parts is not None:
            span.set_attribute(A.GEN_AI_TOOL_CALL_RESULT, "".join(call.parts))
        if state is ToolResultState.ERROR:
            call.life.error(TOOL_ERROR, "the tool call ended in ERROR")
        else:
            # DENIED, INTERRUPTED, SUSPENDED: the call has its result; the state says
            # it did not run (to the end).
            call.life.succeed()

    def close(self, span: Span) -> None:
        with self.lock:
            self.closed = True
            unfinished = list(self.open.values())
            self.open.clear()
            states = tuple(self.states.values())
        for call in unfinished:  # ended before the batch span, as children should
            call.life.cancel()
        # Not detached here: this may run on another thread or task; a task's context
        # goes away with the task.
        self.attached.clear()
        if states:
            span.set_attribute(A.RX_AGENT_TOOL_STATES, states)


_TOOLS: dict[type[AgentEvent], Callable[[ToolBatchWatch, Any], None]] = {
    ToolResultStartEvent: ToolBatchWatch._start,
    ToolResultEndEvent: ToolBatchWatch._end,
}
_TOOLS_CONTENT: dict[type[AgentEvent], Callable[[ToolBatchWatch, Any], None]] = {
    **_TOOLS,
    ToolResultTextDeltaEvent: ToolBatchWatch._result_text,
}
