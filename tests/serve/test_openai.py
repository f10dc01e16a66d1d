"""The OpenAI-compatible routes, driven by the official ``openai`` SDK (sync, async,
streaming, a client tool round) against a real uvicorn on 127.0.0.1."""

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

SHOW_MAP = {"type": "function", "function": {
    "name": "show_map", "description": "Show a city on the user's screen.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def client(server: Any, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def sessions(server: Any, token: str | None = None) -> list[str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    listed: list[str] = httpx.get(server.url + "/v1/sessions", headers=headers).json()[
        "sessions"]
    return listed


def test_models_list_the_agent_and_an_unknown_model_is_a_404(live: Any) -> None:
    server = live(create_app(ReActAgent(name="bot", model=EchoModel())))
    oai = client(server)
    assert [m.id for m in oai.models.list()] == ["bot"]
    assert oai.models.retrieve("bot").owned_by == "rx_agent"
    with pytest.raises(openai.NotFoundError) as info:
        oai.models.retrieve("gpt-4o")
    assert info.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError) as info:
        oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    body: Any = info.value.body
    assert body["code"] == "model_not_found" and body["param"] == "model"
    assert body["type"] == "invalid_request_error"
    assert "this server serves the agent 'bot'" in body["message"]


def test_a_completion_carries_text_thinking_usage_and_the_stop_reason(live: Any) -> None:
    model = ScriptedModel([[ThinkingBlock("Let me think."), "Hel", "lo."]])
    server = live(create_app(ReActAgent(name="bot", model=model)))
    answer = client(server).chat.completions.create(
        model="bot", messages=[{"role": "system", "content": "Be brief."},
                               {"role": "user", "content": "hi"}])
    choice = answer.choices[0]
    assert choice.message.content == "Hello."
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    assert choice.message.reasoning_content == "Let me think."  # type: ignore[attr-defined]
    assert answer.object == "chat.completion" and answer.model == "bot"
    assert answer.id.startswith("chatcmpl-")
    assert answer.usage is not None and answer.usage.completion_tokens > 0
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + \
        answer.usage.completion_tokens
    # Stateless: the request's messages were the context, and nothing was kept.
    assert [(m.role.value, m.text) for m in model.calls[0].messages] == [
        ("system", "Be brief."), ("user", "hi")]
    assert sessions(server) == []


def test_streaming_sends_deltas_thinking_a_finish_chunk_usage_and_done(live: Any) -> None:
    model = ScriptedModel([[ThinkingBlock("Hmm."), "Hel", "lo."], ["Again."]])
    server = live(create_app(ReActAgent(name="bot", model=model)))
    oai = client(server)
    chunks = list(oai.chat.completions.create(
        model="bot", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True}))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    assert [d.content for d in deltas if d.content] == ["Hel", "lo."]
    assert [d.reasoning_content for d in deltas  # type: ignore[attr-defined]
            if getattr(d, "reasoning_content", None)] == ["Hmm."]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0
    assert len({c.id for c in chunks}) == 1

    # Without include_usage no usage chunk; the raw stream ends with [DONE].
    with httpx.stream("POST", server.url + "/v1/chat/completions", json={
            "model": "bot", "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in resp.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    payloads = [json.loads(line[6:]) for line in lines[:-1]]
    assert all(p["object"] == "chat.completion.chunk" and p["choices"] for p in payloads)
    assert "".join(p["choices"][0]["delta"].get("content") or "" for p in payloads) == "Again."


async def test_the_async_client_streams_and_completes(live: Any) -> None:
    model = ScriptedModel([["One ", "two."], "Three."])
    server = live(create_app(ReActAgent(name="bot", model=model)))
    oai = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    stream = await oai.chat.completions.create(
        model="bot", messages=[{"role": "user", "content": "count"}], stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "One two."
    answer = await oai.chat.completions.create(
        model="bot", messages=[{"role": "user", "content": "more"}])
    assert answer.choices[0].message.content == "Three."
    await oai.close()


def test_text_of_several_model_calls_is_joined_with_a_blank_line_in_both_forms(
        live: Any) -> None:
    def script() -> ScriptedModel:
        return ScriptedModel([
            ["Let me look.", ToolUseBlock(id="w", name="get_weather", input={"city": "Oslo"})],
            "Sunny in Oslo."])
    streamed_model, plain_model = script(), script()
    streamed = live(create_app(ReActAgent(name="bot", model=streamed_model,
                                          toolkit=Toolkit([get_weather]))))
    plain = live(create_app(ReActAgent(name="bot", model=plain_model,
                                       toolkit=Toolkit([get_weather]))))
    ask = [{"role": "user", "content": "weather in Oslo?"}]
    chunks = list(client(streamed).chat.completions.create(model="bot", messages=ask,
                                                           stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    answer = client(plain).chat.completions.create(model="bot", messages=ask)
    assert text == answer.choices[0].message.content == "Let me look.\n\nSunny in Oslo."
    # The agent's own tool ran on the server and is never a tool call for the client.
    assert all(c.choices[0].delta.tool_calls is None for c in chunks if c.choices)
    assert answer.choices[0].message.tool_calls is None


def _tool_round_model() -> ScriptedModel:
    return ScriptedModel([
        [ToolUseBlock(id="w1", name="get_weather", input={"city": "Paris"}),
         ToolUseBlock(id="m1", name="show_map", input={"city": "Paris"})],
        "Sunny; the map is up.",
    ])


def test_a_stateless_client_tool_round_pauses_and_resumes_with_the_server_state(
        live: Any) -> None:
    model = _tool_round_model()
    server = live(create_app(ReActAgent(name="bot", model=model,
                                        toolkit=Toolkit([get_weather]))))
    oai = client(server)
    ask: list[Any] = [{"role": "user", "content": "Weather and a map of Paris"}]
    first = oai.chat.completions.create(model="bot", messages=ask, tools=[SHOW_MAP])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None and [(c.id, c.function.name) for c in calls] == [("m1", "show_map")]
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}  # type: ignore[union-attr]
    assert [t["name"] for t in model.calls[0].tools] == ["get_weather", "show_map"]
    assert len(sessions(server)) == 1  # the pause, kept for the tool results

    second = oai.chat.completions.create(model="bot", tools=[SHOW_MAP], messages=[
        *ask, choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "m1", "content": "map shown"}])
    assert second.choices[0].message.content == "Sunny; the map is up."
    assert second.choices[0].finish_reason == "stop"
    # The paused reply resumed: the server's own tool result is still in the context.
    seen = [(m.role.value, [getattr(b, "output", None) for b in m.content])
            for m in model.calls[1].messages]
    assert ("tool", ["sunny in Paris"]) in seen and ("tool", ["map shown"]) in seen
    assert sessions(server) == []


def test_streamed_tool_calls_and_a_replayed_history_when_no_pause_is_stored(
        live: Any) -> None:
    model = ScriptedModel([[ToolUseBlock(id="m1", name="show_map", input={"city": "Rome"})],
                           "Here is Rome."])
    server = live(create_app(ReActAgent(name="bot", model=model)))
    oai = client(server)
    chunks = list(oai.chat.completions.create(
        model="bot", messages=[{"role": "user", "content": "map of Rome"}], tools=[SHOW_MAP],
        stream=True))
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or ()]
    assert [(tc.index, tc.id, tc.function.name) for tc in calls  # type: ignore[union-attr]
            ] == [(0, "m1", "show_map")]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    # The client answers with ids the server never paused on: the history is replayed.
    history: list[Any] = [
        {"role": "user", "content": "map of Rome"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "other", "type": "function",
            "function": {"name": "show_map", "arguments": '{"city": "Rome"}'}}]},
        {"role": "tool", "tool_call_id": "other", "content": "shown"}]
    answer = oai.chat.completions.create(model="bot", messages=history, tools=[SHOW_MAP])
    assert answer.choices[0].message.content == "Here is Rome."
    replayed = model.calls[1].messages
    assert [m.role.value for m in replayed] == ["user", "assistant", "tool"]
    assert replayed[1].tool_calls[0].id == "other" and replayed[2].tool_results[0].name == \
        "show_map"
    assert len(sessions(server)) == 1  # only the first call's unanswered pause


def test_with_a_session_header_only_new_messages_are_appended(live: Any) -> None:
    store = InMemorySessionStore()
    server = live(create_app(ReActAgent(name="bot", model=EchoModel(), session_store=store)))
    oai = client(server)
    header = {"X-Session-Id": "chat-1"}
    history: list[Any] = [{"role": "user", "content": "one"}]
    first = oai.chat.completions.with_raw_response.create(model="bot", messages=history,
                                                          extra_headers=header)
    assert first.headers["x-session-id"] == "chat-1"
    reply = first.parse().choices[0].message.content
    assert reply == "echo 1: one"
    # The client sends its whole history: the stored session gets only the new message.
    history += [{"role": "assistant", "content": reply}, {"role": "user", "content": "two"}]
    second = oai.chat.completions.create(model="bot", messages=history, extra_headers=header)
    assert second.choices[0].message.content == "echo 3: two"
    state = store.load(SessionKey("__anon__", "chat-1"))
    assert state is not None and [m.text for m in state.context] == [
        "one", "echo 1: one", "two", "echo 3: two"]
    assert sessions(server) == ["chat-1"]


def test_a_tool_round_on_a_stored_session(live: Any) -> None:
    model = _tool_round_model()
    store = InMemorySessionStore()
    server = live(create_app(ReActAgent(name="bot", model=model, session_store=store,
                                        toolkit=Toolkit([get_weather]))))
    oai = client(server)
    header = {"X-Session-Id": "trip"}
    first = oai.chat.completions.create(model="bot", tools=[SHOW_MAP], extra_headers=header,
                                        messages=[{"role": "user", "content": "Paris?"}])
    assert first.choices[0].finish_reason == "tool_calls"
    # Only the tool message: the session has the rest.
    second = oai.chat.completions.create(model="bot", tools=[SHOW_MAP], extra_headers=header,
                                         messages=[{"role": "tool", "tool_call_id": "m1",
                                                    "content": "shown"}])
    assert second.choices[0].message.content == "Sunny; the map is up."
    state = store.load(SessionKey("__anon__", "trip"))
    assert state is not None and state.pending is None
    assert [m.role.value for m in state.context] == ["user", "assistant", "tool", "tool",
                                                     "assistant"]
    # Tool results nobody waits for are refused in OpenAI's shape.
    with pytest.raises(openai.ConflictError) as info:
        oai.chat.completions.create(model="bot", extra_headers=header, messages=[
            {"role": "tool", "tool_call_id": "m1", "content": "again"}])
    assert info.value.code == "not_paused"
    assert "session 'trip' is not waiting for tool results" in info.value.message


def test_two_tokens_never_reach_each_others_sessions_or_pauses(live: Any) -> None:
    model = ScriptedModel([[ToolUseBlock(id="m1", name="show_map", input={"city": "Nice"})],
                           "replayed for bob", "alice resumed"])
    store = InMemorySessionStore()
    agent = ReActAgent(name="bot", model=model, session_store=store)
    server = live(create_app(agent, auth={"token-alice": "alice", "token-bob": "bob"}))
    alice, bob = client(server, "token-alice"), client(server, "token-bob")
    ask: list[Any] = [{"role": "user", "content": "map of Nice"}]
    paused = alice.chat.completions.create(model="bot", messages=ask, tools=[SHOW_MAP])
    answer: list[Any] = [*ask, paused.choices[0].message.model_dump(exclude_none=True),
                         {"role": "tool", "tool_call_id": "m1", "content": "shown"}]
    # Bob sends the same tool results: Alice's pause is not his, his history is replayed.
    assert bob.chat.completions.create(model="bot", messages=answer, tools=[SHOW_MAP]
                                       ).choices[0].message.content == "replayed for bob"
    assert len(sessions(server, "token-alice")) == 1 and sessions(server, "token-bob") == []
    assert alice.chat.completions.create(model="bot", messages=answer, tools=[SHOW_MAP]
                                         ).choices[0].message.content == "alice resumed"
    assert sessions(server, "token-alice") == []

    echo = live(create_app(ReActAgent(name="bot", model=EchoModel()),
                           auth={"token-alice": "alice", "token-bob": "bob"}))
    header = {"X-Session-Id": "shared-name"}
    for text in ("a1", "a2"):
        client(echo, "token-alice").chat.completions.create(
            model="bot", extra_headers=header, messages=[{"role": "user", "content": text}])
    bobs = client(echo, "token-bob").chat.completions.create(
        model="bot", extra_headers=header, messages=[{"role": "user", "content": "b1"}])
    assert bobs.choices[0].message.content == "echo 1: b1"  # a session of his own
    with pytest.raises(openai.AuthenticationError) as info:
        client(echo, "wrong").models.list()
    assert info.value.body["message"] == "the bearer token is not valid"  # type: ignore[index]
    assert info.value.body["type"] == "authentication_error"  # type: ignore[index]


def _error(server: Any, body: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    resp = httpx.post(server.url + "/v1/chat/completions", json=body, **kwargs)
    error: dict[str, Any] = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return resp.status_code, error


def test_bad_requests_get_openai_errors_that_name_the_problem(live: Any) -> None:
    server = live(create_app(ReActAgent(name="bot", model=EchoModel(),
                                        toolkit=Toolkit([get_weather])), max_body=2000))
    hi = [{"role": "user", "content": "hi"}]
    cases: list[tuple[Any, int, str, str]] = [
        ({"messages": hi}, 400, "invalid_request", '"model" (the agent\'s name'),
        ({"model": "bot", "messages": []}, 400, "invalid_request", "non-empty list"),
        ({"model": "bot", "messages": hi, "n": 2}, 400, "unsupported_parameter",
         "n=2 is not supported"),
        ({"model": "bot", "messages": hi, "logprobs": True}, 400, "unsupported_parameter",
         "logprobs=true"),
        ({"model": "bot", "messages": hi, "response_format": {"type": "json_object"}}, 400,
         "unsupported_parameter", "response_format="),
        ({"model": "bot", "messages": hi, "tool_choice": "required"}, 400,
         "unsupported_parameter", 'tool_choice="required" is not supported'),
        ({"model": "bot", "messages": hi, "functions": []}, 400, "unsupported_parameter",
         "'functions' is not supported"),
        ({"model": "bot", "messages": hi, "frobnicate": 1}, 400, "unknown_parameter",
         "unknown parameter(s) 'frobnicate'"),
        ({"model": "bot", "messages": [{"role": "robot", "content": "x"}]}, 400,
         "invalid_request", "messages[0].role must be"),
        ({"model": "bot", "messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
         400, "invalid_request", 'has type "input_audio"'),
        ({"model": "bot", "messages": [*hi, {"role": "assistant", "content": "ok"}]}, 400,
         "invalid_request", "the last message is the assistant's"),
        ({"model": "bot", "messages": hi, "tools": [{"type": "function", "function": {
            "name": "get_weather"}}]}, 400, "tool_name_taken", "'get_weather' are the agent's"),
        ({"model": "bot", "messages": hi, "tools": [{"type": "retrieval"}]}, 400,
         "invalid_request", "tools[0] must be"),
        ({"model": "bot", "messages": [{"role": "user", "content": "x" * 3000}]}, 413,
         "body_too_large", "the limit is 2000"),
    ]
    for body, status, code, message in cases:
        got_status, error = _error(server, body)
        assert (got_status, error["code"]) == (status, code), (body, error)
        assert message in error["message"], (body, error)
    resp = httpx.post(server.url + "/v1/chat/completions", content=b"{nope",
                      headers={"Content-Type": "application/json"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "bad_json"
    assert resp.json()["error"]["type"] == "invalid_request_error"
    status, error = _error(server, {"model": "bot", "messages": hi},
                           headers={"X-Session-Id": "no/slash"})
    assert (status, error["code"]) == (400, "bad_session_id")
    # Ignored parameters are accepted.
    ok = httpx.post(server.url + "/v1/chat/completions", json={
        "model": "bot", "messages": hi, "temperature": 0.2, "max_tokens": 5, "n": 1,
        "user": "someone", "tool_choice": "auto", "stream_options": None})
    assert ok.status_code == 200, ok.text


def test_openapi_lists_the_routes_and_the_session_header_and_they_can_be_switched_off(
        live: Any) -> None:
    agent = ReActAgent(name="bot", model=EchoModel())
    doc = httpx.get(live(create_app(agent)).url + "/openapi.json").json()
    post = doc["paths"]["/v1/chat/completions"]["post"]
    assert [p["name"] for p in post["parameters"] if p["in"] == "header"] == ["X-Session-Id"]
    assert {"/v1/models", "/v1/models/{model}"} <= set(doc["paths"])
    off = live(create_app(agent, openai=False))
    assert "/v1/chat/completions" not in httpx.get(off.url + "/openapi.json").json()["paths"]
    assert httpx.post(off.url + "/v1/chat/completions", json={}).status_code == 404
    assert httpx.get(off.url + "/v1/models").status_code == 404


def test_rx_agent_serve_no_openai_turns_the_routes_off(
        monkeypatch: pytest.MonkeyPatch, live: Any) -> None:
    import rx_agent.serve._cli as serve_cli
    from rx_agent.cli import main

    seen: list[Any] = []
    monkeypatch.setattr(serve_cli, "run", lambda config, no_auth=False: seen.append(config))
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parent.parent))
    assert main(["serve", "serve.served_agents:build_echo"]) == 0
    assert main(["serve", "serve.served_agents:build_echo", "--no-openai"]) == 0
    assert [c.openai for c in seen] == [True, False]
    on, off = (live(serve_cli.build_app(c)) for c in seen)
    body = {"model": "echo", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(on.url + "/v1/chat/completions", json=body).status_code == 200
    assert httpx.post(off.url + "/v1/chat/completions", json=body).status_code == 404


async def test_a_stateless_cleanup_waits_for_the_call_to_free_its_session() -> None:
    import asyncio

    from rx_agent.serve._openai_api import _free
    from rx_agent.session import SessionKey

    agent = ReActAgent(name="a", model=ScriptedModel(["x"]))
    key = SessionKey("u", "tmp")
    await asyncio.wait_for(_free(agent, key), 1)  # nobody holds it: at once
    run = object()
    assert agent._slots.try_acquire(key, run)
    waiting = asyncio.create_task(_free(agent, key))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # the disposed call still holds the session
    agent._slots.release(key, run)
    await asyncio.wait_for(waiting, 1)  # woken by the release
    assert agent._slots.active(key) is None  # and handed straight back
    assert agent._slots.try_acquire(key, run)
    await _free(agent, key, timeout=0.05)  # a holder that never lets go: it gives up
    assert agent._slots.active(key) is run
