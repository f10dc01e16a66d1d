"""A caller's own tools for one call (``ctx.put(CallerTools, ...)``): the model sees
them, a call to one pauses the reply as an external execution, the next call answers
it, and the agent's toolkit never changes."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex.operators as ops
from pydantic import BaseModel

from rx_agent import (
    ExternalExecutionResultEvent,
    GenerateReason,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultBlock,
    ToolUseBlock,
    tool,
)
from rx_agent.event import AgentEvent, RequireExternalExecutionEvent
from rx_agent.tool._caller import CallerTools

SHOW_MAP = {"name": "show_map", "description": "Show a city on the user's screen.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _events(agent: ReActAgent, inp: Any, ctx: RuntimeContext) -> list[AgentEvent]:
    return agent.stream(inp, ctx).pipe(ops.to_list()).run()


def _ctx(session: str, *schemas: dict[str, Any]) -> RuntimeContext:
    ctx = RuntimeContext(session_id=session)
    ctx.put(CallerTools, CallerTools(schemas))
    return ctx


def test_a_caller_tool_pauses_the_reply_and_its_result_resumes_it() -> None:
    model = ScriptedModel([
        [ToolUseBlock(id="w1", name="get_weather", input={"city": "Paris"}),
         ToolUseBlock(id="m1", name="show_map", input={"city": "Paris"})],
        "It is sunny in Paris; the map is on your screen.",
    ])
    agent = ReActAgent(name="a", model=model, toolkit=Toolkit([get_weather]))
    events = _events(agent, "weather and map of Paris", _ctx("s", SHOW_MAP))
    # The model was offered the agent's tool and the caller's.
    assert [t["name"] for t in model.calls[0].tools] == ["get_weather", "show_map"]
    pause = [e for e in events if isinstance(e, RequireExternalExecutionEvent)]
    assert [[c.name for c in p.tool_calls] for p in pause] == [["show_map"]]
    result = events[-2].result  # type: ignore[attr-defined]
    assert result.generate_reason is GenerateReason.TOOL_SUSPENDED
    # The agent's own tool ran on the server.
    assert any(getattr(e, "tool_call_name", None) == "get_weather"
               and e.type == "tool_result_end" for e in events)

    answer = ExternalExecutionResultEvent(reply_id=pause[0].reply_id, tool_results=[
        ToolResultBlock(id="m1", name="show_map", output="shown")])
    final = _events(agent, answer, _ctx("s", SHOW_MAP))[-2].result  # type: ignore[attr-defined]
    assert final.text == "It is sunny in Paris; the map is on your screen."
    assert [t["name"] for t in model.calls[1].tools] == ["get_weather", "show_map"]
    assert agent.toolkit.names == ["get_weather"]  # the agent's toolkit is unchanged


def test_without_caller_tools_a_later_call_does_not_offer_them() -> None:
    model = ScriptedModel(["one", "two"])
    agent = ReActAgent(name="a", model=model)
    _events(agent, "hi", _ctx("s", SHOW_MAP))
    _events(agent, "again", RuntimeContext(session_id="s"))
    assert [[t["name"] for t in c.tools] for c in model.calls] == [["show_map"], []]


def test_caller_tools_join_a_structured_output_call() -> None:
    class Answer(BaseModel):
        city: str

    model = ScriptedModel([[ToolUseBlock(id="r", name="generate_response",
                                         input={"city": "Paris"})]])
    agent = ReActAgent(name="a", model=model)
    msg = agent.call_sync("which city?", _ctx("s", SHOW_MAP), structured_model=Answer)
    assert msg.structured == Answer(city="Paris")
    assert sorted(t["name"] for t in model.calls[0].tools) == ["generate_response",
                                                               "show_map"]


def test_a_caller_tool_named_like_an_agent_tool_fails_the_call_with_a_clear_error() -> None:
    agent = ReActAgent(name="a", model=ScriptedModel(["never"]),
                       toolkit=Toolkit([get_weather]))
    clash = {**SHOW_MAP, "name": "get_weather"}
    with pytest.raises(ValueError, match="'get_weather' have the name of one of the agent"):
        _events(agent, "hi", _ctx("s", clash))


def test_caller_tools_refuse_bad_and_duplicate_names() -> None:
    with pytest.raises(ValueError, match="tool name 'no spaces' is invalid"):
        CallerTools([{**SHOW_MAP, "name": "no spaces"}])
    with pytest.raises(ValueError, match="name 'show_map' twice"):
        CallerTools([SHOW_MAP, SHOW_MAP])
