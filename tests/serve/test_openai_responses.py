"""``POST /v1/responses`` (OpenAI's Responses API), driven by the official ``openai``
SDK against a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from rx_agent import (
    InMemorySessionStore,
    ReActAgent,
    ScriptedModel,
    SessionKey,
    ThinkingBlock,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.serve import create_app

from .conftest import EchoModel

SHOW_MAP = {"type": "function", "name": "show_map", "description": "Show a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def client(server: Any, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def sessions(server: Any, token: str | None = None) -> list[str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    found: list[str] = httpx.get(server.url + "/v1/sessions", headers=headers).json()[
        "sessions"]
    return found


def test_a_response_has_reasoning_and_message_items_usage_and_a_session(live: Any) -> None:
    model = ScriptedModel([[ThinkingBlock("Thinking."), "Hel", "lo."], "Forgotten."])
    store = InMemorySessionStore()
    server = live(create_app(ReActAgent(name="bot", model=model, session_store=store)))
    oai = client(server)
    response = oai.responses.create(model="bot", input="hi", instructions="Be brief.")
    assert response.status == "completed" and response.output_text == "Hello."
    assert [item.type for item in response.output] == ["reasoning", "message"]
    reasoning: Any = response.output[0]
    assert reasoning.content[0].text == "Thinking."
    assert response.usage is not None and response.usage.output_tokens > 0
    assert [(m.role.value, m.text) for m in model.calls[0].messages] == [
        ("system", "Be brief."), ("user", "hi")]
    # The response's session is kept (store defaults to true) and its id names it.
    session = response.id.partition(".")[2]
    assert sessions(server) == [session]
    assert store.load(SessionKey("__anon__", session)) is not None
    # store=false: nothing is kept.
    assert oai.responses.create(model="bot", input="x", store=False).output_text == \
        "Forgotten."
    assert sessions(server) == [session]
    with pytest.raises(openai.NotFoundError) as info:
        oai.responses.create(model="gpt-5", input="hi")
    assert info.value.code == "model_not_found"


def test_the_stream_is_response_events_in_order(live: Any) -> None:
    model = ScriptedModel([[ThinkingBlock("Hm."), "One ", "two."], ["Three."]])
    server = live(create_app(ReActAgent(name="bot", model=model)))
    oai = client(server)
    events = list(oai.responses.create(model="bot", input="count", stream=True))
    kinds = [e.type for e in events]
    assert kinds == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.reasoning_text.delta",
        "response.reasoning_text.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == \
        "One two."
    final: Any = events[-1]
    assert final.response.output_text == "One two."
    with oai.responses.stream(model="bot", input="more") as stream:
        for _ in stream:
            pass
        assert stream.get_final_response().output_text == "Three."


def test_previous_response_id_continues_the_session_and_is_per_user(live: Any) -> None:
    server = live(create_app(ReActAgent(name="bot", model=EchoModel()),
                             auth={"token-alice": "alice", "token-bob": "bob"}))
    alice, bob = client(server, "token-alice"), client(server, "token-bob")
    first = alice.responses.create(model="bot", input="one")
    assert first.output_text == "echo 1: one"
    second = alice.responses.create(model="bot", input="two", previous_response_id=first.id)
    assert second.output_text == "echo 3: two"
    assert second.previous_response_id == first.id
    # Bob cannot continue Alice's response: her session is not his.
    with pytest.raises(openai.NotFoundError) as info:
        bob.responses.create(model="bot", input="steal", previous_response_id=second.id)
    assert info.value.code == "previous_response_not_found"
    with pytest.raises(openai.NotFoundError):
        alice.responses.create(model="bot", input="x", previous_response_id="resp_nope")
    assert sessions(server, "token-bob") == []


def test_a_function_call_round_with_previous_response_id(live: Any) -> None:
    model = ScriptedModel([
        [ToolUseBlock(id="w1", name="get_weather", input={"city": "Rome"}),
         ToolUseBlock(id="m1", name="show_map", input={"city": "Rome"})],
        "Sunny; the map is up."])
    server = live(create_app(ReActAgent(name="bot", model=model,
                                        toolkit=Toolkit([get_weather]))))
    oai = client(server)
    first = oai.responses.create(model="bot", input="Rome?", tools=[SHOW_MAP], store=False)
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [  # type: ignore[union-attr]
        ("m1", "show_map", {"city": "Rome"})]
    assert len(sessions(server)) == 1  # kept for the function call's output
    final = oai.responses.create(model="bot", tools=[SHOW_MAP], previous_response_id=first.id,
                                 store=False, input=[{"type": "function_call_output",
                                                      "call_id": "m1", "output": "shown"}])
    assert final.output_text == "Sunny; the map is up."
    seen = [getattr(b, "output", None) for m in model.calls[1].messages for b in m.content]
    assert "sunny in Rome" in seen and "shown" in seen  # the server's tool result is kept
    assert sessions(server) == []


def test_without_a_previous_response_the_input_items_are_the_context(live: Any) -> None:
    model = ScriptedModel(["Done."])
    server = live(create_app(ReActAgent(name="bot", model=model)))
    answer = client(server).responses.create(model="bot", store=False, input=[
        {"role": "user", "content": [{"type": "input_text", "text": "map of Oslo"}]},
        {"type": "function_call", "call_id": "c9", "name": "show_map",
         "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "c9", "output": "shown"}])
    assert answer.output_text == "Done."
    replayed = model.calls[0].messages
    assert [m.role.value for m in replayed] == ["user", "assistant", "tool"]
    assert replayed[1].tool_calls[0].input == {"city": "Oslo"}
    assert replayed[2].tool_results[0].name == "show_map"


async def test_the_async_client(live: Any) -> None:
    server = live(create_app(ReActAgent(name="bot", model=ScriptedModel(["Async."]))))
    oai = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    assert (await oai.responses.create(model="bot", input="hi")).output_text == "Async."
    await oai.close()


def test_bad_response_requests_get_openai_errors(live: Any) -> None:
    server = live(create_app(ReActAgent(name="bot", model=EchoModel(),
                                        toolkit=Toolkit([get_weather]))))
    cases: list[tuple[Any, str, str]] = [
        ({"input": "x"}, "invalid_request", '"model"'),
        ({"model": "bot", "input": []}, "invalid_request", '"input" must be a string'),
        ({"model": "bot", "input": "x", "frobnicate": 1}, "unknown_parameter", "'frobnicate'"),
        ({"model": "bot", "input": "x", "text": {"format": {"type": "json_object"}}},
         "unsupported_parameter", "text.format="),
        ({"model": "bot", "input": "x", "tools": [{"type": "web_search"}]},
         "unsupported_parameter", 'type "web_search"; only function tools'),
        ({"model": "bot", "input": "x", "tools": [{**SHOW_MAP, "name": "get_weather"}]},
         "tool_name_taken", "'get_weather' are the agent's own"),
        ({"model": "bot", "input": [{"type": "item_reference", "id": "x"}]},
         "invalid_request", 'type "item_reference"'),
        ({"model": "bot", "input": "x", "background": True}, "unsupported_parameter",
         "background"),
    ]
    for body, code, message in cases:
        resp = httpx.post(server.url + "/v1/responses", json=body)
        error = resp.json()["error"]
        assert resp.status_code == 400 and error["code"] == code, (body, error)
        assert message in error["message"], (body, error)
    doc = httpx.get(server.url + "/openapi.json").json()
    post = doc["paths"]["/v1/responses"]["post"]
    assert [p["name"] for p in post["parameters"] if p["in"] == "header"] == ["X-Session-Id"]
