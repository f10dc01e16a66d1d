"""A ReActAgent driving OpenAIChatModel against the live local server, end to end."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from rx_agent import GenerateReason, ReActAgent, Toolkit, tool
from rx_agent.model import ModelAuthenticationError
from rx_agent.model.openai import OpenAIChatModel

from .openai_server import OpenAIServer, Reply, reasoning, text, tool_call


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.fixture
async def agent(openai_server: OpenAIServer) -> AsyncIterator[ReActAgent]:
    model = OpenAIChatModel("test-model", base_url=openai_server.url, api_key="sk-test")
    toolkit = Toolkit()
    toolkit.register_tool(get_weather)
    try:
        yield ReActAgent(
            name="a",
            sys_prompt="You are helpful.",
            model=model,
            toolkit=toolkit,
            retry_backoff=(0.0, 0.0),
        )
    finally:
        await model.aclose()


async def test_tool_round_then_answer(openai_server: OpenAIServer, agent: ReActAgent) -> None:
    openai_server.script(
        Reply(
            [
                reasoning("Need the weather."),
                tool_call(0, id="call_1", name="get_weather", arguments='{"ci'),
                tool_call(0, arguments='ty": "Oslo"}'),
            ],
            finish_reason="tool_calls",
        ),
        Reply([text("It is "), text("sunny in Oslo.")]),
    )
    result = await agent.acall("Weather in Oslo?")
    assert result.text == "It is sunny in Oslo."
    assert result.generate_reason is GenerateReason.MODEL_STOP

    first, second = (r.body for r in openai_server.requests)
    assert first["messages"] == [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Weather in Oslo?"},
    ]
    (schema,) = first["tools"]
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "get_weather"
    assert schema["function"]["parameters"]["properties"]["city"]["type"] == "string"
    # The second call carries the assistant's call (its reasoning dropped) and the result.
    assistant, tool_message = second["messages"][2:4]
    assert assistant["role"] == "assistant"
    (call,) = assistant["tool_calls"]
    assert call["id"] == "call_1"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == "call_1"
    assert "sunny in Oslo" in tool_message["content"]


async def test_runtime_retries_a_server_error(
    openai_server: OpenAIServer, agent: ReActAgent
) -> None:
    openai_server.script(
        Reply(status=503, headers={"Retry-After": "0"}), Reply([text("recovered")])
    )
    result = await agent.acall("hi")
    assert result.text == "recovered"
    assert len(openai_server.requests) == 2


async def test_authentication_errors_are_not_retried(
    openai_server: OpenAIServer, agent: ReActAgent
) -> None:
    openai_server.script(Reply(status=401, error={"message": "bad key"}), Reply([text("no")]))
    with pytest.raises(ModelAuthenticationError, match="bad key"):
        await agent.acall("hi")
    assert len(openai_server.requests) == 1


async def test_structured_output_through_the_response_tool(openai_server: OpenAIServer) -> None:
    import pydantic

    class City(pydantic.BaseModel):
        name: str
        population: int

    openai_server.script(
        Reply([tool_call(0, id="r1", name="generate_response",
                         arguments='{"name": "Oslo", "population": 709000}')],
              finish_reason="tool_calls"),
    )
    model = OpenAIChatModel("test-model", base_url=openai_server.url, api_key="sk-test")
    try:
        agent = ReActAgent(name="a", model=model, retry_backoff=(0.0, 0.0))
        msg = await agent.acall("Tell me about Oslo", structured_model=City)
    finally:
        await model.aclose()
    assert msg.structured == City(name="Oslo", population=709000)
    assert msg.generate_reason is GenerateReason.STRUCTURED_OUTPUT
    body = openai_server.requests[0].body
    assert "response_format" not in body
    (wire,) = body["tools"]
    assert wire["function"]["name"] == "generate_response"
    assert set(wire["function"]["parameters"]["properties"]) == {"name", "population"}


async def test_structured_output_as_a_native_json_schema(openai_server: OpenAIServer) -> None:
    import pydantic

    class City(pydantic.BaseModel):
        name: str
        population: int

    openai_server.script(Reply([text('{"name": "Oslo", '), text('"population": 709000}')]))
    model = OpenAIChatModel("test-model", base_url=openai_server.url, api_key="sk-test",
                            structured_output="json_schema")
    try:
        agent = ReActAgent(name="a", model=model, retry_backoff=(0.0, 0.0))
        msg = await agent.acall("Tell me about Oslo", structured_model=City)
    finally:
        await model.aclose()
    assert msg.structured == City(name="Oslo", population=709000)
    body = openai_server.requests[0].body
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "City"
    assert set(fmt["json_schema"]["schema"]["properties"]) == {"name", "population"}
    assert "tools" not in body
    with pytest.raises(ValueError, match="structured_output"):
        OpenAIChatModel("m", base_url=openai_server.url, structured_output="native")
