"""inject_before and inject_after."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex
from reactivex.testing import TestScheduler

from rx_agent import (
    AgentResultEvent,
    AllToolsDeniedEvent,
    ConfirmResult,
    CustomEvent,
    ExtensionPoint,
    GenerateReason,
    HintBlockEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    RequestStopEvent,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ToolCallStartEvent,
    Toolkit,
    ToolUseBlock,
    UserConfirmResultEvent,
)
from rx_agent import operators as aops

from .conftest import Tracked, block_ids_valid, collect, hook_agent, text_round, timed


def _names(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_inject_before_and_after_an_event_class() -> None:
    events = text_round(["a"])
    before, _ = collect(reactivex.from_iterable(events).pipe(aops.inject_before(
        ModelCallEndEvent, lambda e: CustomEvent("usage", e.reply_id))))
    after, _ = collect(reactivex.from_iterable(events).pipe(aops.inject_after(
        ModelCallStartEvent, lambda e: HintBlockEvent(hint="be brief"))))
    assert _names(before)[-2:] == ["CustomEvent", "ModelCallEndEvent"]
    assert before[-2].value == "r1"
    assert _names(after)[:2] == ["ModelCallStartEvent", "HintBlockEvent"]


def test_a_function_predicate_several_events_or_none() -> None:
    events = text_round(["a", "b"])
    items, _ = collect(reactivex.from_iterable(events).pipe(aops.inject_after(
        lambda e: type(e) is TextBlockDeltaEvent and e.delta == "b",
        lambda e: [CustomEvent("one"), CustomEvent("two")])))
    assert _names(items)[4:6] == ["CustomEvent", "CustomEvent"]
    nothing, _ = collect(reactivex.from_iterable(events).pipe(
        aops.inject_before(TextBlockDeltaEvent, lambda e: None)))
    assert nothing == events


def test_a_whole_injected_block_is_allowed() -> None:
    events = text_round(["a"])
    extra = [TextBlockStartEvent(reply_id="r1", block_id="note"),
             TextBlockDeltaEvent(reply_id="r1", block_id="note", delta="(note)"),
             TextBlockEndEvent(reply_id="r1", block_id="note")]
    items, error = collect(reactivex.from_iterable(events).pipe(
        aops.inject_before(ModelCallEndEvent, lambda e: extra)))
    assert error is None and block_ids_valid(items)


@pytest.mark.parametrize(("made", "message"), [
    ([TextBlockDeltaEvent(reply_id="r1", block_id="text", delta="x")], "do not start"),
    ([TextBlockStartEvent(reply_id="r1", block_id="n")], "open"),
    ([ToolCallStartEvent(reply_id="r1", tool_call_id="c", tool_call_name="t")], "tool call"),
    (["not an event"], "expected AgentEvent"),
])
def test_injected_events_that_would_break_the_stream_fail_it(made: list[Any],
                                                              message: str) -> None:
    source = Tracked(text_round(["a"]), complete=False)
    items, error = collect(source.observable().pipe(
        aops.inject_after(TextBlockStartEvent, lambda e: made)))
    assert error is not None and message in str(error)
    # The failure is checked before anything is emitted: nothing of the batch leaks.
    assert source.disposed == 1 and _names(items) == ["ModelCallStartEvent"]


def test_a_raising_factory_or_predicate_fails_the_stream() -> None:
    boom = ValueError("no")

    def fail(_: Any) -> Any:
        raise boom

    for op in (aops.inject_before(ModelCallEndEvent, fail), aops.inject_after(fail, fail)):
        _, error = collect(reactivex.from_iterable(text_round(["a"])).pipe(op))
        assert error is boom


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="not an AgentEvent class"):
        aops.inject_after(str, lambda e: None)
    with pytest.raises(TypeError, match="predicate"):
        aops.inject_after(42, lambda e: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="factory"):
        aops.inject_after(ModelCallEndEvent, "stop")  # type: ignore[arg-type]


def test_errors_and_disposal_pass_through() -> None:
    boom = RuntimeError("x")
    _, error = collect(Tracked([], error=boom).observable().pipe(
        aops.inject_after(ModelCallEndEvent, lambda e: None)))
    assert error is boom
    scheduler = TestScheduler()
    xs = scheduler.create_cold_observable(timed(text_round(["a"])))
    scheduler.start(lambda: xs.pipe(aops.inject_after(ModelCallEndEvent, lambda e: None)),
                    disposed=235)
    assert xs.subscriptions[0].unsubscribe == 235


def _drop_table(table: str) -> str:
    """Drop a table."""
    return f"dropped {table}"


def test_stop_on_all_denied_in_on_acting_of_a_real_agent() -> None:
    toolkit = Toolkit()
    toolkit.register_tool(_drop_table, permission="ask")
    model = ScriptedModel([[ToolUseBlock("c1", "_drop_table", {"table": "users"})], "never"])
    agent = hook_agent(ExtensionPoint.ON_ACTING, lambda inp, next: next(inp).pipe(
        aops.inject_after(AllToolsDeniedEvent, lambda e: RequestStopEvent(
            "All tools denied by user", GenerateReason.ALL_TOOLS_DENIED))),
        model, toolkit=toolkit)
    ctx = RuntimeContext(session_id="s")
    paused, error = collect(agent.stream("drop it", ctx))
    assert error is None
    result = paused[-2].result
    answer = UserConfirmResultEvent(reply_id=result.metadata["reply_id"], confirm_results=[
        ConfirmResult(result.tool_calls[0], False, reason="no")])
    items, error = collect(agent.stream(answer, ctx))
    assert error is None
    names = _names(items)
    assert names.index("AllToolsDeniedEvent") + 1 == names.index("RequestStopEvent")
    final = next(e for e in items if isinstance(e, AgentResultEvent)).result
    assert final.generate_reason is GenerateReason.ALL_TOOLS_DENIED
    assert len(model.calls) == 1
