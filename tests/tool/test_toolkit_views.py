"""What calls derive from a toolkit is built once per change of its tools
(rx_agent/tool/_views.py): the same schemas while nothing changes, the new ones
after any change, and what is read per tool call (permissions) always current."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from rx_agent import (
    Msg,
    Permission,
    PermissionRule,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultBlock,
    ToolUseBlock,
    tool,
)
from rx_agent.message import ToolResultState
from rx_agent.tool import CallerTools, _views


def echo(value: int) -> str:
    """Echo a number."""
    return str(value)


def clock() -> str:
    """The time."""
    return "noon"


def names(schemas: Any) -> list[str]:
    return [s["name"] for s in schemas]


# ------------------------------------------------------------------ the view itself


def test_the_view_is_the_same_tuple_until_the_tools_change() -> None:
    kit = Toolkit([echo])
    view = kit.schema_view()
    assert kit.schema_view() is view
    assert list(view) == kit.schemas()
    version = kit.version
    kit.register_tool(clock)
    assert kit.version != version
    grown = kit.schema_view()
    assert names(grown) == ["echo", "clock"] and grown[0] is view[0]  # extended
    kit.remove_tool("echo")
    assert names(kit.schema_view()) == ["clock"]
    assert kit.schema_view() == tuple(kit.schemas())


def test_every_change_takes_a_new_version() -> None:
    kit = Toolkit()
    seen = {kit.version}
    kit.register_tool(echo)
    seen.add(kit.version)
    kit.register_tool(clock, name="clock2")
    seen.add(kit.version)
    kit.remove_tool("clock2")
    seen.add(kit.version)
    copy = kit.copy()
    seen.add(copy.version)
    assert len(seen) == 5


def test_a_tools_schema_field_replaced_is_seen() -> None:
    kit = Toolkit([echo])
    view = kit.schema_view()
    spec = kit.get("echo")
    assert spec is not None
    spec.description = "Echo a number back."
    assert kit.schema_view() is not view
    assert kit.schema_view()[0]["description"] == "Echo a number back."
    spec.parameters = {"type": "object", "properties": {}}
    assert kit.schema_view()[0]["parameters"] == {"type": "object", "properties": {}}
    # Another attribute is no schema change: the view stays.
    current = kit.schema_view()
    spec.source = "elsewhere"
    assert kit.schema_view() is current


def test_a_copy_starts_from_the_same_view_and_changes_alone() -> None:
    kit = Toolkit([echo])
    view = kit.schema_view()
    copy = kit.copy()
    assert copy.schema_view() is view
    copy.register_tool(clock)
    assert names(copy.schema_view()) == ["echo", "clock"]
    assert kit.schema_view() is view


def test_a_schema_changed_in_place_is_caught_in_the_test_suite(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # RX_AGENT_CHECK_RECORDS=1, as tests/conftest.py sets it: the shared schemas are
    # checked on every read.
    monkeypatch.setattr(_views, "CHECK_RECORDS", True)
    kit = Toolkit([echo])
    view = kit.schema_view()
    view[0]["description"] = "edited in place by a hook"
    with pytest.raises(RuntimeError, match="'echo' was changed in place"):
        kit.schema_view()
    kit = Toolkit([echo])
    kit.schema_view()[0]["parameters"]["properties"]["value"]["type"] = "string"
    with pytest.raises(RuntimeError, match="'echo' was changed in place"):
        kit.schema_view()


# --------------------------------------------------------- what a model is offered


def tools_seen(model: ScriptedModel) -> list[list[str]]:
    return [names(c.tools) for c in model.calls]


def test_tools_added_and_removed_between_calls_reach_the_model() -> None:
    model = ScriptedModel(["one", "two", "three", "four"])
    kit = Toolkit([echo])
    agent = ReActAgent(name="a", model=model, toolkit=kit)
    agent.call_sync("hi")
    agent.toolkit.register_tool(clock)
    agent.call_sync("hi")
    agent.toolkit.remove_tool("echo")
    agent.call_sync("hi")
    agent.call_sync("hi")
    assert tools_seen(model) == [["echo"], ["echo", "clock"], ["clock"], ["clock"]]
    assert model.calls[3].tools is model.calls[2].tools  # unchanged: the same view


def test_a_description_changed_between_calls_reaches_the_model() -> None:
    model = ScriptedModel(["one", "two"])
    agent = ReActAgent(name="a", model=model, toolkit=Toolkit([echo]))
    agent.call_sync("hi")
    spec = agent.toolkit.get("echo")
    assert spec is not None
    spec.description = "Repeat a number."
    agent.call_sync("hi")
    assert [c.tools[0]["description"] for c in model.calls] == ["Echo a number.",
                                                                "Repeat a number."]


def test_structured_output_and_caller_tools_join_one_call_only() -> None:
    class Answer(BaseModel):
        value: int

    model = ScriptedModel([[ToolUseBlock("r", "generate_response", {"value": 3})], "plain",
                           "with the caller's"])
    agent = ReActAgent(name="a", model=model, toolkit=Toolkit([echo]))
    assert agent.call_sync("hi", structured_model=Answer).structured == Answer(value=3)
    agent.call_sync("hi")
    ctx = RuntimeContext(session_id="s")
    ctx.put(CallerTools, CallerTools([{"name": "pick", "description": "Pick one."}]))
    agent.call_sync("hi", ctx)
    assert tools_seen(model) == [["echo", "generate_response"], ["echo"], ["echo", "pick"]]
    assert names(agent.toolkit.schema_view()) == ["echo"]


# -------------------------------------------------------------------- permissions


def results(model: ScriptedModel, call: int) -> list[ToolResultBlock]:
    msgs: tuple[Msg, ...] = model.calls[call].messages
    return [b for m in msgs for b in m.tool_results]


def test_permission_changes_between_calls_are_honoured() -> None:
    def round_trip(i: int) -> list[Any]:
        return [[ToolUseBlock(f"c{i}", "echo", {"value": i})], f"done {i}"]

    model = ScriptedModel([*round_trip(1), *round_trip(2), *round_trip(3), *round_trip(4)])
    agent = ReActAgent(name="a", model=model, toolkit=Toolkit([echo]))
    agent.call_sync("first", RuntimeContext(session_id="s"))
    spec = agent.toolkit.get("echo")
    assert spec is not None
    spec.permission = Permission.DENY  # the tool's own default
    agent.call_sync("second", RuntimeContext(session_id="t"))
    spec.permission = Permission.ALLOW
    spec.rules = (PermissionRule("echo", "deny", reason="not today"),)  # its rules
    agent.call_sync("third", RuntimeContext(session_id="u"))
    spec.rules = ()
    agent.call_sync("fourth", RuntimeContext(session_id="v"))
    states = [[r.state for r in results(model, i)] for i in (1, 3, 5, 7)]
    assert states == [[ToolResultState.SUCCESS], [ToolResultState.DENIED],
                      [ToolResultState.DENIED], [ToolResultState.SUCCESS]]
    assert "not today" in results(model, 5)[0].text


def test_a_tool_replaced_under_the_same_name_runs_the_new_one() -> None:
    @tool(name="echo")
    def loud(value: int) -> str:
        """Echo a number, loudly."""
        return f"{value}!"

    model = ScriptedModel([[ToolUseBlock("c1", "echo", {"value": 1})], "one",
                           [ToolUseBlock("c2", "echo", {"value": 2})], "two"])
    agent = ReActAgent(name="a", model=model, toolkit=Toolkit([echo]))
    agent.call_sync("hi", RuntimeContext(session_id="s"))
    agent.toolkit.remove_tool("echo")
    agent.toolkit.register_tool(loud)
    agent.call_sync("hi", RuntimeContext(session_id="t"))
    assert [results(model, i)[0].text for i in (1, 3)] == ["1", "2!"]
    assert model.calls[2].tools[0]["description"] == "Echo a number, loudly."
