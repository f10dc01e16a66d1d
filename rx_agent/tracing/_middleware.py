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

Span bookkeeping lives in ``_spans``; what each span reads from the events, in
``_watch``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Tracer, TracerProvider
from reactivex import Observable

from .._version import __version__
from ..context import RuntimeContext
from ..event import AgentEvent, UserConfirmResultEvent
from ..middleware import (
    ActingInput,
    Agent,
    AgentInput,
    ExtensionPoint,
    Handler,
    MiddlewareBase,
    ModelCallInput,
)
from . import _attributes as A
from ._content import dumps, message_parts, messages_json, split_system
from ._spans import CANCELLED, traced
from ._watch import AgentWatch, ChatWatch, ToolBatchWatch

__all__ = ["CANCELLED", "INSTRUMENTATION_NAME", "OtelTracingMiddleware"]

INSTRUMENTATION_NAME = "rx_agent"

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


def _is_disabled(provider: TracerProvider) -> bool:
    """True for the API's placeholders: nothing would record a span."""
    return isinstance(provider, (trace.NoOpTracerProvider, trace.ProxyTracerProvider))


class OtelTracingMiddleware(MiddlewareBase):
    """OpenTelemetry tracing of the agent lifecycle (GenAI semantic conventions).

    Points: ``ON_AGENT``, ``ON_MODEL_CALL``, ``ON_ACTING``. One reply produces::

        invoke_agent <agent name>             (INTERNAL)
        ├── chat <model name>                 (CLIENT, one per model call)
        ├── execute_tool <tool>               (INTERNAL, one per batch of tool calls;
        │   │                                  "execute_tool a (+2 more)" for three)
        │   ├── execute_tool a                (INTERNAL, one per tool call)
        │   └── ...
        └── chat <model name>

    A reply that pauses records the calls it waits on (``rx_agent.pending.*``); the call
    that resumes it names the reply it answers (``rx_agent.resume.*``), and each result
    of an external execution gets a compensating ``execute_tool <tool>`` span there
    (``rx_agent.tool.external``).

    Model and tool spans are children of the agent span even when a middleware moves
    work to another thread or scheduler. A span ends exactly once: status OK when its
    stream completes, ERROR with the error's message when it fails, ERROR
    ``"cancelled"`` when the subscription is disposed first. A tool call's span is
    ERROR when its result's state is ``ERROR``.

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
        next: Handler[AgentInput],
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
        resume = input.resume
        if resume is not None:  # the call answers a paused reply (see AgentWatch too)
            attributes[A.RX_AGENT_RESUME_KIND] = (
                "confirm" if isinstance(resume, UserConfirmResultEvent) else "external")
            attributes[A.RX_AGENT_RESUME_REPLY_ID] = resume.reply_id
        # The caller's current span (e.g. an HTTP request) parents the agent span;
        # read now, on the caller's side of any scheduler hop.
        parent = otel_context.get_current()
        key = self._ctx_key
        record_content = self.record_content
        tool_common = _tool_attributes(agent, ctx)
        toolkit = agent.toolkit

        def describe(name: str) -> str:
            described = toolkit.get(name)
            return described.description if described else ""

        def remember(inside: Context) -> None:
            ctx.put(key, inside)

        def watch(_span: Any, inside: Context) -> AgentWatch:
            return AgentWatch(record_content, tracer, inside, tool_common, describe, ctx)

        return traced(
            tracer, f"invoke_agent {agent.name}", SpanKind.INTERNAL, attributes, parent,
            lambda: next(input), watch, remember,
        )

    # -- chat -----------------------------------------------------------------

    def on_model_call(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ModelCallInput,
        next: Handler[ModelCallInput],
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
        # A middleware may pass options=None (Java's null): no request attributes then.
        if options is not None:
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
            extra = options.extra or {}
            for key, attribute in _EXTRA_OPTIONS.items():
                value = extra.get(key)
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
        return traced(
            tracer, f"chat {model.name}", SpanKind.CLIENT, attributes, self._parent(ctx),
            lambda: next(input), lambda _span, _inside: ChatWatch(record_content),
        )

    # -- execute_tool -------------------------------------------------------------

    def on_acting(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ActingInput,
        next: Handler[ActingInput],
    ) -> Observable[AgentEvent]:
        tracer = self._tracer()
        if tracer is None:
            return next(input)
        calls = input.tool_calls
        common = _tool_attributes(agent, ctx)
        descriptions: dict[str, str] = {}
        for call in calls:
            if call.name not in descriptions:
                described = agent.toolkit.get(call.name)
                descriptions[call.name] = described.description if described else ""
        attributes = dict(common)
        if calls:
            first = calls[0]
            name = f"execute_tool {first.name}"
            # The conventions type these as strings: a batch lists every call, joined
            # with ","; the rx_agent.* arrays keep them apart exactly.
            attributes[A.GEN_AI_TOOL_NAME] = ",".join(c.name for c in calls)
            attributes[A.GEN_AI_TOOL_CALL_ID] = ",".join(c.id for c in calls)
            if len(calls) > 1:
                name += f" (+{len(calls) - 1} more)"
                attributes[A.RX_AGENT_TOOL_NAMES] = tuple(c.name for c in calls)
                attributes[A.RX_AGENT_TOOL_CALL_IDS] = tuple(c.id for c in calls)
            elif descriptions[first.name]:
                attributes[A.GEN_AI_TOOL_DESCRIPTION] = descriptions[first.name]
        else:
            name = "execute_tool"
        by_id = {c.id: c for c in calls}
        record_content = self.record_content

        def watch(_span: Any, inside: Context) -> ToolBatchWatch:
            return ToolBatchWatch(tracer, inside, common, by_id, descriptions, record_content)

        return traced(
            tracer, name, SpanKind.INTERNAL, attributes, self._parent(ctx),
            lambda: next(input), watch,
        )

    def __repr__(self) -> str:
        provider = "global" if self._provider is None else type(self._provider).__name__
        return (
            f"OtelTracingMiddleware(tracer_provider={provider}, "
            f"record_content={self.record_content})"
        )


def _tool_attributes(agent: Agent, ctx: RuntimeContext) -> dict[str, Any]:
    """What every ``execute_tool`` span carries."""
    common: dict[str, Any] = {
        A.GEN_AI_OPERATION_NAME: "execute_tool",
        A.GEN_AI_AGENT_NAME: agent.name,
        A.GEN_AI_TOOL_TYPE: "function",
    }
    if ctx.session_id:
        common[A.GEN_AI_CONVERSATION_ID] = ctx.session_id
    return common


def _agent_id(agent: Agent) -> str:
    """The agent's own id when it has one, else its name (the session default)."""
    for attr in ("agent_id", "id"):
        value = getattr(agent, attr, None)
        if isinstance(value, str) and value:
            return value
    return agent.name
