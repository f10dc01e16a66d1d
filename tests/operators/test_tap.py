"""tap_usage, on_tool_call, on_text: side effects that leave the stream unchanged."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex

from rx_agent import (
    ChatUsage,
    ExtensionPoint,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent import operators as aops

from .conftest import Tracked, collect, hook_agent, text_round, thinking_then_tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _script() -> ScriptedModel:
    return ScriptedModel([[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], ["The sum ", "is 3."]])


def test_tap_usage_sees_each_model_calls_usage_and_changes_nothing() -> None:
    seen: list[ChatUsage] = []
    events = thinking_then_tool() + text_round(["a"], reply_id="r2")  # r2 reports no usage
    items, _ = collect(reactivex.from_iterable(events).pipe(aops.tap_usage(seen.append)))
    assert items == events
    assert seen == [ChatUsage(input_tokens=3, output_tokens=4)]


def test_tap_usage_in_on_model_call_of_a_real_agent() -> None:
    seen: list[ChatUsage] = []
    agent = hook_agent(ExtensionPoint.ON_MODEL_CALL,
                       lambda inp, next: next(inp).pipe(aops.tap_usage(seen.append)),
                       _script(), toolkit=Toolkit([add]))
    _, error = collect(agent.stream("hi"))
    assert error is None and len(seen) == 2
    assert all(u.output_tokens > 0 for u in seen)


def test_on_tool_call_gets_each_complete_call() -> None:
    seen: list[ToolUseBlock] = []
    events = thinking_then_tool()
    items, _ = collect(reactivex.from_iterable(events).pipe(aops.on_tool_call(seen.append)))
    assert items == events
    assert seen == [ToolUseBlock("c1", "add", {"a": 1, "b": 2})]


def test_on_tool_call_keeps_arguments_that_are_not_a_json_object_raw() -> None:
    seen: list[ToolUseBlock] = []
    events = thinking_then_tool()
    events[5] = events[5].model_copy(update={"delta": "not json"})
    events[6] = events[6].model_copy(update={"delta": ""})
    collect(reactivex.from_iterable(events).pipe(aops.on_tool_call(seen.append)))
    assert seen[0].input == {} and seen[0].raw_input == "not json"


def test_on_tool_call_in_on_reasoning_of_a_real_agent() -> None:
    seen: list[ToolUseBlock] = []
    agent = hook_agent(ExtensionPoint.ON_REASONING,
                       lambda inp, next: next(inp).pipe(aops.on_tool_call(seen.append)),
                       _script(), toolkit=Toolkit([add]))
    _, error = collect(agent.stream("hi"))
    assert error is None
    assert seen == [ToolUseBlock("c1", "add", {"a": 1, "b": 2})]


def test_on_text_sees_each_text_delta_as_it_streams() -> None:
    seen: list[str] = []
    agent = hook_agent(ExtensionPoint.ON_AGENT,
                       lambda inp, next: next(inp).pipe(aops.on_text(seen.append)),
                       _script(), toolkit=Toolkit([add]))
    _, error = collect(agent.stream("hi"))
    assert error is None and seen == ["The sum ", "is 3."]


@pytest.mark.parametrize("name", ["tap_usage", "on_tool_call", "on_text"])
def test_a_raising_callback_fails_the_stream_and_disposes_the_source(name: str) -> None:
    make = getattr(aops, name)
    boom = ValueError("callback failed")

    def fail(_: Any) -> None:
        raise boom

    source = Tracked(thinking_then_tool() + text_round(["x"], reply_id="r2",
                                                       usage=ChatUsage(input_tokens=1)),
                     complete=False)
    items, error = collect(source.observable().pipe(make(fail)))
    assert error is boom
    assert source.disposed == 1
    assert len(items) < 14  # nothing after the failure


@pytest.mark.parametrize("name", ["tap_usage", "on_tool_call", "on_text"])
def test_a_callback_that_is_not_callable_is_refused(name: str) -> None:
    with pytest.raises(TypeError, match=name):
        getattr(aops, name)("not a function")


def test_source_errors_pass_through_a_tap() -> None:
    boom = RuntimeError("model failed")
    seen: list[str] = []
    _, error = collect(Tracked(text_round(["a"])[:3], error=boom).observable()
                           .pipe(aops.on_text(seen.append)))
    assert error is boom and seen == ["a"]


def test_the_same_tap_operator_serves_many_subscriptions() -> None:
    seen: list[ToolUseBlock] = []
    op = aops.on_tool_call(seen.append)
    for _ in range(2):
        collect(reactivex.from_iterable(thinking_then_tool()).pipe(op))
    assert len(seen) == 2
