"""Helpers for the operator tests: realistic event sequences, virtual-time runs, and
agents whose one hook applies an operator."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
import reactivex
from reactivex import Observable
from reactivex.disposable import Disposable
from reactivex.testing import ReactiveTest, TestScheduler

from rx_agent import (
    AgentEvent,
    ChatUsage,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReActAgent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

on_next = ReactiveTest.on_next
on_completed = ReactiveTest.on_completed
on_error = ReactiveTest.on_error

WAIT = 5.0


HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A hang here fails fast instead of eating the suite's budget.
    for item in items:
        if item.path.parent == HERE and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(20))


def text_round(parts: Sequence[str], reply_id: str = "r1", block_id: str = "text",
               usage: ChatUsage | None = None) -> list[AgentEvent]:
    """One model call that streams ``parts`` as one text block."""
    return [
        ModelCallStartEvent(reply_id=reply_id, model_name="m", source="agent"),
        TextBlockStartEvent(reply_id=reply_id, block_id=block_id),
        *[TextBlockDeltaEvent(reply_id=reply_id, block_id=block_id, delta=p) for p in parts],
        TextBlockEndEvent(reply_id=reply_id, block_id=block_id),
        ModelCallEndEvent(reply_id=reply_id, usage=usage),
    ]


def thinking_then_tool(reply_id: str = "r1", call_id: str = "c1") -> list[AgentEvent]:
    """One model call: a thinking block, then a tool call with streamed arguments."""
    return [
        ModelCallStartEvent(reply_id=reply_id, model_name="m", source="agent"),
        ThinkingBlockStartEvent(reply_id=reply_id, block_id="thinking"),
        ThinkingBlockDeltaEvent(reply_id=reply_id, block_id="thinking", delta="let me add"),
        ThinkingBlockEndEvent(reply_id=reply_id, block_id="thinking"),
        ToolCallStartEvent(reply_id=reply_id, tool_call_id=call_id, tool_call_name="add"),
        ToolCallDeltaEvent(reply_id=reply_id, tool_call_id=call_id, tool_call_name="add",
                           delta='{"a": 1, '),
        ToolCallDeltaEvent(reply_id=reply_id, tool_call_id=call_id, tool_call_name="add",
                           delta='"b": 2}'),
        ToolCallEndEvent(reply_id=reply_id, tool_call_id=call_id, tool_call_name="add"),
        ModelCallEndEvent(reply_id=reply_id, usage=ChatUsage(input_tokens=3, output_tokens=4)),
    ]


def timed(events: Iterable[AgentEvent], start: float = 10.0, step: float = 10.0,
          complete: bool = True) -> list[Any]:
    """Marble-like messages: one event every ``step`` virtual seconds from ``start``."""
    messages = [on_next(start + i * step, e) for i, e in enumerate(events)]
    if complete:
        messages.append(on_completed(start + len(messages) * step))
    return messages


def values(messages: Iterable[Any]) -> list[Any]:
    """The items of a recorded run's on_next messages."""
    return [m.value.value for m in messages if m.value.kind == "N"]


def ending(messages: list[Any]) -> Any:
    """The last recorded notification (its ``kind`` is ``"C"`` or ``"E"``)."""
    return messages[-1].value


def block_ids_valid(events: Iterable[AgentEvent]) -> bool:
    """Every delta and end belongs to an open block of its kind; every block ends."""
    open_blocks: set[tuple[str, str, str]] = set()
    kinds = {TextBlockStartEvent: ("t", 0), TextBlockDeltaEvent: ("t", 1),
             TextBlockEndEvent: ("t", 2), ThinkingBlockStartEvent: ("k", 0),
             ThinkingBlockDeltaEvent: ("k", 1), ThinkingBlockEndEvent: ("k", 2)}
    for e in events:
        found = kinds.get(type(e))
        if found is None:
            continue
        key = (found[0], e.reply_id, e.block_id)  # type: ignore[attr-defined]
        if found[1] == 0:
            if key in open_blocks:
                return False
            open_blocks.add(key)
        elif key not in open_blocks:
            return False
        elif found[1] == 2:
            open_blocks.discard(key)
    return not open_blocks


def run_virtual(make: Callable[[TestScheduler], Observable[Any]],
                disposed: float = 1000.0) -> tuple[TestScheduler, list[Any]]:
    """``make(scheduler)`` subscribed at virtual time 200 on a ``TestScheduler`` (passed at
    subscription, so the operators pick it up), disposed at ``disposed``."""
    scheduler = TestScheduler()
    result = scheduler.start(lambda: make(scheduler), created=100, subscribed=200,
                             disposed=disposed)
    return scheduler, result.messages


class Tracked:
    """A source that records subscriptions and disposals."""

    def __init__(self, events: Sequence[AgentEvent], error: Exception | None = None,
                 complete: bool = True) -> None:
        self.events = events
        self.error = error
        self.complete = complete
        self.subscribed = 0
        self.disposed = 0

    def observable(self) -> Observable[AgentEvent]:
        def subscribe(observer: Any, scheduler: Any = None) -> Disposable:
            self.subscribed += 1
            for e in self.events:
                observer.on_next(e)
            if self.error is not None:
                observer.on_error(self.error)
            elif self.complete:
                observer.on_completed()
            return Disposable(self.dispose)

        return reactivex.create(subscribe)

    def dispose(self) -> None:
        self.disposed += 1


def collect(observable: Observable[Any], timeout: float = WAIT) -> tuple[list[Any], Any]:
    """Subscribe from sync code; return the items and the error (``None`` on completion)."""
    done = threading.Event()
    items: list[Any] = []
    error: list[Any] = [None]

    def fail(exc: Exception) -> None:
        error[0] = exc
        done.set()

    subscription = observable.subscribe(items.append, fail, done.set)
    if not done.wait(timeout):
        subscription.dispose()
        raise AssertionError(f"the stream did not end within {timeout}s")
    return items, error[0]


def hook_agent(point: ExtensionPoint, hook: Callable[[Any, Any], Observable[AgentEvent]],
               model: Any, **kwargs: Any) -> ReActAgent:
    """An agent with one middleware whose ``point`` hook is ``hook(input, next)``."""

    class Hook(MiddlewareBase):
        def active_points(self) -> set[ExtensionPoint]:
            return {point}

    def method(self: Any, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return hook(input, next)

    setattr(Hook, point.value, method)
    kwargs.setdefault("retry_backoff", (0.0, 0.0))
    return ReActAgent(name="agent", model=model, middlewares=[Hook()], **kwargs)
