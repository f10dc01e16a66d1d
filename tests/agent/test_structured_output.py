"""Structured output (issue 15, item 5; Java's ``call(msgs, StructuredModel.class)``):
``structured_model=`` on ``call``, ``call_sync``, ``acall`` and ``stream`` ends the reply
with a validated pydantic instance, through a response tool or a native schema."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Sequence
from typing import Any

import pydantic
import pytest
from conftest import add_toolkit, call_add, make_agent, of_type, run_stream, tool_results

from rx_agent import (
    AgentResultEvent,
    GenerateOptions,
    GenerateReason,
    Msg,
    PermissionRule,
    RuntimeContext,
    ScriptedModel,
    StructuredOutputError,
    TextBlock,
    ThinkingBlock,
    Toolkit,
    ToolResultState,
    ToolUseBlock,
    tool,
)
from rx_agent.agent._structured import MAX_ATTEMPTS, RESPONSE_TOOL


class Weather(pydantic.BaseModel):
    """The weather in one city."""

    city: str
    celsius: float
    sunny: bool = False


def respond(call_id: str = "r1", **args: Any) -> ToolUseBlock:
    return ToolUseBlock(call_id, RESPONSE_TOOL, args)


GOOD = {"city": "Paris", "celsius": 21.5, "sunny": True}


def test_the_reply_ends_with_the_validated_instance() -> None:
    model = ScriptedModel([[respond(**GOOD)]])
    agent = make_agent(model)
    msg = agent.call_sync("weather in Paris?", structured_model=Weather)
    assert msg.generate_reason is GenerateReason.STRUCTURED_OUTPUT
    assert msg.structured == Weather(city="Paris", celsius=21.5, sunny=True)
    assert msg.metadata == {"structured_output": GOOD}
    assert json.loads(msg.text) == GOOD
    # the model was offered the response tool with the model's schema
    offered = {t["name"]: t for t in model.calls[0].tools}
    params = offered[RESPONSE_TOOL]["parameters"]
    assert set(params["properties"]) == {"city", "celsius", "sunny"}
    assert params["required"] == ["city", "celsius"]
    assert "The weather in one city." in offered[RESPONSE_TOOL]["description"]


def test_the_context_keeps_the_call_its_result_and_the_final_message() -> None:
    model = ScriptedModel([[respond(**GOOD)]])
    agent = make_agent(model)
    events = run_stream(agent.stream("weather?", structured_model=Weather))
    state = next(e for e in events if isinstance(e, AgentResultEvent))
    assert state.result.structured.city == "Paris"
    model2 = ScriptedModel([[respond(**GOOD)]])
    agent2 = make_agent(model2)
    ctx2 = RuntimeContext(session_id="k")
    agent2.call_sync("weather?", ctx2, structured_model=Weather)
    context = ctx2.agent_state.context
    assert [m.role.value for m in context] == ["user", "assistant", "tool", "assistant"]
    assert tool_results(context)[0].output == "Response recorded."
    assert context[-1].generate_reason is GenerateReason.STRUCTURED_OUTPUT


def test_invalid_arguments_go_back_to_the_model_then_a_valid_one_ends_the_reply() -> None:
    model = ScriptedModel([[respond("r1", city="Paris")], [respond("r2", **GOOD)]])
    msg = make_agent(model).call_sync("weather?", structured_model=Weather)
    assert msg.structured.celsius == 21.5
    error = model.calls[1].messages[-1].content[0]
    assert error.state is ToolResultState.ERROR
    assert "celsius" in error.text and "Field required" in error.text
    assert RESPONSE_TOOL in error.text


def test_too_many_bad_answers_fail_clearly_with_every_call_answered() -> None:
    model = ScriptedModel([[respond(f"r{i}", city="x")] for i in range(MAX_ATTEMPTS)])
    ctx = RuntimeContext(session_id="bad")
    with pytest.raises(StructuredOutputError, match=f"no valid Weather in {MAX_ATTEMPTS}"):
        make_agent(model).call_sync("weather?", ctx, structured_model=Weather)
    context = ctx.agent_state.context
    calls = {b.id for m in context for b in m.tool_calls}
    answered = {r.id for r in tool_results(context)}
    assert calls == answered == {f"r{i}" for i in range(MAX_ATTEMPTS)}


def test_a_text_answer_gets_a_reminder_then_the_tool_call_ends_the_reply() -> None:
    model = ScriptedModel(["It is sunny and 21.5 degrees.", [respond(**GOOD)]])
    msg = make_agent(model).call_sync("weather?", structured_model=Weather)
    assert msg.structured.sunny is True
    reminder = model.calls[1].messages[-1]
    assert RESPONSE_TOOL in reminder.content[0].hint


def test_other_tools_run_first_and_the_response_can_follow() -> None:
    model = ScriptedModel([[call_add(a=20, b=1)], [respond(**GOOD)]])
    agent = make_agent(model, toolkit=add_toolkit())
    msg = agent.call_sync("weather?", structured_model=Weather)
    assert msg.structured == Weather(**GOOD)
    assert model.calls[1].messages[-1].content[0].output == "21"


def test_permission_rules_do_not_apply_to_the_response_tool() -> None:
    model = ScriptedModel([[respond(**GOOD)]])
    agent = make_agent(model, permission_rules=[PermissionRule("*", "ask")])
    msg = agent.call_sync("weather?", structured_model=Weather)
    assert msg.generate_reason is GenerateReason.STRUCTURED_OUTPUT


def test_calls_without_structured_model_are_unchanged() -> None:
    model = ScriptedModel(["plain"])
    msg = make_agent(model, toolkit=add_toolkit()).call_sync("hi")
    assert msg.structured is None and msg.generate_reason is GenerateReason.MODEL_STOP
    assert [t["name"] for t in model.calls[0].tools] == ["add"]


def test_acall_stream_and_astream_take_it_too() -> None:
    async def main() -> tuple[Msg, list[Any]]:
        agent = make_agent(ScriptedModel([[respond(**GOOD)], [respond(**GOOD)]]))
        msg = await agent.acall("w?", structured_model=Weather)
        events = [e async for e in agent.astream("w?", structured_model=Weather)]
        return msg, events

    msg, events = asyncio.run(main())
    assert msg.structured.city == "Paris"
    assert of_type(events, AgentResultEvent)[0].result.structured.city == "Paris"
    observed = run_stream(make_agent(ScriptedModel([[respond(**GOOD)]]))
                          .call("w?", structured_model=Weather))
    assert observed[0].structured.city == "Paris"


@pytest.mark.parametrize("bad", [Weather(**GOOD), dict, "Weather", 3])
def test_a_bad_structured_model_is_refused_at_the_call(bad: Any) -> None:
    agent = make_agent(ScriptedModel([]))
    with pytest.raises(TypeError, match="pydantic BaseModel subclass"):
        agent.stream("hi", structured_model=bad)


def test_a_tool_named_like_the_response_tool_fails_clearly() -> None:
    @tool
    def generate_response(x: int) -> int:
        """Clash."""
        return x

    agent = make_agent(ScriptedModel([]), toolkit=Toolkit([generate_response]))
    with pytest.raises(ValueError, match="rename that tool"):
        agent.call_sync("hi", structured_model=Weather)


def test_concurrent_calls_keep_their_own_response_tool() -> None:
    class Other(pydantic.BaseModel):
        n: int

    agent_tools = add_toolkit()

    def run(i: int) -> Any:
        if i % 2:
            model = ScriptedModel([[respond(**GOOD)]])
            return make_agent(model, toolkit=agent_tools).call_sync(
                "w", structured_model=Weather).structured
        model = ScriptedModel([[respond(n=i)]])
        return make_agent(model, toolkit=agent_tools).call_sync(
            "n", structured_model=Other).structured

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        out = list(pool.map(run, range(8)))
    assert out[1] == Weather(**GOOD) and out[2] == Other(n=2)
    assert agent_tools.names == ["add"]  # the user's toolkit never changes


class NativeModel(ScriptedModel):
    """A scripted model that says it takes a response schema natively."""

    supports_response_schema = True

    def __init__(self, responses: Sequence[Any]) -> None:
        super().__init__(responses)
        self.options: list[GenerateOptions] = []

    def stream(self, messages: Any, tools: Any = (), options: Any = None) -> Any:
        self.options.append(options)
        return super().stream(messages, tools, options)


def test_native_mode_sends_the_schema_and_validates_the_text() -> None:
    model = NativeModel(["not json", "```json\n" + json.dumps(GOOD) + "\n```"])
    msg = make_agent(model).call_sync("w?", structured_model=Weather)
    assert msg.structured == Weather(**GOOD)
    schema = model.options[0].response_schema
    assert schema["name"] == "Weather" and "celsius" in schema["schema"]["properties"]
    assert RESPONSE_TOOL not in [t["name"] for t in model.calls[0].tools]
    hint = model.calls[1].messages[-1].content[0].hint
    assert "not a valid Weather" in hint and "not JSON" in hint


def test_native_mode_too_many_bad_texts_fail() -> None:
    model = NativeModel(['{"city": 1}'] * MAX_ATTEMPTS)
    with pytest.raises(StructuredOutputError):
        make_agent(model).call_sync("w?", structured_model=Weather)


def test_max_iters_without_a_response_fails_clearly() -> None:
    model = ScriptedModel([[call_add()], [call_add("c2")]])
    agent = make_agent(model, toolkit=add_toolkit(), max_iters=2)
    with pytest.raises(StructuredOutputError, match="max_iters=2"):
        agent.call_sync("w?", structured_model=Weather)


# -- issue 23 item 8, issue 24 item 6 ---------------------------------------------------


def test_arguments_that_are_not_json_count_as_bad_answers() -> None:
    # The model keeps answering with arguments that are not a JSON object: each round
    # is one bad answer, so the call fails after MAX_ATTEMPTS, not at max_iters.
    bad = [[ToolUseBlock(f"r{i}", RESPONSE_TOOL, {}, raw_input='{"city": "Paris", celsius')]
           for i in range(10)]
    model = ScriptedModel(bad)
    ctx = RuntimeContext(session_id="not-json")
    with pytest.raises(StructuredOutputError, match=f"no valid Weather in {MAX_ATTEMPTS}"):
        make_agent(model, max_iters=10).call_sync("weather?", ctx, structured_model=Weather)
    assert len(model.calls) == MAX_ATTEMPTS
    errors = tool_results(ctx.agent_state.context)
    assert len(errors) == MAX_ATTEMPTS
    assert all(r.state is ToolResultState.ERROR and "not a valid JSON object" in r.text
               for r in errors)


def test_a_round_with_two_bad_response_calls_counts_once() -> None:
    def twice(n: int) -> list[ToolUseBlock]:
        return [respond(f"a{n}", city="x"),
                ToolUseBlock(f"b{n}", RESPONSE_TOOL, {}, raw_input="nope")]

    # Two bad rounds (four bad calls) stay under MAX_ATTEMPTS answers.
    model = ScriptedModel([twice(1), twice(2), [respond("r3", **GOOD)]])
    msg = make_agent(model).call_sync("weather?", structured_model=Weather)
    assert msg.structured == Weather(**GOOD)


def test_the_final_message_keeps_the_answering_calls_usage_and_thinking() -> None:
    # AgentScope Java keeps the answering model call's ChatUsage and its thinking on
    # the structured result.
    model = ScriptedModel([[ThinkingBlock("Paris is mild in June."), respond(**GOOD)]])
    ctx = RuntimeContext(session_id="usage")
    msg = make_agent(model).call_sync("weather?", ctx, structured_model=Weather)
    answering = ctx.agent_state.context[1]
    assert answering.tool_calls and answering.usage is not None
    assert msg.usage == answering.usage and msg.usage.output_tokens > 0
    assert [type(b) for b in msg.content] == [ThinkingBlock, TextBlock]
    assert msg.thinking == "Paris is mild in June."
    assert json.loads(msg.text) == GOOD
    assert ctx.agent_state.context[-1] is msg


def test_native_mode_keeps_the_answers_usage_and_thinking() -> None:
    model = NativeModel([[ThinkingBlock("JSON it is."), json.dumps(GOOD)]])
    msg = make_agent(model).call_sync("w?", structured_model=Weather)
    assert msg.usage is not None and msg.usage.output_tokens > 0
    assert msg.thinking == "JSON it is." and json.loads(msg.text) == GOOD
