"""Synthesized results answer each call inside its own batch, where the model expects
them (ids such as ``call_1`` repeat across turns)."""

from __future__ import annotations

from rx_agent import AgentState, Msg, ToolResultBlock, ToolResultState, ToolUseBlock
from rx_agent.agent._results import close_unanswered
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
