"""AnthropicChatModel against a live local Messages API server (tests/model/anthropic_server.py).

The same scripted replies are also read with the official ``anthropic`` SDK, and what
it parses is compared with what the adapter parses, so the server is known to speak
the real protocol.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic
import pytest
import reactivex.operators as ops

from rx_agent import ReActAgent, Toolkit, tool
from rx_agent._rx import await_observable
from rx_agent.message import (
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
)
from rx_agent.model import (
    FinishChunk,
    ModelAuthenticationError,
    ModelChunk,
    ModelRateLimitError,
    ModelRequestError,
    ModelResponseError,
    ModelServerError,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from rx_agent.model.anthropic import AnthropicChatModel
from rx_agent.options import GenerateOptions

from .anthropic_server import AnthropicServer, MessageReply, text, thinking, tool_use

HI = [Msg(role="user", content="hi")]
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]},
}


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServer]:
    server = AnthropicServer(require_key="sk-ant-test").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def model(anthropic_server: AnthropicServer) -> AsyncIterator[AnthropicChatModel]:
    chat = AnthropicChatModel("claude-test", base_url=anthropic_server.url,
                              api_key="sk-ant-test")
    try:
        yield chat
    finally:
        await chat.aclose()


async def collect(model: AnthropicChatModel, messages: Sequence[Msg] = HI,
                  tools: Sequence[dict[str, Any]] = (),
                  options: GenerateOptions | None = None) -> list[ModelChunk]:
    result: list[ModelChunk] = await await_observable(
        model.stream(messages, tools, options).pipe(ops.to_list()), default=[])
    return result


@dataclass
class Parsed:
    """What a client understood of one answer, in a form both clients can fill."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[tuple[str, str, Any]] = field(default_factory=list)
    usage: tuple[int, int, int | None] | None = None
    stop: str | None = None


def parse_ours(chunks: Sequence[ModelChunk]) -> Parsed:
    out = Parsed()
    calls: dict[int, list[str]] = {}
    for chunk in chunks:
        if isinstance(chunk, TextChunk):
            out.text += chunk.text
        elif isinstance(chunk, ThinkingChunk):
            out.thinking += chunk.thinking
        elif isinstance(chunk, ToolCallChunk):
            call = calls.setdefault(chunk.index, ["", "", ""])
            call[0] = call[0] or (chunk.id or "")
            call[1] = call[1] or (chunk.name or "")
            call[2] += chunk.arguments
        elif isinstance(chunk, UsageChunk):
            u = chunk.usage
            out.usage = (u.input_tokens, u.output_tokens, u.cached_tokens)
        elif isinstance(chunk, FinishChunk):
            out.stop = chunk.reason
    out.tool_calls = [(i, n, json.loads(a or "{}")) for i, n, a in
                      (calls[k] for k in sorted(calls))]
    return out


async def parse_with_sdk(server: AnthropicServer, *, stream: bool) -> Parsed:
    """Read the next scripted reply with the official SDK."""
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0)
    try:
        request: dict[str, Any] = {"model": "claude-test", "max_tokens": 100,
                                   "messages": [{"role": "user", "content": "hi"}]}
        if stream:
            async with client.messages.stream(**request) as events:
                message = await events.get_final_message()
        else:
            message = await client.messages.create(**request)
    finally:
        await client.close()
    out = Parsed()
    for block in message.content:
        if block.type == "text":
            out.text += block.text
        elif block.type == "thinking":
            out.thinking += block.thinking
        elif block.type == "tool_use":
            out.tool_calls.append((block.id, block.name, block.input))
    u = message.usage
    read = u.cache_read_input_tokens
    out.usage = (u.input_tokens + (u.cache_creation_input_tokens or 0) + (read or 0),
                 u.output_tokens, read)
    stops = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
    out.stop = stops.get(str(message.stop_reason), message.stop_reason)
    return out


def everything() -> MessageReply:
    return MessageReply(
        [thinking("Let me ", "think."), text("Checking ", "the weather."),
         tool_use("toolu_1", "get_weather", '{"ci', 'ty": "Pa', 'ris"}'),
         tool_use("toolu_2", "clock")],
        stop_reason="tool_use")


@pytest.mark.parametrize("stream", [True, False])
async def test_parses_like_the_official_sdk(anthropic_server: AnthropicServer,
                                            stream: bool) -> None:
    anthropic_server.script(everything(), everything())
    theirs = await parse_with_sdk(anthropic_server, stream=stream)
    chat = AnthropicChatModel("claude-test", base_url=anthropic_server.url,
                              api_key="sk-ant-test", stream=stream)
    try:
        ours = parse_ours(await collect(chat))
    finally:
        await chat.aclose()
    assert ours == theirs
    assert ours.tool_calls == [("toolu_1", "get_weather", {"city": "Paris"}),
                               ("toolu_2", "clock", {})]
    assert ours.usage == (66, 9, 40)  # cache writes and reads count as input
    assert ours.stop == "tool_calls"


async def test_stream_chunks_in_order(anthropic_server: AnthropicServer,
                                      model: AnthropicChatModel) -> None:
    anthropic_server.script(everything())
    chunks = await collect(model)
    assert chunks[:5] == [ThinkingChunk("Let me "), ThinkingChunk("think."),
                          TextChunk("Checking "), TextChunk("the weather."),
                          ToolCallChunk(2, "toolu_1", "get_weather", "")]
    assert ToolCallChunk(2, arguments='{"ci') in chunks
    assert ToolCallChunk(2, done=True) in chunks
    usage, finish = chunks[-2:]
    assert isinstance(usage, UsageChunk) and usage.usage.time is not None
    assert finish == FinishChunk("tool_calls")


@pytest.mark.parametrize(("reason", "reported"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
    ("refusal", "content_filter"), ("pause_turn", "pause_turn")])
async def test_stop_reasons(anthropic_server: AnthropicServer, model: AnthropicChatModel,
                            reason: str, reported: str) -> None:
    anthropic_server.script(MessageReply([text("x")], stop_reason=reason))
    assert (await collect(model))[-1] == FinishChunk(reported)


async def test_request_body_and_headers(anthropic_server: AnthropicServer,
                                        model: AnthropicChatModel) -> None:
    anthropic_server.script(MessageReply([text("ok")]))
    pixel = DataBlock(media_type="image/png", data="iVBORw0KGgo=")
    messages = [
        Msg(role="system", content="Be brief."),
        Msg(role="user", content=[TextBlock(text="Weather?"), pixel]),
        Msg(role="assistant", content=[ThinkingBlock(thinking="hmm"), TextBlock(text="Let me "
                                       "look."), ToolUseBlock(id="t1", name="get_weather",
                                                              input={"city": "Paris"})]),
        Msg(role="tool", content=[ToolResultBlock(id="t1", name="get_weather", output="Sunny"),
                                  ]),
        Msg(role="user", content=[HintBlock(hint="Answer now.")]),
        Msg(role="assistant", content=[ToolUseBlock(id="t2", name="get_weather",
                                                    input={"city": "Oslo"})]),
        Msg(role="tool", content=[ToolResultBlock(id="t2", name="get_weather", output=[
            TextBlock(text="map:"), pixel], state=ToolResultState.ERROR)]),
    ]
    options = GenerateOptions(temperature=0.5, max_tokens=300, stop=("END",),
                              tool_choice="get_weather")
    await collect(model, messages, [WEATHER], options)
    (request,) = anthropic_server.requests
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="}}
    assert request.body == {
        "model": "claude-test",
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather?"}, image]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "t1", "name": "get_weather",
                 "input": {"city": "Paris"}}]},
            # The tool result and the hint merge into one user turn, the result first.
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "Sunny"},
                {"type": "text", "text": "Answer now."}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t2", "name": "get_weather",
                 "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t2", "is_error": True,
                 "content": [{"type": "text", "text": "map:"}, image]}]},
        ],
        "max_tokens": 300,
        "temperature": 0.5,
        "stop_sequences": ["END"],
        "tools": [{"name": "get_weather", "description": "Weather for a city.",
                   "input_schema": WEATHER["parameters"]}],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "stream": True,
    }


def test_tool_choice_and_defaults() -> None:
    chat = AnthropicChatModel("claude-test", base_url="http://127.0.0.1:9", api_key="k",
                              thinking={"type": "enabled", "budget_tokens": 1024})
    body = chat.request_body(HI, [WEATHER], GenerateOptions(tool_choice="required"))
    assert body["tool_choice"] == {"type": "any"}
    assert body["max_tokens"] == 4096 and body["thinking"]["budget_tokens"] == 1024
    assert "tool_choice" not in chat.request_body(HI, [], GenerateOptions(tool_choice="auto"))
    assert chat.request_body(HI, [WEATHER], GenerateOptions(tool_choice="none"))[
        "tool_choice"] == {"type": "none"}
    with pytest.raises(ValueError, match="max_tokens"):
        AnthropicChatModel("claude-test", max_tokens=0)
    with pytest.raises(ValueError, match="base_url"):
        AnthropicChatModel("claude-test", base_url="api.anthropic.com")


def test_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    chat = AnthropicChatModel("claude-test")
    assert (chat.api_key, chat.url) == ("from-env", "http://127.0.0.1:9/v1/messages")
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    assert AnthropicChatModel("c").url == "https://api.anthropic.com/v1/messages"


# -- errors -----------------------------------------------------------------------------------


async def test_http_errors_are_typed(anthropic_server: AnthropicServer,
                                     model: AnthropicChatModel) -> None:
    anthropic_server.script(
        MessageReply(status=429, error_type="rate_limit_error", error_message="slow down",
                     headers={"retry-after": "7"}),
        MessageReply(status=529, error_type="overloaded_error"),
        MessageReply(status=400, error_type="invalid_request_error",
                     error_message="messages: bad"),
    )
    with pytest.raises(ModelRateLimitError, match="slow down") as limited:
        await collect(model)
    assert limited.value.retry_after == 7.0 and limited.value.retryable
    with pytest.raises(ModelServerError, match="529") as overloaded:
        await collect(model)
    assert overloaded.value.retryable
    with pytest.raises(ModelRequestError, match="messages: bad") as bad:
        await collect(model)
    assert not bad.value.retryable


async def test_a_wrong_key_names_where_the_key_comes_from(
    anthropic_server: AnthropicServer,
) -> None:
    chat = AnthropicChatModel("claude-test", base_url=anthropic_server.url, api_key="wrong")
    try:
        with pytest.raises(ModelAuthenticationError, match="ANTHROPIC_API_KEY"):
            await collect(chat)
    finally:
        await chat.aclose()


@pytest.mark.parametrize(("kind", "error"), [
    ("overloaded_error", ModelServerError), ("rate_limit_error", ModelRateLimitError),
    ("invalid_request_error", ModelRequestError)])
async def test_error_events_in_the_stream_are_typed(
    anthropic_server: AnthropicServer, model: AnthropicChatModel, kind: str,
    error: type[Exception],
) -> None:
    anthropic_server.script(MessageReply([text("a", "b")], error_after=4, error_type=kind,
                                         error_message="mid-stream trouble"))
    with pytest.raises(error, match="mid-stream trouble"):
        await collect(model)


async def test_broken_streams_are_response_errors(anthropic_server: AnthropicServer,
                                                  model: AnthropicChatModel) -> None:
    anthropic_server.script(
        MessageReply([text("a")], send_stop=False),
        MessageReply([text("a", "b", "c")], disconnect_after=3),
        MessageReply(raw=[b"event: message_start\ndata: {not json\n\n"]),
    )
    with pytest.raises(ModelResponseError, match="message_stop"):
        await collect(model)
    with pytest.raises(ModelResponseError, match="broke off"):
        await collect(model)
    with pytest.raises(ModelResponseError, match="malformed JSON"):
        await collect(model)


async def test_dispose_closes_the_connection(anthropic_server: AnthropicServer,
                                             model: AnthropicChatModel) -> None:
    anthropic_server.script(MessageReply([text(*(f"t{i} " for i in range(100)))],
                                         chunk_delay=0.02))
    received: list[ModelChunk] = []
    two = asyncio.Event()

    def on_next(chunk: ModelChunk) -> None:
        received.append(chunk)
        if len(received) == 2:
            two.set()

    subscription = model.stream(HI).subscribe(on_next)
    await asyncio.wait_for(two.wait(), 3)
    subscription.dispose()
    assert await anthropic_server.wait_for(lambda: anthropic_server.disconnects, timeout=1.0)
    assert anthropic_server.requests[0].events_sent < 15


# -- in an agent ------------------------------------------------------------------------------


async def test_an_agent_calls_a_tool_and_retries_an_overloaded_server(
    anthropic_server: AnthropicServer, model: AnthropicChatModel,
) -> None:
    @tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"Sunny in {city}"

    anthropic_server.script(
        MessageReply(status=529),
        MessageReply([tool_use("toolu_9", "get_weather", '{"city": "Oslo"}')],
                     stop_reason="tool_use"),
        MessageReply([text("It is sunny in Oslo.")]),
    )
    agent = ReActAgent(name="claude", model=model, toolkit=Toolkit([get_weather]),
                       retry_backoff=(0.0, 0.0))
    reply = await agent.acall("Weather in Oslo?")
    assert reply.text == "It is sunny in Oslo."
    last = anthropic_server.requests[-1].body["messages"]
    assert last[-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "Sunny in Oslo"}]}
    assert len(anthropic_server.requests) == 3  # the 529 was retried


async def test_an_event_that_is_not_a_json_object(anthropic_server: AnthropicServer,
                                                  model: AnthropicChatModel) -> None:
    anthropic_server.script(MessageReply(raw=[b"event: message_start\ndata: [1, 2]\n\n"]))
    with pytest.raises(ModelResponseError, match="unexpected event in the stream"):
        await collect(model)
