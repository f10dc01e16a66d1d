"""Helpers for people who test middlewares and agents.

Everything runs offline on :class:`~rx_agent.ScriptedModel`::

    from rx_agent import ReActAgent, ScriptedModel
    from rx_agent.testing import RecordingMiddleware, collect_events, event_types

    log: list[str] = []
    agent = ReActAgent(name="a", model=ScriptedModel(["hi"]),
                       middlewares=[RecordingMiddleware("outer", log)])
    events = collect_events(agent, "hello")
    assert event_types(events)[-1] == "AgentEndEvent"
    assert log[:2] == ["outer:on_agent:pre", "outer:on_agent_state_ready"]
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from typing import Any

from reactivex import Observable
from reactivex import operators as ops

from ..context import AgentState, RuntimeContext
from ..event import AgentEvent, AgentResultEvent
from ..message import Msg, ToolResultBlock, ToolUseBlock
from ..middleware.base import Agent, ExtensionPoint, MiddlewareBase
from ..middleware.inputs import AgentFinishOutcome

__all__ = [
    "RecordingMiddleware",
    "assert_no_orphan_tool_calls",
    "collect",
    "collect_events",
    "event_types",
    "final_result",
]


def collect(source: Observable[Any], timeout: float = 10.0) -> list[Any]:
    """Subscribe from synchronous code and return every item (raises the stream's error).

    Not for use inside a running event loop: ``await`` the observable there.
    """
    done = threading.Event()
    items: list[Any] = []
    failure: list[BaseException] = []

    def on_error(exc: Exception) -> None:
        failure.append(exc)
        done.set()

    subscription = source.subscribe(items.append, on_error, done.set)
    if not done.wait(timeout):
        subscription.dispose()
        raise TimeoutError(f"the stream did not finish within {timeout} s")
    if failure:
        raise failure[0]
    return items


def collect_events(
    agent: Any, msgs: Any = None, ctx: RuntimeContext | None = None, timeout: float = 10.0
) -> list[AgentEvent]:
    """Every event of one ``agent.stream(msgs, ctx)`` call."""
    return collect(agent.stream(msgs, ctx), timeout)


def event_types(events: Iterable[AgentEvent]) -> list[str]:
    """The class names of ``events``, for readable assertions on a sequence."""
    return [type(e).__name__ for e in events]


def final_result(events: Iterable[AgentEvent]) -> Msg:
    """The result message of a call's events (exactly one ``AgentResultEvent``)."""
    results = [e.result for e in events if isinstance(e, AgentResultEvent)]
    if len(results) != 1:
        raise AssertionError(f"expected one AgentResultEvent, got {len(results)}")
    return results[0]


def assert_no_orphan_tool_calls(messages: Iterable[Msg]) -> None:
    """Fail when a tool call in ``messages`` has no result (models reject that)."""
    messages = list(messages)
    answered = {b.id for m in messages for b in m.content if isinstance(b, ToolResultBlock)}
    orphans = [
        b.id
        for m in messages
        for b in m.content
        if isinstance(b, ToolUseBlock) and b.id not in answered
    ]
    if orphans:
        raise AssertionError(f"tool calls without a result: {orphans}")


class RecordingMiddleware(MiddlewareBase):
    """Logs what happens at its points into ``log`` as ``"<label>:<point>:<what>"``.

    Onion points log ``pre`` when the hook runs, ``event:<EventType>`` for each event
    that leaves the layer below, and ``post`` when that stream completes (``error``
    when it fails). Notifications log the point name; ``on_system_prompt`` returns the
    prompt unchanged. It changes nothing, so it can sit anywhere in a plan.
    """

    def __init__(
        self,
        label: str,
        log: list[str],
        *,
        order: int = 1,
        points: Collection[ExtensionPoint] | None = None,
        events: bool = True,
    ) -> None:
        self.label = label
        self.log = log
        self._order = order
        self._points = None if points is None else frozenset(points)
        self._events = events

    def order(self) -> int:
        return self._order

    def active_points(self) -> Collection[ExtensionPoint] | None:
        return self._points

    def _wrap(self, point: str, source: Observable[AgentEvent]) -> Observable[AgentEvent]:
        prefix = f"{self.label}:{point}"
        log = self.log

        def on_next(event: AgentEvent) -> None:
            if self._events:
                log.append(f"{prefix}:event:{type(event).__name__}")

        return source.pipe(
            ops.do_action(
                on_next,
                lambda _exc: log.append(f"{prefix}:error"),
                lambda: log.append(f"{prefix}:post"),
            )
        )

    def _onion(self, point: str, inp: Any, next: Any) -> Observable[AgentEvent]:
        self.log.append(f"{self.label}:{point}:pre")
        return self._wrap(point, next(inp))

    def on_agent(self, agent: Agent, ctx: RuntimeContext, input: Any, next: Any) -> Any:
        return self._onion("on_agent", input, next)

    def on_reasoning(self, agent: Agent, ctx: RuntimeContext, input: Any, next: Any) -> Any:
        return self._onion("on_reasoning", input, next)

    def on_acting(self, agent: Agent, ctx: RuntimeContext, input: Any, next: Any) -> Any:
        return self._onion("on_acting", input, next)

    def on_model_call(self, agent: Agent, ctx: RuntimeContext, input: Any, next: Any) -> Any:
        return self._onion("on_model_call", input, next)

    def on_system_prompt(self, agent: Agent, ctx: RuntimeContext, current_prompt: str) -> str:
        self.log.append(f"{self.label}:on_system_prompt")
        return current_prompt

    def on_agent_state_ready(
        self, agent: Agent, ctx: RuntimeContext, state: AgentState, input_messages: list[Msg]
    ) -> None:
        self.log.append(f"{self.label}:on_agent_state_ready")

    def on_agent_finish(
        self, agent: Agent, ctx: RuntimeContext, outcome: AgentFinishOutcome
    ) -> None:
        what = "error" if outcome.error is not None else str(outcome.reason)
        self.log.append(f"{self.label}:on_agent_finish:{what}")

    def __repr__(self) -> str:
        return f"RecordingMiddleware({self.label!r}, order={self._order})"
