"""of_type, text, buffer_round, collect_message."""

from __future__ import annotations

import pytest
import reactivex
from reactivex.testing import TestScheduler

from rx_agent import (
    AgentEvent,
    ChatUsage,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ScriptedModel,
    TextBlockDeltaEvent,
    TextBlockStartEvent,
    ThinkingBlock,
    ThinkingBlockDeltaEvent,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent import operators as aops

from .conftest import Tracked, collect, text_round, thinking_then_tool, timed


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _agent_events(script: list, **kwargs: object) -> list[AgentEvent]:
    from rx_agent import ReActAgent

    agent = ReActAgent(name="agent", model=ScriptedModel(script), toolkit=Toolkit([add]),
                       retry_backoff=(0.0, 0.0), **kwargs)  # type: ignore[arg-type]
    items, error = collect(agent.stream("hi"))
    assert error is None
    return items


# -- of_type ---------------------------------------------------------------------------


def test_of_type_keeps_instances_of_any_class_given_unchanged() -> None:
    events = thinking_then_tool() + text_round(["a", "b"], reply_id="r2")
    items, _ = collect(reactivex.from_iterable(events).pipe(
        aops.of_type(TextBlockDeltaEvent, ThinkingBlockDeltaEvent)))
    assert [type(e) for e in items] == [ThinkingBlockDeltaEvent, TextBlockDeltaEvent,
                                        TextBlockDeltaEvent]
    assert items[1] is events[-4]  # the same object, not a copy


def test_of_type_accepts_subclasses_like_reactor_of_type() -> None:
    class Marked(TextBlockDeltaEvent):
        pass

    mine = Marked(reply_id="r", block_id="text", delta="x")
    items, _ = collect(reactivex.of(mine, ModelCallEndEvent(reply_id="r")).pipe(
        aops.of_type(TextBlockDeltaEvent)))
    assert items == [mine]


@pytest.mark.parametrize("bad", [(), (str,), ("TextBlockDeltaEvent",)])
def test_of_type_refuses_what_is_not_an_event_class(bad: tuple) -> None:
    with pytest.raises(TypeError, match="of_type"):
        aops.of_type(*bad)


def test_of_type_on_a_real_agent_selects_the_callers_tool_calls() -> None:
    from rx_agent import ReActAgent

    agent = ReActAgent(name="agent", toolkit=Toolkit([add]), model=ScriptedModel(
        [[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "3"]))
    items, error = collect(agent.stream("hi").pipe(aops.of_type(ModelCallStartEvent)))
    assert error is None and len(items) == 2
    assert all(type(e) is ModelCallStartEvent for e in items)


def test_of_type_passes_errors_and_disposal_through() -> None:
    boom = RuntimeError("boom")
    source = Tracked(text_round(["a"]), error=boom)
    items, error = collect(source.observable().pipe(aops.of_type(TextBlockDeltaEvent)))
    assert error is boom and len(items) == 1
    scheduler = TestScheduler()
    xs = scheduler.create_cold_observable(timed(text_round(["a", "b", "c"])))
    scheduler.start(lambda: xs.pipe(aops.of_type(TextBlockDeltaEvent)), disposed=235)
    assert [(s.subscribe, s.unsubscribe) for s in xs.subscriptions] == [(200, 235)]


# -- text ------------------------------------------------------------------------------


def test_text_streams_the_text_deltas_as_strings_without_thinking() -> None:
    events = thinking_then_tool() + text_round(["Hel", "lo"], reply_id="r2")
    items, _ = collect(reactivex.from_iterable(events).pipe(aops.text()))
    assert items == ["Hel", "lo"]


def test_text_of_a_real_agents_reply() -> None:
    events = _agent_events([[ThinkingBlock("hmm"), "It is ", "sunny."]])
    items, _ = collect(reactivex.from_iterable(events).pipe(aops.text()))
    assert "".join(items) == "It is sunny."


# -- buffer_round ----------------------------------------------------------------------


def test_buffer_round_emits_one_list_per_model_call_and_skips_the_rest() -> None:
    stray = TextBlockStartEvent(reply_id="x", block_id="y")  # outside any model call
    events = [*thinking_then_tool("r1"), stray, *text_round(["ok"], reply_id="r2")]
    items, _ = collect(reactivex.from_iterable(events).pipe(aops.buffer_round()))
    assert [len(r) for r in items] == [9, 5]
    assert all(type(r[0]) is ModelCallStartEvent and type(r[-1]) is ModelCallEndEvent
               for r in items)
    assert items[1][0].reply_id == "r2"


def test_buffer_round_starts_over_on_a_retried_call_and_emits_a_tail_on_completion() -> None:
    failed_attempt = [ModelCallStartEvent(reply_id="r0")]
    tail = text_round(["unfinished"], reply_id="r3")[:3]
    events = failed_attempt + text_round(["a"]) + tail
    items, _ = collect(reactivex.from_iterable(events).pipe(aops.buffer_round()))
    assert [r[0].reply_id for r in items] == ["r1", "r3"]
    assert len(items[1]) == 3


def test_buffer_round_drops_the_open_round_on_error() -> None:
    boom = RuntimeError("x")
    source = Tracked(text_round(["a"]) + text_round(["b"], reply_id="r2")[:2], error=boom)
    items, error = collect(source.observable().pipe(aops.buffer_round()))
    assert error is boom and len(items) == 1


def test_buffer_round_over_a_real_agents_rounds() -> None:
    events = _agent_events([[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "3"])
    rounds, _ = collect(reactivex.from_iterable(events).pipe(aops.buffer_round()))
    assert len(rounds) == 2
    assert any(type(e).__name__ == "ToolCallStartEvent" for e in rounds[0])


# -- collect_message ---------------------------------------------------------------------


def test_collect_message_builds_the_assistant_message_of_each_call() -> None:
    usage = ChatUsage(input_tokens=1, output_tokens=2)
    events = thinking_then_tool() + text_round(["4", "2"], reply_id="r2", usage=usage)
    msgs, _ = collect(reactivex.from_iterable(events).pipe(aops.collect_message()))
    assert len(msgs) == 2
    assert msgs[0].tool_calls[0].input == {"a": 1, "b": 2}
    assert [type(b).__name__ for b in msgs[0].content] == ["ThinkingBlock", "ToolUseBlock"]
    assert msgs[1].text == "42" and msgs[1].name == "agent"
    assert msgs[1].usage == usage


def test_collect_message_equals_what_the_runtime_stores() -> None:
    from rx_agent import ReActAgent, RuntimeContext

    ctx = RuntimeContext(session_id="s")
    agent = ReActAgent(name="agent", toolkit=Toolkit([add]), model=ScriptedModel(
        [[ThinkingBlock("plan"), ToolUseBlock("c1", "add", {"a": 1, "b": 2})],
         ["The sum ", "is 3."]]))
    items, error = collect(agent.stream("hi", ctx))
    assert error is None
    msgs, _ = collect(reactivex.from_iterable(items).pipe(aops.collect_message()))
    stored = [m for m in ctx.agent_state.context if m.role == "assistant"]
    assert [m.text for m in msgs] == ["", "The sum is 3."]
    assert [m.content for m in msgs] == [m.content for m in stored]
    assert [m.name for m in msgs] == [m.name for m in stored]


def test_collect_message_emits_nothing_for_an_empty_call_and_keeps_errors() -> None:
    boom = RuntimeError("x")
    empty = [ModelCallStartEvent(reply_id="r"), ModelCallEndEvent(reply_id="r")]
    source = Tracked(empty + text_round(["a"], reply_id="r2")[:3], error=boom)
    msgs, error = collect(source.observable().pipe(aops.collect_message()))
    assert msgs == [] and error is boom


def test_an_operator_kept_as_a_class_attribute_stays_an_operator() -> None:
    class Holder:
        select = aops.of_type(TextBlockDeltaEvent)
        limit = aops.rate_limit(0)
        retry = aops.retry_model(2)

    holder = Holder()
    items, _ = collect(reactivex.from_iterable(text_round(["a"])).pipe(holder.select,
                                                                        holder.limit))
    assert [e.delta for e in items] == ["a"]
    assert callable(holder.retry(lambda inp: reactivex.empty()))
    assert repr(holder.select) == "<rx_agent.operators.of_type()>"


def test_the_module_is_reachable_from_the_package_and_exports_the_pinned_names() -> None:
    import rx_agent

    assert rx_agent.operators is aops
    assert set(aops.__all__) == {
        "of_type", "text", "map_text", "redact", "tap_usage", "on_tool_call", "on_text",
        "buffer_round", "collect_message", "with_timeout", "retry_model", "fallback_to",
        "rate_limit", "inject_before", "inject_after"}
    assert all(getattr(aops, n).__module__ == "rx_agent.operators" for n in aops.__all__)
