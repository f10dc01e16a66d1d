"""map_text: per delta, and across delta boundaries."""

from __future__ import annotations

import pytest
import reactivex
from reactivex.testing import TestScheduler

from rx_agent import (
    ExtensionPoint,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlock,
    ToolUseBlock,
)
from rx_agent import operators as aops

from .conftest import (
    Tracked,
    block_ids_valid,
    collect,
    hook_agent,
    text_round,
    thinking_then_tool,
    timed,
    values,
)


def _deltas(events: list) -> list[str]:
    return [e.delta for e in events if type(e) is TextBlockDeltaEvent]


def test_map_text_rewrites_each_delta_and_keeps_everything_else() -> None:
    events = thinking_then_tool() + text_round(["abc", "def"], reply_id="r2")
    items, _ = collect(reactivex.from_iterable(events).pipe(aops.map_text(str.upper)))
    assert _deltas(items) == ["ABC", "DEF"]
    assert len(items) == len(events)
    assert items[:9] == events[:9]  # thinking and the tool call untouched
    rewritten = items[11]
    assert (rewritten.id, rewritten.block_id, rewritten.reply_id) == (
        events[11].id, "text", "r2")  # a changed copy of the same event


def test_map_text_drops_a_delta_mapped_to_empty_text_but_keeps_the_block() -> None:
    events = text_round(["keep", "drop"])
    items, _ = collect(reactivex.from_iterable(events).pipe(
        aops.map_text(lambda t: "" if t == "drop" else t)))
    assert _deltas(items) == ["keep"]
    assert block_ids_valid(items)


def test_map_text_per_delta_misses_a_pattern_split_over_deltas() -> None:
    items, _ = collect(reactivex.from_iterable(text_round(["I like ca", "ts"])).pipe(
        aops.map_text(lambda t: t.replace("cats", "dogs"))))
    assert "".join(_deltas(items)) == "I like cats"


def test_map_text_across_deltas_rewrites_the_whole_block_before_its_end() -> None:
    events = text_round(["I like ca", "ts and ", "cats"])
    items, _ = collect(reactivex.from_iterable(events).pipe(
        aops.map_text(lambda t: t.replace("cats", "dogs"), across_deltas=True)))
    assert [type(e) for e in items[1:4]] == [TextBlockStartEvent, TextBlockDeltaEvent,
                                             TextBlockEndEvent]
    assert _deltas(items) == ["I like dogs and dogs"]
    assert block_ids_valid(items) and len(items) == 5


def test_map_text_across_deltas_streams_the_start_at_once_and_holds_the_deltas() -> None:
    scheduler = TestScheduler()
    xs = scheduler.create_cold_observable(timed(text_round(["a", "b"])))
    result = scheduler.start(lambda: xs.pipe(aops.map_text(str.upper, across_deltas=True)))
    stamps = [(m.time, type(m.value.value).__name__) for m in result.messages
              if m.value.kind == "N"]
    assert stamps == [(210, "ModelCallStartEvent"), (220, "TextBlockStartEvent"),
                      (250, "TextBlockDeltaEvent"), (250, "TextBlockEndEvent"),
                      (260, "ModelCallEndEvent")]
    assert values(result.messages)[2].delta == "AB"


def test_map_text_across_deltas_keeps_blocks_apart_and_flushes_at_completion() -> None:
    two = text_round(["x", "y"]) + text_round(["p", "q"], reply_id="r2", block_id="text-2")
    open_block = text_round(["tail ", "end"], reply_id="r3")[:4]  # no end, no call end
    items, error = collect(reactivex.from_iterable(two + open_block).pipe(
        aops.map_text(lambda t: f"<{t}>", across_deltas=True)))
    assert error is None
    assert _deltas(items) == ["<xy>", "<pq>", "<tail end>"]


def test_map_text_across_deltas_drops_held_text_on_error() -> None:
    boom = RuntimeError("cut")
    items, error = collect(Tracked(text_round(["a", "b"])[:3], error=boom).observable().pipe(
        aops.map_text(str.upper, across_deltas=True)))
    assert error is boom and _deltas(items) == []


@pytest.mark.parametrize("across", [False, True])
def test_a_function_returning_a_non_string_fails_the_stream(across: bool) -> None:
    source = Tracked(text_round(["a"]), complete=False)
    _, error = collect(source.observable().pipe(
        aops.map_text(lambda t: 42, across_deltas=across)))  # type: ignore[arg-type,return-value]
    assert isinstance(error, TypeError) and "returned int" in str(error)
    assert source.disposed == 1


@pytest.mark.parametrize("across", [False, True])
def test_a_raising_function_fails_the_stream_and_disposes_the_source(across: bool) -> None:
    boom = ValueError("no")

    def fail(_: str) -> str:
        raise boom

    source = Tracked(text_round(["a", "b"]), complete=False)
    items, error = collect(source.observable().pipe(aops.map_text(fail, across_deltas=across)))
    assert error is boom and source.disposed == 1
    assert not any(type(e) is TextBlockDeltaEvent for e in items)


def test_disposal_reaches_the_source() -> None:
    scheduler = TestScheduler()
    xs = scheduler.create_cold_observable(timed(text_round(["a", "b", "c"])))
    scheduler.start(lambda: xs.pipe(aops.map_text(str.upper, across_deltas=True)),
                    disposed=245)
    assert [(s.subscribe, s.unsubscribe) for s in xs.subscriptions] == [(200, 245)]


def test_map_text_refuses_what_is_not_a_function() -> None:
    with pytest.raises(TypeError, match="map_text"):
        aops.map_text("upper")  # type: ignore[arg-type]


@pytest.mark.parametrize("across", [False, True])
def test_map_text_in_on_model_call_is_what_the_context_stores(across: bool) -> None:
    ctx = RuntimeContext(session_id="s")
    model = ScriptedModel([[ThinkingBlock("think"), "Our cats", " are ca", "ts."]])
    agent = hook_agent(ExtensionPoint.ON_MODEL_CALL, lambda inp, next: next(inp).pipe(
        aops.map_text(lambda t: t.replace("cats", "dogs"), across_deltas=across)), model)
    items, error = collect(agent.stream("hi", ctx))
    assert error is None
    stored = ctx.agent_state.context[-1]
    expected = "Our dogs are dogs." if across else "Our dogs are cats."
    assert stored.text == expected
    assert items[-2].result.text == expected  # AgentResultEvent
    assert block_ids_valid(items)


def test_map_text_on_a_tool_round_keeps_the_tool_call_whole() -> None:
    from rx_agent import Toolkit, tool

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    model = ScriptedModel([["Let me add.", ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "3"])
    agent = hook_agent(ExtensionPoint.ON_MODEL_CALL, lambda inp, next: next(inp).pipe(
        aops.map_text(str.upper, across_deltas=True)), model, toolkit=Toolkit([add]))
    ctx = RuntimeContext(session_id="s")
    _, error = collect(agent.stream("hi", ctx))
    assert error is None
    first = ctx.agent_state.context[1]
    assert first.text == "LET ME ADD." and first.tool_calls[0].input == {"a": 1, "b": 2}
    assert ctx.agent_state.context[2].role == "tool"  # the call got its result
