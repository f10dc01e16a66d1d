"""The ledger's rules, one result per call, checked on recorded streams."""

from __future__ import annotations

from typing import Any

import pytest

from rx_agent import (
    AgentEvent,
    CustomEvent,
    DataBlock,
    TextBlock,
    ToolResultBlock,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultState,
    ToolResultTextDeltaEvent,
    ToolUseBlock,
)
from rx_agent.tool._ledger import Ledger, result_events

CALL = ToolUseBlock("c1", "add", {"a": 1})
IDS = {"reply_id": "r", "tool_call_id": "c1", "tool_call_name": "add"}


def _ledger() -> tuple[Ledger, list[AgentEvent]]:
    got: list[AgentEvent] = []
    return Ledger([CALL], got.append, "agent", "r", lambda: "Hook.on_acting()"), got


def _kinds(events: list[AgentEvent]) -> list[str]:
    return [type(e).__name__.removeprefix("ToolResult").removesuffix("Event") for e in events]


def test_a_result_that_passed_unchanged_is_the_tools_own() -> None:
    ledger, got = _ledger()
    real = ToolResultBlock("c1", "add", [TextBlock(text="a"), TextBlock(text="b")])
    events = result_events(real, "agent", "r")
    for e in events:
        ledger.core(e)
    for e in events:
        assert ledger.out(e) is None
    entry = ledger.entries["c1"]
    entry.result = real
    assert ledger.settle(entry, ToolResultState.ERROR, "missing") is real
    assert got == events


def test_a_changed_result_is_rebuilt_from_what_left_without_progress_notes() -> None:
    ledger, got = _ledger()
    picture = DataBlock(media_type="image/png", data="aGk=")
    for e in (ToolResultStartEvent(**IDS),
              ToolResultTextDeltaEvent(delta="[1/2] working\n", metadata={"progress": {}}, **IDS),
              ToolResultTextDeltaEvent(delta="see ", **IDS),
              ToolResultDataDeltaEvent(delta=picture, **IDS),
              ToolResultTextDeltaEvent(delta="!", **IDS),
              ToolResultEndEvent(state=ToolResultState.SUCCESS, **IDS)):
        assert ledger.out(e) is None
    block = ledger.settle(ledger.entries["c1"], ToolResultState.ERROR, "missing")
    assert block.output == [TextBlock(text="see "), picture, TextBlock(text="!")]
    assert len(got) == 6


def test_the_callers_grammar_holds_whatever_a_hook_drops_or_repeats() -> None:
    ledger, got = _ledger()
    assert ledger.out(ToolResultTextDeltaEvent(delta="x", **IDS)) is None  # no start yet
    assert ledger.out(ToolResultStartEvent(**IDS)) is None  # continues the open result
    assert ledger.out(CustomEvent(name="note", value=1)) is None  # others pass
    assert ledger.out(ToolResultEndEvent(state=ToolResultState.ERROR, **IDS)) is None
    assert _kinds(got) == ["Start", "TextDelta", "Custom", "End"]
    block = ledger.settle(ledger.entries["c1"], ToolResultState.ERROR, "missing")
    assert (block.output, block.state) == ("x", ToolResultState.ERROR)


@pytest.mark.parametrize("event, why", [
    (ToolResultStartEvent(reply_id="r", tool_call_id="c9", tool_call_name="add"),
     "'c9' (add), which is not one of the calls it was given (c1)"),
    (ToolResultStartEvent(reply_id="r", tool_call_id="c1", tool_call_name="sub"),
     "naming tool 'sub'; the call is to 'add'"),
])
def test_results_that_match_no_call_are_refused(event: Any, why: str) -> None:
    ledger, got = _ledger()
    error = ledger.out(event)
    assert isinstance(error, ValueError)
    assert str(error).startswith("Hook.on_acting() emitted a result for tool call ")
    assert why in str(error)
    assert got == []


def test_what_the_chain_held_back_is_completed_from_the_core_once() -> None:
    ledger, got = _ledger()
    real = ToolResultBlock("c1", "add", "3")
    start, delta, end = result_events(real, "agent", "r")
    for e in (start, delta, end):
        ledger.core(e)
    assert ledger.out(start) is None  # the chain let the start through, then stopped
    entry = ledger.entries["c1"]
    entry.result = real
    assert ledger.settle(entry, ToolResultState.ERROR, "missing") is real
    assert got == [start, delta, end]


def test_a_call_nobody_ran_or_answered_gets_the_missing_result_once() -> None:
    ledger, got = _ledger()
    block = ledger.settle(ledger.entries["c1"], ToolResultState.ERROR, "Not executed.")
    assert (block.text, block.state) == ("Not executed.", ToolResultState.ERROR)
    assert _kinds(got) == ["Start", "TextDelta", "End"]
    assert ledger.answered("c1")
