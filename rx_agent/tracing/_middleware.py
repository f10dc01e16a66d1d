"""``OtelTracingMiddleware``: OpenTelemetry spans for the agent, model and tool layers.

Parenting does not rely on the ambient OpenTelemetry context. RxPY loses contextvars
whenever a subscription or its callbacks move to a ``ThreadPoolScheduler`` (or any
thread-backed scheduler), so a chat span started from "the current span" could end
up a root span. Instead the agent span's context is stored in the call's
:class:`RuntimeContext` when the agent span starts, and model and tool spans are
started with that context as their explicit parent, on whatever thread they start.
Each span is also attached as the current context while its inner stream is being
subscribed, so work started there (the runtime's tasks, sync tools copied into a
worker thread, spans that user code creates) sees it as its parent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import Disposable

from .._version import __version__
from ..context import RuntimeContext
from ..event import (
    AgentEvent,
    AgentResultEvent,
    AgentStartEvent,
    DataBlockStartEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    TextBlockDeltaEvent,
    ThinkingBlockDeltaEvent,
    ToolCallDeltaEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolResultTextDeltaEvent,
)
from ..message import ChatUsage, Msg, ToolResultState
from ..middleware import (
    ActingInput,
    Agent,
    AgentInput,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
)
from . import _attributes as A
from ._content import OutputCollector, dumps, message_parts, messages_json, split_system

__all__ = ["OtelTracingMiddleware"]

logger = logging.getLogger("rx_agent.tracing")

INSTRUMENTATION_NAME = "rx_agent"
CANCELLED = "cancelled"

_POINTS = frozenset(
    {ExtensionPoint.ON_AGENT, ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_ACTING}
)

# Keys of GenerateOptions.extra that have a GenAI request attribute.
_EXTRA_OPTIONS = {
    "seed": A.GEN_AI_REQUEST_SEED,
    "top_k": A.GEN_AI_REQUEST_TOP_K,
    "frequency_penalty": A.GEN_AI_REQUEST_FREQUENCY_PENALTY,
    "presence_penalty": A.GEN_AI_REQUEST_PRESENCE_PENALTY,
}

_FIRST_CHUNK_EVENTS = (
    TextBlockDeltaEvent,
    ThinkingBlockDeltaEvent,
    ToolCallStartEvent,
    DataBlockStartEvent,
)


def _is_disabled(provider: TracerProvider) -> bool:
    """True for the API's placeholders: nothing would record a span."""
    return isinstance(provider, (trace.NoOpTracerProvider, trace.ProxyTracerProvider))


def _set_usage(span: Span, usage: ChatUsage) -> None:
    span.set_attribute(A.GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens)
    span.set_attribute(A.GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens)
    if usage.cached_tokens is not None:
        span.set_attribute(A.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, usage.cached_tokens)
    if usage.reasoning_tokens is not None:
        span.set_attribute(A.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, usage.reasoning_tokens)


class _Watcher(Protocol):
    """Reads a span's events as they pass and writes attributes at the end."""

    def observe(self, event: AgentEvent) -> None: ...
    def close(self, span: Span) -> None: ...


class _SpanLife:
    """Ends one span exactly once, whichever of complete / error / dispose comes first
    (they can race when the stream and the disposer run on different threads)."""

    __slots__ = ("_ended", "_lock", "span", "watcher")

    def __init__(self, span: Span, watcher: _Watcher | None) -> None:
        self.span = span
        self.watcher = watcher
        self._lock = threading.Lock()
        self._ended = False

    def _claim(self) -> bool:
        with self._lock:
            if self._ended:
                return False
            self._ended = True
            return True

    def _close_watcher(self) -> None:
        if self.watcher is not None:
            try:
                self.watcher.close(self.span)
            except Exception:  # a tracing bug must never break the agent
                logger.exception("recording span attributes failed")

    def succeed(self) -> None:
        if self._claim():
            self._close_watcher()
            self.span.set_status(Status(StatusCode.OK))
            self.span.end()

    def fail(self, error: BaseException) -> None:
        if self._claim():
            self._close_watcher()
            span = self.span
            span.set_attribute(A.ERROR_TYPE, type(error).__qualname__)
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, str(error) or type(error).__name__))
            span.end()

    def cancel(self) -> None:
        if self._claim():
            self._close_watcher()
            self.span.set_attribute(A.ERROR_TYPE, CANCELLED)
            self.span.set_status(Status(StatusCode.ERROR, CANCELLED))
            self.span.end()


def _traced(
    tracer: Tracer,
    name: str,
    kind: SpanKind,
    attributes: dict[str, Any],
    parent: Context,
    call: Callable[[], Observable[AgentEvent]],
    watcher: Callable[[Span], _Watcher | None],
    on_start: Callable[[Context], None] | None = None,
) -> Observable[AgentEvent]:
    """``call()``'s stream inside a span that lives exactly as long as a subscription."""

    def subscribe(
        observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
    ) -> rxabc.DisposableBase:
        span = tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
        watch = watcher(span)
        life = _SpanLife(span, watch)
        inside = trace.set_span_in_context(span, parent)
        if on_start is not None:
            on_start(inside)

        on_next: Callable[[AgentEvent], None] = observer.on_next
        if watch is not None:
            observe = watch.observe
            forward = observer.on_next

            def on_next(event: AgentEvent) -> None:
                try:
                    observe(event)
                except Exception:  # a tracing bug must never break the agent
                    logger.exception("tracing failed to read %s", type(event).__name__)
                forward(event)

        def on_error(error: Exception) -> None:
            life.fail(error)
            observer.on_error(error)

        def on_completed() -> None:
            life.succeed()
            observer.on_completed()

        # Current while the inner stream is built and subscribed: tasks created now
        # copy it, so anything they start (sync tools in worker threads included)
        # nests under this span.
        token = otel_context.attach(inside)
        try:
            inner = call().subscribe(on_next, on_error, on_completed, scheduler=scheduler)
        except Exception as exc:
            life.fail(exc)
            observer.on_error(exc)
            return Disposable()
        finally:
            otel_context.detach(token)

        def dispose() -> None:
            life.cancel()  # no-op when the stream already ended the span
            inner.dispose()

        return Disposable(dispose)

    return Observable(subscribe)


# -- per-span event readers --------------------------------------------------------


class _AgentWatch:
    __slots__ = ("record_content", "reply_id", "result", "usage")

    def __init__(self, record_content: bool) -> None:
        self.record_content = record_content
        self.usage: ChatUsage | None = None
        self.reply_id: str | None = None
        self.result: Msg | None = None

    def observe(self, event: AgentEvent) -> None:
        kind = type(event)
        if kind is ModelCallEndEvent:
            usage = event.usage  # type: ignore[attr-defined]
            if usage is not None:
                self.usage = usage if self.usage is None else self.usage + usage
        elif kind is AgentStartEvent:
            self.reply_id = event.reply_id  # type: ignore[attr-defined]
        elif kind is AgentResultEvent:
            self.result = event.result  # type: ignore[attr-defined]

    def close(self, span: Span) -> None:
        if self.reply_id:
            span.set_attribute(A.RX_AGENT_REPLY_ID, self.reply_id)
        if self.usage is not None:
            _set_usage(span, self.usage)
        result = self.result
        if result is not None:
            if result.generate_reason is not None:
                span.set_attribute(A.RX_AGENT_GENERATE_REASON, result.generate_reason.value)
            if self.record_content:
                span.set_attribute(A.GEN_AI_OUTPUT_MESSAGES, messages_json([result]))


class _ChatWatch:
    __slots__ = ("finish_reason", "first_chunk", "output", "started", "usage")

    def __init__(self, record_content: bool) -> None:
        self.started = time.monotonic()
        self.first_chunk: float | None = None
        self.usage: ChatUsage | None = None
        self.finish_reason: str | None = None
        self.output = OutputCollector() if record_content else None

    def observe(self, event: AgentEvent) -> None:
        if self.first_chunk is None and isinstance(event, _FIRST_CHUNK_EVENTS):
            self.first_chunk = time.monotonic() - self.started
        kind = type(event)
        if kind is ModelCallEndEvent:
            self.usage = event.usage  # type: ignore[attr-defined]
            self.finish_reason = event.finish_reason  # type: ignore[attr-defined]
            return
        if kind is ModelCallStartEvent:
            # A middleware below that retries starts a new call in the same span;
            # only the last call's output and usage describe the response.
            self.started = time.monotonic()
            self.first_chunk = None
            self.usage = None
            if self.output is not None:
                self.output.reset()
            return
        output = self.output
        if output is None:
            return
        if kind is TextBlockDeltaEvent:
            output.text(event.block_id, event.delta)  # type: ignore[attr-defined]
        elif kind is ThinkingBlockDeltaEvent:
            output.thinking(event.block_id, event.delta)  # type: ignore[attr-defined]
        elif kind is ToolCallStartEvent:
            output.tool_call(event.tool_call_id, event.tool_call_name)  # type: ignore[attr-defined]
        elif kind is ToolCallDeltaEvent:
            output.tool_call(
                event.tool_call_id, event.tool_call_name, event.delta  # type: ignore[attr-defined]
            )

    def close(self, span: Span) -> None:
        if self.first_chunk is not None:
            span.set_attribute(A.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, self.first_chunk)
        if self.usage is not None:
            _set_usage(span, self.usage)
        if self.finish_reason:
            span.set_attribute(A.GEN_AI_RESPONSE_FINISH_REASONS, (self.finish_reason,))
        if self.output is not None:
            span.set_attribute(A.GEN_AI_OUTPUT_MESSAGES, self.output.json(self.finish_reason))


class _ToolWatch:
    __slots__ = ("results", "span", "states")

    def __init__(self, span: Span, record_content: bool) -> None:
        self.span = span
        self.states: dict[str, str] = {}
        self.results: dict[str, list[str]] | None = {} if record_content else None

    def observe(self, event: AgentEvent) -> None:
        kind = type(event)
        if kind is ToolResultEndEvent:
            call_id: str = event.tool_call_id  # type: ignore[attr-defined]
            state: ToolResultState = event.state  # type: ignore[attr-defined]
            self.states[call_id] = state.value
            if state is not ToolResultState.SUCCESS:
                # A failed tool does not fail the stream (the model reads the error
                # and carries on), so it is an event on the span, not its status.
                self.span.add_event(
                    "rx_agent.tool.result",
                    {
                        A.GEN_AI_TOOL_NAME: event.tool_call_name,  # type: ignore[attr-defined]
                        A.GEN_AI_TOOL_CALL_ID: call_id,
                        "rx_agent.tool.state": state.value,
                    },
                )
        elif kind is ToolResultTextDeltaEvent and self.results is not None:
            self.results.setdefault(event.tool_call_id, []).append(  # type: ignore[attr-defined]
                event.delta  # type: ignore[attr-defined]
            )

    def close(self, span: Span) -> None:
        if self.states:
            span.set_attribute(A.RX_AGENT_TOOL_STATES, tuple(self.states.values()))
        if self.results is not None:
            texts = {call_id: "".join(parts) for call_id, parts in self.results.items()}
            if len(texts) == 1:
                span.set_attribute(A.GEN_AI_TOOL_CALL_RESULT, next(iter(texts.values())))
            elif texts:
                span.set_attribute(A.GEN_AI_TOOL_CALL_RESULT, dumps(texts))


# -- the middleware ---------------------------------------------------------------


class OtelTracingMiddleware(MiddlewareBase):
    """OpenTelemetry tracing of the agent lifecycle (GenAI semantic conventions).

    Points: ``ON_AGENT``, ``ON_MODEL_CALL``, ``ON_ACTING``. One reply produces::

        invoke_agent <agent name>             (INTERNAL)
        ├── chat <model name>                 (CLIENT, one per model call)
        ├── execute_tool <tool>               (INTERNAL, one per batch of tool calls;
        │                                      "execute_tool a (+2 more)" for three)
        └── chat <model name>

    Model and tool spans are children of the agent span even when a middleware moves
    work to another thread or scheduler. A span ends exactly once: status OK when its
    stream completes, ERROR with the error's message when it fails, ERROR
    ``"cancelled"`` when the subscription is disposed first.

    Args:
        tracer_provider: the provider that records the spans. ``None`` (default)
            uses the global provider, looked up each time a hook runs, so the
            middleware can be built before the SDK is set up. While that is the
            API's placeholder (no SDK configured) or a ``NoOpTracerProvider``, every
            hook is just ``return next(input)``.
        record_content: also record message content: input and output messages,
            system instructions, tool arguments and results. Off by default because
            content often holds personal or secret data.
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, record_content: bool = False
    ) -> None:
        self._provider = tracer_provider
        self.record_content = record_content
        # (provider, tracer) of the last lookup; a new global provider replaces it.
        self._cached: tuple[TracerProvider, Tracer] | None = None
        # Where the agent span's context is kept in the call's RuntimeContext; one
        # key per instance so two tracing middlewares never mix their trees.
        self._ctx_key = f"rx_agent.tracing.agent_context.{id(self):x}"

    def active_points(self) -> Collection[ExtensionPoint]:
        return _POINTS

    def _tracer(self) -> Tracer | None:
        provider = self._provider
        if provider is None or isinstance(provider, trace.ProxyTracerProvider):
            provider = trace.get_tracer_provider()
        if _is_disabled(provider):
            return None
        cached = self._cached
        if cached is not None and cached[0] is provider:
            return cached[1]
        tracer = provider.get_tracer(INSTRUMENTATION_NAME, __version__)
        self._cached = (provider, tracer)
        return tracer

    def _parent(self, ctx: RuntimeContext) -> Context:
        stored = ctx.get(self._ctx_key)
        return stored if isinstance(stored, Context) else otel_context.get_current()

    # -- invoke_agent -----------------------------------------------------------

    def on_agent(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: AgentInput,
        next: Callable[[AgentInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        tracer = self._tracer()
        if tracer is None:
            return next(input)
        model = agent.model
        attributes: dict[str, Any] = {
            A.GEN_AI_OPERATION_NAME: "invoke_agent",
            A.GEN_AI_AGENT_NAME: agent.name,
            A.GEN_AI_AGENT_ID: _agent_id(agent),
            A.GEN_AI_PROVIDER_NAME: model.provider,
            A.GEN_AI_REQUEST_MODEL: model.name,
            A.RX_AGENT_RUN_ID: ctx.run_id,
        }
        if ctx.session_id:
            attributes[A.GEN_AI_CONVERSATION_ID] = ctx.session_id
        if ctx.user_id:
            attributes[A.USER_ID] = ctx.user_id
        if self.record_content and input.msgs:
            attributes[A.GEN_AI_INPUT_MESSAGES] = messages_json(input.msgs)
        # The caller's current span (e.g. an HTTP request) parents the agent span;
        # read now, on the caller's side of any scheduler hop.
        parent = otel_context.get_current()
        key = self._ctx_key
        record_content = self.record_content

        def remember(inside: Context) -> None:
            ctx.put(key, inside)

        return _traced(
            tracer, f"invoke_agent {agent.name}", SpanKind.INTERNAL, attributes, parent,
            lambda: next(input), lambda _span: _AgentWatch(record_content), remember,
        )

    # -- chat -----------------------------------------------------------------

    def on_model_call(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ModelCallInput,
        next: Callable[[ModelCallInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        tracer = self._tracer()
        if tracer is None:
            return next(input)
        model = input.model
        attributes: dict[str, Any] = {
            A.GEN_AI_OPERATION_NAME: "chat",
            A.GEN_AI_PROVIDER_NAME: model.provider,
            A.GEN_AI_REQUEST_MODEL: model.name,
            A.GEN_AI_AGENT_NAME: agent.name,
            A.GEN_AI_REQUEST_STREAM: True,
        }
        if ctx.session_id:
            attributes[A.GEN_AI_CONVERSATION_ID] = ctx.session_id
        options = input.options
        if options.temperature is not None:
            attributes[A.GEN_AI_REQUEST_TEMPERATURE] = options.temperature
        if options.max_tokens is not None:
            attributes[A.GEN_AI_REQUEST_MAX_TOKENS] = options.max_tokens
        if options.top_p is not None:
            attributes[A.GEN_AI_REQUEST_TOP_P] = options.top_p
        if options.stop:
            attributes[A.GEN_AI_REQUEST_STOP_SEQUENCES] = tuple(options.stop)
        if options.tool_choice is not None:
            attributes[A.RX_AGENT_REQUEST_TOOL_CHOICE] = options.tool_choice
        for key, attribute in _EXTRA_OPTIONS.items():
            value = options.extra.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[attribute] = value
        if self.record_content:
            system, rest = split_system(input.messages)
            if system:
                attributes[A.GEN_AI_SYSTEM_INSTRUCTIONS] = dumps(
                    [part for msg in system for part in message_parts(msg.content)]
                )
            attributes[A.GEN_AI_INPUT_MESSAGES] = messages_json(rest)
        record_content = self.record_content
        return _traced(
            tracer, f"chat {model.name}", SpanKind.CLIENT, attributes, self._parent(ctx),
            lambda: next(input), lambda _span: _ChatWatch(record_content),
        )

    # -- execute_tool -------------------------------------------------------------

    def on_acting(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ActingInput,
        next: Callable[[ActingInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        tracer = self._tracer()
        if tracer is None:
            return next(input)
        calls = input.tool_calls
        attributes: dict[str, Any] = {
            A.GEN_AI_OPERATION_NAME: "execute_tool",
            A.GEN_AI_AGENT_NAME: agent.name,
            A.GEN_AI_TOOL_TYPE: "function",
        }
        if ctx.session_id:
            attributes[A.GEN_AI_CONVERSATION_ID] = ctx.session_id
        if calls:
            first = calls[0]
            name = f"execute_tool {first.name}"
            if len(calls) > 1:
                name += f" (+{len(calls) - 1} more)"
                attributes[A.RX_AGENT_TOOL_NAMES] = tuple(c.name for c in calls)
                attributes[A.RX_AGENT_TOOL_CALL_IDS] = tuple(c.id for c in calls)
            attributes[A.GEN_AI_TOOL_NAME] = first.name
            attributes[A.GEN_AI_TOOL_CALL_ID] = first.id
            described = agent.toolkit.get(first.name)
            if described is not None and described.description:
                attributes[A.GEN_AI_TOOL_DESCRIPTION] = described.description
            if self.record_content:
                if len(calls) == 1:
                    attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] = dumps(
                        first.input if first.raw_input is None else first.raw_input
                    )
                else:
                    attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] = dumps(
                        {c.id: c.input if c.raw_input is None else c.raw_input for c in calls}
                    )
        else:
            name = "execute_tool"
        record_content = self.record_content
        return _traced(
            tracer, name, SpanKind.INTERNAL, attributes, self._parent(ctx),
            lambda: next(input), lambda span: _ToolWatch(span, record_content),
        )

    def __repr__(self) -> str:
        provider = "global" if self._provider is None else type(self._provider).__name__
        return (
            f"OtelTracingMiddleware(tracer_provider={provider}, "
            f"record_content={self.record_content})"
        )


def _agent_id(agent: Agent) -> str:
    """The agent's own id when it has one, else its name (the session default)."""
    for attr in ("agent_id", "id"):
        value = getattr(agent, attr, None)
        if isinstance(value, str) and value:
            return value
    return agent.name
