"""Other clients of the OpenAI-compatible routes: LangChain's ``ChatOpenAI`` and
rx_agent's own ``OpenAIChatModel`` (thinking round-trips); and what happens around a
call (a client that leaves, a call that fails mid-stream, a busy session)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import openai
import pytest

from rx_agent import (
    InMemorySessionStore,
    OpenAIChatModel,
    ReActAgent,
    ScriptedModel,
    SessionKey,
    ThinkingBlock,
    ToolUseBlock,
)
from rx_agent.message import Msg
from rx_agent.model import AsyncChatModel, ModelChunk, TextChunk, ToolCallChunk
from rx_agent.options import GenerateOptions
from rx_agent.serve import create_app

from .conftest import SlowModel

langchain_openai = pytest.importorskip(
    "langchain_openai", reason="LangChain's ChatOpenAI: pip install -e '.[test]'")
messages = pytest.importorskip("langchain_core.messages")


def _show_map(city: str) -> str:
    """Show a city on the user's screen.

    Args:
        city: The city.
    """
    return "shown"


def _chat(server: Any, **kwargs: Any) -> Any:
    return langchain_openai.ChatOpenAI(model="bot", base_url=server.url + "/v1",
                                       api_key="unused", max_retries=0, **kwargs)


def test_langchain_chat_openai_invokes_streams_and_runs_a_tool_round(live: Any) -> None:
    model = ScriptedModel([
        "Hello from the agent.",
        ["Str", "eamed."],
        [ToolUseBlock(id="m1", name="_show_map", input={"city": "Lyon"})],
        "The map of Lyon is up.",
    ])
    server = live(create_app(ReActAgent(name="bot", model=model)))
    chat = _chat(server)
    assert chat.invoke("hi").content == "Hello from the agent."
    pieces = list(_chat(server, stream_usage=True).stream("again"))
    assert "".join(str(p.content) for p in pieces) == "Streamed."
    usage = [p.usage_metadata for p in pieces if p.usage_metadata]
    assert usage and usage[-1]["output_tokens"] > 0

    with_tools = chat.bind_tools([_show_map])
    history: list[Any] = [messages.HumanMessage("show me Lyon")]
    asked = with_tools.invoke(history)
    assert [(c["id"], c["name"], c["args"]) for c in asked.tool_calls] == [
        ("m1", "_show_map", {"city": "Lyon"})]
    assert [t["name"] for t in model.calls[2].tools] == ["_show_map"]
    history += [asked, messages.ToolMessage("shown", tool_call_id="m1")]
    assert with_tools.invoke(history).content == "The map of Lyon is up."


def test_rx_agents_openai_model_pointed_at_a_served_agent_round_trips_thinking(
        live: Any) -> None:
    inner = ScriptedModel([[ThinkingBlock("First, "), ThinkingBlock("the facts."), "Answer."],
                           [ThinkingBlock("Streaming off."), "Second."]])
    server = live(create_app(ReActAgent(name="bot", model=inner)))
    outer = ReActAgent(name="front", model=OpenAIChatModel("bot", base_url=server.url + "/v1",
                                                           api_key="unused"))
    events = outer.stream("question").pipe(_to_list()).run()
    thinking = [e.delta for e in events if e.type == "thinking_block_delta"]  # type: ignore[attr-defined]
    assert "".join(thinking) == "First, the facts."
    result = next(e.result for e in events if e.type == "agent_result")  # type: ignore[attr-defined]
    assert result.text == "Answer."
    assert [b.thinking for b in result.content if isinstance(b, ThinkingBlock)] == [
        "First, the facts."]

    plain = ReActAgent(name="front2", model=OpenAIChatModel(
        "bot", base_url=server.url + "/v1", api_key="unused", stream=False))
    msg = plain.call_sync("again")
    assert msg.text == "Second."
    assert [b.thinking for b in msg.content if isinstance(b, ThinkingBlock)] == [
        "Streaming off."]


def _to_list() -> Any:
    import reactivex.operators as ops

    return ops.to_list()


def test_a_client_that_leaves_mid_stream_disposes_the_call_and_its_temporary_session(
        live: Any) -> None:
    slow = SlowModel(["a", "b", "c", "d", "e", "f"], delay=0.5)
    store = InMemorySessionStore()
    server = live(create_app(ReActAgent(name="bot", model=slow, session_store=store)))
    with httpx.stream("POST", server.url + "/v1/chat/completions", json={
            "model": "bot", "stream": True,
            "messages": [{"role": "user", "content": "talk"}]}) as resp:
        session = resp.headers["x-session-id"]
        assert session.startswith("openai-")
        for line in resp.iter_lines():
            if '"content":"a"' in line:
                break  # the first text delta arrived: hang up
    assert slow.closed.wait(2), "the model stream was not closed after the disconnect"
    assert slow.cancelled.is_set() and slow.sent < len(slow.chunks)
    deadline = time.monotonic() + 5
    while store.load(SessionKey("__anon__", session)) is not None:
        assert time.monotonic() < deadline, "the temporary session was not deleted"
        time.sleep(0.05)
    metrics = httpx.get(server.url + "/metrics").text
    assert 'rx_agent_serve_calls_total{kind="openai",outcome="disconnected"} 1' in metrics


def test_a_call_failing_mid_stream_ends_with_an_openai_error_chunk(live: Any) -> None:
    model = ScriptedModel([["Partial ", RuntimeError("the model broke")]])
    server = live(create_app(ReActAgent(name="bot", model=model, max_retries=1)))
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    stream = oai.chat.completions.create(model="bot", stream=True,
                                         messages=[{"role": "user", "content": "go"}])
    got: list[str] = []
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            got += [chunk.choices[0].delta.content or ""] if chunk.choices else []
    assert "".join(got) == "Partial "
    assert info.value.body["type"] == "server_error"  # type: ignore[index]
    assert "RuntimeError" in info.value.message


def test_a_busy_session_is_a_409_in_openai_shape(live: Any) -> None:
    gate = threading.Event()
    slow = SlowModel(["a", "b"], delay=0.01, gate=gate)
    server = live(create_app(ReActAgent(name="bot", model=slow)))
    body = {"model": "bot", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    header = {"X-Session-Id": "busy"}
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body,
                      headers=header) as first:
        assert first.status_code == 200
        assert slow.started.wait(5)
        second = httpx.post(server.url + "/v1/chat/completions", headers=header,
                            json={**body, "stream": False})
        gate.set()
        text = "".join(
            json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
            for line in first.iter_lines()
            if line.startswith("data: {") and '"choices":[{' in line)
    assert text == "ab"
    assert second.status_code == 409 and second.headers["retry-after"] == "1"
    error = second.json()["error"]
    assert error["code"] == "session_busy" and error["type"] == "invalid_request_error"
    assert "session 'busy' is running a call" in error["message"]


class _GatedModel(AsyncChatModel):
    """Call 1 asks for show_map; call 2 waits for ``gate`` before answering."""

    name = "gated"
    provider = "test"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.waiting = threading.Event()
        self.calls = 0

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        self.calls += 1
        if self.calls == 1:
            yield ToolCallChunk(0, "m1", "show_map", '{"city": "Bern"}', done=True)
            return
        self.waiting.set()
        while not self.gate.is_set():
            await asyncio.sleep(0.01)
        yield TextChunk("Bern is on the map.")


def test_a_second_answer_to_a_stateless_pause_that_is_resuming_is_refused_at_once(
        live: Any) -> None:
    model = _GatedModel()
    server = live(create_app(ReActAgent(name="bot", model=model)))
    tools = [{"type": "function", "function": {"name": "show_map", "parameters": {}}}]
    ask: list[Any] = [{"role": "user", "content": "Bern"}]
    paused = openai.OpenAI(base_url=server.url + "/v1", api_key="k").chat.completions.create(
        model="bot", messages=ask, tools=tools)
    answer = {"model": "bot", "tools": tools, "messages": [
        *ask, paused.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "m1", "content": "shown"}]}
    with httpx.stream("POST", server.url + "/v1/chat/completions",
                      json={**answer, "stream": True}) as first:
        assert model.waiting.wait(5)
        second = httpx.post(server.url + "/v1/chat/completions", json=answer, timeout=5)
        assert second.status_code == 409 and second.json()["error"]["code"] == "session_busy"
        model.gate.set()
        text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                       for line in first.iter_lines()
                       if line.startswith("data: {") and '"choices":[{' in line)
    assert text == "Bern is on the map."
    deadline = time.monotonic() + 5
    while httpx.get(server.url + "/v1/sessions").json()["sessions"]:
        assert time.monotonic() < deadline, "the resumed pause was not deleted"
        time.sleep(0.05)
