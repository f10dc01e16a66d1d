"""Synthesized results answer each call inside its own batch, where the model expects
them (ids such as ``call_1`` repeat across turns)."""

from __future__ import annotations

from rx_agent import AgentState, Msg, ToolResultBlock, ToolResultState, ToolUseBlock
from rx_agent.agent._results import close_unanswered, closed_prefix
from rx_agent.testing import assert_no_orphan_tool_calls


def _call(cid: str) -> Msg:
    return Msg("assistant", [ToolUseBlock(cid, "weather", {})])


def _result(cid: str) -> Msg:
    return Msg("tool", [ToolResultBlock(cid, "weather", "sunny")])


def _roles(state: AgentState) -> list[str]:
    out = []
    for m in state.context:
        ids = [b.id for b in m.content if isinstance(b, (ToolUseBlock, ToolResultBlock))]
        out.append(f"{m.role.value}:{','.join(ids)}" if ids else m.role.value)
    return out


def test_a_reused_call_id_answered_in_an_earlier_turn_is_still_closed() -> None:
    state = AgentState(session_id="s", context=[
        Msg("user", "one"), _call("call_1"), _result("call_1"), Msg("assistant", "done"),
        Msg("user", "two"), _call("call_1"),  # the worker died here
    ])
    written = close_unanswered(state, ToolResultState.INTERRUPTED, "stopped")
    assert [b.id for b in written] == ["call_1"]
    assert _roles(state)[-2:] == ["assistant:call_1", "tool:call_1"]
    assert written[0].state is ToolResultState.INTERRUPTED


def test_an_orphan_in_an_older_turn_is_answered_right_after_its_batch() -> None:
    state = AgentState(session_id="s", context=[
        Msg("user", "one"), Msg("assistant", [ToolUseBlock("a", "weather", {}),
                                              ToolUseBlock("b", "weather", {})]),
        _result("a"), Msg("user", "two"), Msg("assistant", "ok"),
    ])
    close_unanswered(state, ToolResultState.INTERRUPTED, "stopped")
    assert _roles(state) == ["user", "assistant:a,b", "tool:a", "tool:b", "user", "assistant"]
    assert_no_orphan_tool_calls(state.context)


def test_only_closes_the_named_calls_of_the_last_batch() -> None:
    state = AgentState(session_id="s", context=[
        Msg("user", "q"), Msg("assistant", [ToolUseBlock("x", "w", {}),
                                            ToolUseBlock("y", "w", {})]), _result("x"),
    ])
    written = close_unanswered(state, ToolResultState.ERROR, "not run", only={"y"})
    assert [b.id for b in written] == ["y"]
    assert _roles(state)[-1] == "tool:y"


def test_nothing_to_close_leaves_the_context_as_it_was() -> None:
    context = [Msg("user", "q"), _call("c"), _result("c"), Msg("assistant", "a")]
    state = AgentState(session_id="s", context=list(context))
    assert close_unanswered(state, ToolResultState.ERROR, "x") == []
    assert state.context == context


# -- the closed prefix: where the repair of a long session starts ------------------------------


def _long(turns: int) -> list[Msg]:
    out: list[Msg] = []
    for i in range(turns):
        out += [Msg("user", f"q{i}"), _call(f"c{i}"), _result(f"c{i}"), Msg("assistant", "a")]
    return out


def test_a_closed_history_is_closed_to_its_end() -> None:
    context = _long(50)
    assert closed_prefix(context) == 200
    assert closed_prefix(context, 120) == 200  # only the tail is scanned
    assert closed_prefix([]) == 0


def test_the_closed_prefix_ends_where_the_open_batch_begins() -> None:
    deep = [*_long(3), Msg("assistant", [ToolUseBlock("a", "w", {}),
                                         ToolUseBlock("b", "w", {})]), _result("a"),
            *_long(500)]
    assert closed_prefix(deep) == 12  # the assistant message of the open batch
    at_end = [*_long(3), _call("x")]
    assert closed_prefix(at_end) == 12 and closed_prefix(at_end, 12) == 12


def test_an_open_call_deep_in_a_long_history_is_closed_when_the_scan_starts_before_it() -> None:
    """A fresh load knows no closed prefix (start 0): the open call at message 12 of
    2,014 is answered right after its batch. From the closed prefix the repair
    finds the same call, scanning from there only."""
    for start in (0, 12):
        deep = [*_long(3), Msg("assistant", [ToolUseBlock("a", "w", {}),
                                             ToolUseBlock("b", "w", {})]), _result("a"),
                *_long(500)]
        head = deep[:12]
        state = AgentState(session_id="s", context=deep)
        written = close_unanswered(state, ToolResultState.INTERRUPTED, "stopped", start=start)
        assert [b.id for b in written] == ["b"]
        assert _roles(state)[12:15] == ["assistant:a,b", "tool:a", "tool:b"]
        assert all(a is b for a, b in zip(state.context[:12], head, strict=True))
        assert len(state.context) == 2015 and closed_prefix(state.context) == 2015
        assert_no_orphan_tool_calls(state.context)


def test_a_scan_from_the_closed_prefix_leaves_the_prefix_alone() -> None:
    context = [*_long(2), _call("x"), Msg("user", "next")]
    state = AgentState(session_id="s", context=context)
    start = closed_prefix(context)
    assert start == 8
    close_unanswered(state, ToolResultState.INTERRUPTED, "stopped", start=start)
    assert _roles(state)[8:] == ["assistant:x", "tool:x", "user"]
