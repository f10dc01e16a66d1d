"""The public testing helpers."""

from __future__ import annotations

import pytest

from rx_agent import ExtensionPoint, Msg, ReActAgent, ScriptedModel, ToolResultBlock, ToolUseBlock
from rx_agent.testing import (
    RecordingMiddleware,
    assert_no_orphan_tool_calls,
    collect_events,
    event_types,
    final_result,
)


def test_recording_middleware_logs_the_onion_and_the_notifications() -> None:
    log: list[str] = []
    agent = ReActAgent(
        name="a",
        model=ScriptedModel(["hi"]),
        middlewares=[
            RecordingMiddleware("inner", log, order=1, events=False),
            RecordingMiddleware("outer", log, order=2, events=False),
        ],
    )
    events = collect_events(agent, "hello")
    assert event_types(events)[0] == "AgentStartEvent"
    assert final_result(events).text == "hi"
    assert log == [
        "outer:on_agent:pre", "inner:on_agent:pre",
        "outer:on_agent_state_ready", "inner:on_agent_state_ready",
        "outer:on_system_prompt", "inner:on_system_prompt",
        "outer:on_reasoning:pre", "inner:on_reasoning:pre",
        "outer:on_model_call:pre", "inner:on_model_call:pre",
        "inner:on_model_call:post", "outer:on_model_call:post",
        "inner:on_reasoning:post", "outer:on_reasoning:post",
        "inner:on_agent:post", "outer:on_agent:post",
        "outer:on_agent_finish:MODEL_STOP", "inner:on_agent_finish:MODEL_STOP",
    ]


def test_recording_middleware_logs_events_inner_first_and_respects_points() -> None:
    log: list[str] = []
    only = {ExtensionPoint.ON_MODEL_CALL}
    agent = ReActAgent(name="a", model=ScriptedModel(["hi"]), middlewares=[
        RecordingMiddleware("m", log, points=only)])
    collect_events(agent, "x")
    assert log[0] == "m:on_model_call:pre"
    assert "m:on_model_call:event:TextBlockDeltaEvent" in log
    assert all(entry.startswith("m:on_model_call") for entry in log)


def test_orphan_check() -> None:
    call = ToolUseBlock("c1", "f", {})
    with pytest.raises(AssertionError, match="c1"):
        assert_no_orphan_tool_calls([Msg("assistant", [call])])
    answered = [Msg("assistant", [call]), Msg("tool", [ToolResultBlock("c1", "f")])]
    assert_no_orphan_tool_calls(answered)


def test_final_result_needs_exactly_one() -> None:
    with pytest.raises(AssertionError):
        final_result([])
