"""Type-checked (not run) by ``nox -s lint``: the documented operator usage must
type-check under ``mypy --strict``."""

from __future__ import annotations

from collections.abc import Callable

from reactivex import Observable

from rx_agent import (
    AgentEvent,
    AllToolsDeniedEvent,
    ChatUsage,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    ModelCallInput,
    Msg,
    RequestStopEvent,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    ToolUseBlock,
)
from rx_agent import operators as aops
from rx_agent.middleware import Agent

Next = Callable[[ModelCallInput], Observable[AgentEvent]]


class Guard(MiddlewareBase):
    def __init__(self) -> None:
        self.limit = aops.rate_limit(0.5)
        self.backup = ScriptedModel(["backup"])

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL}

    def on_model_call(self, agent: Agent, ctx: RuntimeContext, input: ModelCallInput,
                      next: Next) -> Observable[AgentEvent]:
        guarded: Next = lambda i: next(i).pipe(  # noqa: E731
            self.limit,
            aops.redact(),
            aops.map_text(str.strip, across_deltas=True),
            aops.with_timeout(first_event=10, between_events=5, total=60),
            aops.tap_usage(lambda u: None),
            aops.inject_after(AllToolsDeniedEvent, lambda e: RequestStopEvent(
                "stop", GenerateReason.ALL_TOOLS_DENIED)),
        )
        retrying: Next = aops.retry_model(3, backoff=0.5)(guarded)
        return aops.fallback_to(self.backup)(retrying, input)


def reading(events: Observable[AgentEvent]) -> None:
    deltas: Observable[TextBlockDeltaEvent] = events.pipe(aops.of_type(TextBlockDeltaEvent))
    texts: Observable[str] = events.pipe(aops.text())
    rounds: Observable[list[AgentEvent]] = events.pipe(aops.buffer_round())
    messages: Observable[Msg] = events.pipe(aops.collect_message())
    usage: list[ChatUsage] = []
    calls: list[ToolUseBlock] = []
    tapped: Observable[AgentEvent] = events.pipe(
        aops.tap_usage(usage.append), aops.on_tool_call(calls.append),
        aops.on_text(print))
    del deltas, texts, rounds, messages, tapped
