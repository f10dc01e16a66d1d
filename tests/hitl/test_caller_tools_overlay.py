"""CallerTools: one call's tools that the caller runs (a protocol client's front-end
tools) are external tools of that call only."""

from __future__ import annotations

from typing import Any

import pytest
from reactivex import operators as ops

from rx_agent import (
    ExternalExecutionResultEvent,
    GenerateReason,
    ReActAgent,
    RequireExternalExecutionEvent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultBlock,
    ToolUseBlock,
    tool,
)
from rx_agent.tool import CallerTool, CallerTools

SCHEMA = {"name": "pick_date", "description": "Let the user pick a date",
          "parameters": {"type": "object", "properties": {"month": {"type": "string"}}}}


@tool
def clock() -> str:
    """The time."""
    return "noon"


def test_the_model_sees_them_and_calling_one_pauses_for_the_caller() -> None:
    model = ScriptedModel([[ToolUseBlock("c1", "pick_date", {"month": "May"})], "May 3 it is"])
    agent = ReActAgent(name="a", model=model, toolkit=Toolkit([clock]))
    ctx = RuntimeContext(session_id="s")
    ctx.put(CallerTools, CallerTools([SCHEMA]))
    paused = agent.call_sync("when?", ctx)
    assert paused.generate_reason is GenerateReason.TOOL_SUSPENDED
    seen = model.calls[0].tools
    assert [t["name"] for t in seen] == ["clock", "pick_date"]
    assert seen[1] == SCHEMA
    state = ctx.agent_state
    assert state is not None and state.pending is not None
    assert state.pending.kind == "external" and [c.id for c in state.pending.tool_calls] == ["c1"]
    assert "pick_date" not in agent.toolkit  # the agent's toolkit is untouched

    answer = ExternalExecutionResultEvent(state.pending.reply_id,
                                          [ToolResultBlock("c1", "pick_date", "May 3")])
    reply = agent.call_sync(answer, ctx)
    assert reply.text == "May 3 it is"
    # A call without them: the model sees the agent's tools only.
    model2 = ScriptedModel(["ok"])
    plain = ReActAgent(name="b", model=model2, toolkit=Toolkit([clock]))
    plain.call_sync("hi", RuntimeContext(session_id="t"))
    assert [t["name"] for t in model2.calls[0].tools] == ["clock"]


def test_the_pause_is_a_require_external_execution_event() -> None:
    model = ScriptedModel([[ToolUseBlock("c1", "pick_date", {})]])
    agent = ReActAgent(name="a", model=model)
    ctx = RuntimeContext(session_id="s", attributes={CallerTools: CallerTools([SCHEMA])})
    seen: list[Any] = agent.stream("when?", ctx).pipe(ops.to_list()).run()
    asked = [e for e in seen if isinstance(e, RequireExternalExecutionEvent)]
    assert [c.name for c in asked[0].tool_calls] == ["pick_date"]
    result = next(e for e in seen if e.type == "agent_result")
    assert result.result.generate_reason is GenerateReason.TOOL_SUSPENDED


def test_bad_caller_tools_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="tool name 'two words' is invalid"):
        CallerTools([{"name": "two words"}])
    with pytest.raises(ValueError, match="the caller's tools name 'x' twice"):
        CallerTools([{"name": "x"}, CallerTool("x")])
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['params'\]"):
        CallerTools([{"name": "x", "params": {}}])
    with pytest.raises(TypeError, match="must be a JSON Schema object, not list"):
        CallerTool("x", "", [])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a CallerTool or a schema mapping, not str"):
        CallerTools(["x"])  # type: ignore[list-item]
    clash = CallerTools([{"name": "clock"}])
    assert clash.clashes(Toolkit([clock])) == ["clock"]
    with pytest.raises(ValueError, match="have the name of one of the agent's own tools"):
        clash.overlay(Toolkit([clock]))
    assert CallerTool("x").parameters == {"type": "object", "properties": {}}


def test_a_sub_agent_does_not_get_the_callers_tools() -> None:
    inner_model = ScriptedModel(["inner answer"])
    inner = ReActAgent(name="inner", model=inner_model)
    outer_model = ScriptedModel([[ToolUseBlock("c1", "inner", {"task": "help"})], "done"])
    outer = ReActAgent(name="outer", model=outer_model,
                       toolkit=Toolkit([inner.as_tool(name="inner", description="Helps")]))
    ctx = RuntimeContext(session_id="s", attributes={CallerTools: CallerTools([SCHEMA])})
    assert outer.call_sync("go", ctx).text == "done"
    assert "pick_date" in [t["name"] for t in outer_model.calls[0].tools]
    assert [t["name"] for t in inner_model.calls[0].tools] == []
