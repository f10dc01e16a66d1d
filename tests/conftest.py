"""Shared helpers for the conformance suite (the behaviour docs/ describes).

Everything here uses only the pinned top-level names of ``rx_agent`` plus
``reactivex``. Test modules import the helpers with ``from conftest import ...``.
"""

from __future__ import annotations

import os

# The runtime's validation-free records check their keys in the test suite (set before
# rx_agent is imported: the flag is read once).
os.environ.setdefault("RX_AGENT_CHECK_RECORDS", "1")

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

import pytest
import reactivex
import reactivex.operators as ops
from reactivex import Observable

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    MiddlewareBase,
    Msg,
    ReActAgent,
    Toolkit,
    ToolResultBlock,
    ToolUseBlock,
    tool,
)
from rx_agent.testing import (
    assert_no_orphan_tool_calls,  # noqa: F401  (test modules import it from here)
    collect,
    event_types,
    final_result,
)

# Every test gets a short hard timeout: a hang fails fast instead of eating the budget.
HARD_TIMEOUT = 15
WAIT = 3.0  # seconds a helper waits for a call to end (a hang fails fast)


_OWN_DIRS = ("agent", "middleware", "core")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        in_suite = item.path.parent.name in _OWN_DIRS and item.path.parent.parent.name == "tests"
        if in_suite and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(HARD_TIMEOUT))


# -- building agents ---------------------------------------------------------------------------


def make_agent(model: Any, *, name: str = "agent", **kwargs: Any) -> ReActAgent:
    """Keyword construction with instant retries (tests must stay fast)."""
    kwargs.setdefault("retry_backoff", (0.0, 0.0))
    return ReActAgent(name=name, model=model, **kwargs)


def builder(model: Any, *, name: str = "agent") -> Any:
    """``ReActAgent.builder()`` preset with a name, a model and instant retries."""
    return ReActAgent.builder().name(name).model(model).retry_backoff(0.0, 0.0)


def add_toolkit(*extra: Callable[..., Any]) -> Toolkit:
    """A toolkit with ``add(a: int, b: int)`` plus any extra functions."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    toolkit = Toolkit()
    toolkit.register_tool(add)
    for fn in extra:
        toolkit.register_tool(fn)
    return toolkit


def call_add(call_id: str = "c1", a: int = 1, b: int = 2) -> ToolUseBlock:
    return ToolUseBlock(call_id, "add", {"a": a, "b": b})


# -- running calls -----------------------------------------------------------------------------


def run_stream(observable: Observable[Any], timeout: float = WAIT) -> list[Any]:
    """Subscribe from plain synchronous code and collect every item (raises on error)."""
    return collect(observable, timeout)


def stream_events(agent: ReActAgent, msgs: Any = "hi", ctx: Any = None) -> list[AgentEvent]:
    return run_stream(agent.stream(msgs, ctx))


async def astream_events(agent: ReActAgent, msgs: Any = "hi", ctx: Any = None) -> list[AgentEvent]:
    """Collect a call's events inside the running loop (by awaiting the Observable)."""
    return await asyncio.wait_for(_await(agent.stream(msgs, ctx).pipe(ops.to_list())), WAIT)


async def _await(observable: Observable[Any]) -> Any:
    return await observable


async def acall(agent: ReActAgent, msgs: Any = "hi", ctx: Any = None) -> Msg:
    return await asyncio.wait_for(agent.acall(msgs, ctx), WAIT)


def stream_error(
    observable: Observable[Any], timeout: float = WAIT
) -> tuple[list[Any], BaseException]:
    """Subscribe, expect ``on_error``; return the items seen before it and the error."""
    done = threading.Event()
    items: list[Any] = []
    outcome: list[BaseException | None] = []

    def on_error(exc: BaseException) -> None:
        outcome.append(exc)
        done.set()

    def on_completed() -> None:
        outcome.append(None)
        done.set()

    subscription = observable.subscribe(items.append, on_error, on_completed)
    if not done.wait(timeout):
        subscription.dispose()
        raise AssertionError(f"the stream did not terminate within {timeout}s")
    assert outcome[0] is not None, "expected the stream to error, it completed"
    return items, outcome[0]


type_names = event_types


def of_type(events: Iterable[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


result_msg = final_result


def tool_results(messages: Iterable[Msg]) -> list[ToolResultBlock]:
    """Every ``ToolResultBlock`` in a list of messages, in order."""
    return [b for m in messages for b in m.content if isinstance(b, ToolResultBlock)]


def tool_calls(messages: Iterable[Msg]) -> list[ToolUseBlock]:
    return [b for m in messages for b in m.content if isinstance(b, ToolUseBlock)]


def role_of(msg: Msg) -> str:
    role = msg.role
    return getattr(role, "value", role)


def changed(record: Any, **changes: Any) -> Any:
    """A changed copy of an immutable input record, whichever copy API the port picked."""
    if hasattr(record, "with_"):
        return record.with_(**changes)
    if dataclasses.is_dataclass(record):
        return dataclasses.replace(record, **changes)
    return record.model_copy(update=changes)


def wait_until(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.005)


async def await_until(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


# -- middlewares -------------------------------------------------------------------------------

ONION = (
    ExtensionPoint.ON_AGENT,
    ExtensionPoint.ON_REASONING,
    ExtensionPoint.ON_ACTING,
    ExtensionPoint.ON_MODEL_CALL,
)


class RecordingMiddleware(MiddlewareBase):
    """Logs ``{name}_pre``, ``{name}_event``, ``{name}_post`` (per onion point, tagged
    with the point) and the calls of the other hooks into a shared ``log`` list.

    ``log`` entries are tuples ``(name, point_value, what, detail)``.
    """

    def __init__(
        self,
        name: str,
        log: list[tuple[Any, ...]],
        order: int = 1,
        points: Collection[ExtensionPoint] | None = None,
    ) -> None:
        self.label = name
        self.log = log
        self._order = order
        self._points = points

    def order(self) -> int:
        return self._order

    def active_points(self) -> Collection[ExtensionPoint] | None:
        return self._points

    def _wrap(
        self, point: str, inp: Any, next: Callable[[Any], Observable[Any]]
    ) -> Observable[Any]:
        self.log.append((self.label, point, "pre", inp))
        return next(inp).pipe(
            ops.do_action(
                on_next=lambda e: self.log.append((self.label, point, "event", e)),
                on_completed=lambda: self.log.append((self.label, point, "post", None)),
            )
        )

    def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return self._wrap("on_agent", input, next)

    def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return self._wrap("on_reasoning", input, next)

    def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return self._wrap("on_acting", input, next)

    def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return self._wrap("on_model_call", input, next)

    def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def]
        self.log.append((self.label, "on_system_prompt", "call", current_prompt))
        return current_prompt

    def on_agent_state_ready(self, agent, ctx, state, input_messages):  # type: ignore[no-untyped-def]
        self.log.append((self.label, "on_agent_state_ready", "call", list(input_messages)))

    def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def]
        self.log.append((self.label, "on_agent_finish", "call", outcome))
        return

    def __repr__(self) -> str:
        return f"Recording({self.label})"


def entries(
    log: list[tuple[Any, ...]], point: str | None = None, what: str | None = None
) -> list[tuple[Any, ...]]:
    return [e for e in log if (point is None or e[1] == point) and (what is None or e[2] == what)]


def points_hit(log: list[tuple[Any, ...]], name: str | None = None) -> set[str]:
    return {e[1] for e in log if name is None or e[0] == name}


class PassThrough(MiddlewareBase):
    """Overrides every hook and changes nothing."""

    def __init__(self, points: Collection[ExtensionPoint] | None = None, order: int = 1) -> None:
        self._points = points
        self._order = order

    def order(self) -> int:
        return self._order

    def active_points(self) -> Collection[ExtensionPoint] | None:
        return self._points

    def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return next(input).pipe(ops.map(lambda e: e))

    def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return next(input).pipe(ops.filter(lambda e: True))

    def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return next(input).pipe(ops.do_action(lambda e: None))

    def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return reactivex.defer(lambda _: next(input))

    def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def]
        return reactivex.just(current_prompt)

    def on_agent_state_ready(self, agent, ctx, state, input_messages):  # type: ignore[no-untyped-def]
        return None

    def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def]
        return reactivex.empty()


class Ordered(MiddlewareBase):
    """A silent middleware with a given order (for plan tests)."""

    def __init__(self, label: str, order: int = 1) -> None:
        self.label = label
        self._order = order

    def order(self) -> int:
        return self._order

    def __repr__(self) -> str:
        return f"Ordered({self.label}, {self._order})"
