"""OpenAIChatModel against a live local OpenAI-compatible server (tests/model/openai_server.py).

The same scripted replies are also read with the official ``openai`` SDK, and what it
parses is compared with what the adapter parses, so the server is known to speak the
real protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import socket
import threading
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import openai
import pytest
import reactivex.operators as ops

from rx_agent._rx import await_observable
from rx_agent.message import (
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from rx_agent.model import (
    FinishChunk,
    ModelAuthenticationError,
    ModelChunk,
    ModelConnectionError,
    ModelError,
    ModelRateLimitError,
    ModelRequestError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from rx_agent.model._openai_format import parse_completion, to_openai_messages
from rx_agent.model._sse import ServerSentEvent, SSEDecoder
from rx_agent.model.openai import DEFAULT_BASE_URL, OpenAIChatModel
from rx_agent.options import GenerateOptions

from .openai_server import OpenAIServer, Reply, reasoning, text, tool_call

HI = [Msg(role="user", content="hi")]
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
CLOCK = {"name": "clock", "description": "The time.", "parameters": {"type": "object"}}


async def collect(
    model: OpenAIChatModel,
    messages: Sequence[Msg] = HI,
    tools: Sequence[dict[str, Any]] = (),
    options: GenerateOptions | None = None,
) -> list[ModelChunk]:
    """All chunks of one call, through the Observable the runtime subscribes to."""
    result: list[ModelChunk] = await await_observable(
        model.stream(messages, tools, options).pipe(ops.to_list()), default=[]
    )
    return result


@dataclass
class Parsed:
    """What a client understood of one answer, in a form both clients can fill."""

    text: str = ""
    reasoning: str = ""
    tool_calls: dict[int, dict[str, str]] = field(default_factory=dict)
    usage: tuple[int, int, int | None, int | None] | None = None
    finish_reason: str | None = None


def parse_ours(chunks: Sequence[ModelChunk]) -> Parsed:
    out = Parsed()
    for chunk in chunks:
        if isinstance(chunk, TextChunk):
            out.text += chunk.text
        elif isinstance(chunk, ThinkingChunk):
            out.reasoning += chunk.thinking
        elif isinstance(chunk, ToolCallChunk):
            call = out.tool_calls.setdefault(chunk.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = call["id"] or (chunk.id or "")
            call["name"] = call["name"] or (chunk.name or "")
            call["arguments"] += chunk.arguments
        elif isinstance(chunk, UsageChunk):
            u = chunk.usage
            out.usage = (u.input_tokens, u.output_tokens, u.cached_tokens, u.reasoning_tokens)
        elif isinstance(chunk, FinishChunk):
            out.finish_reason = chunk.reason
    return out


def _sdk_usage(usage: Any) -> tuple[int, int, int | None, int | None]:
    prompt = usage.prompt_tokens_details
    completion = usage.completion_tokens_details
    return (
        usage.prompt_tokens,
        usage.completion_tokens,
        prompt.cached_tokens if prompt else None,
        completion.reasoning_tokens if completion else None,
    )


async def parse_with_sdk(server: OpenAIServer, *, stream: bool) -> Parsed:
    """Read the next scripted reply with the official SDK."""
    out = Parsed()
    client = openai.AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
    try:
        if not stream:
            completion = await client.chat.completions.create(
                model="test-model", messages=[{"role": "user", "content": "hi"}]
            )
            message = completion.choices[0].message
            out.text = message.content or ""
            out.reasoning = getattr(message, "reasoning_content", None) or ""
            for i, whole in enumerate(message.tool_calls or []):
                assert whole.type == "function"
                out.tool_calls[i] = {
                    "id": whole.id,
                    "name": whole.function.name,
                    "arguments": whole.function.arguments,
                }
            out.finish_reason = completion.choices[0].finish_reason
            out.usage = _sdk_usage(completion.usage) if completion.usage else None
            return out
        chunks = await client.chat.completions.create(
            model="test-model",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in chunks:
            if chunk.usage is not None:
                out.usage = _sdk_usage(chunk.usage)
            for choice in chunk.choices:
                delta = choice.delta
                out.text += delta.content or ""
                out.reasoning += (
                    getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
                    or ""
                )
                for piece in delta.tool_calls or []:
                    call = out.tool_calls.setdefault(
                        piece.index, {"id": "", "name": "", "arguments": ""}
                    )
                    call["id"] = call["id"] or (piece.id or "")
                    if piece.function is not None:
                        call["name"] = call["name"] or (piece.function.name or "")
                        call["arguments"] += piece.function.arguments or ""
                if choice.finish_reason:
                    out.finish_reason = choice.finish_reason
        return out
    finally:
        await client.close()


def interleaved_tool_calls() -> Reply:
    return Reply(
        [
            reasoning("Two lookups. "),
            text("Checking."),
            tool_call(0, id="call_a", name="get_weather", arguments=""),
            tool_call(1, id="call_b", name="clock", arguments='{"tz"'),
            tool_call(0, arguments='{"ci'),
            tool_call(1, arguments=': "UTC"}'),
            tool_call(0, arguments='ty": "Oslo"}'),
        ],
        finish_reason="tool_calls",
    )


SCRIPTS: dict[str, Any] = {
    "text": lambda: Reply([text("Hel"), text("lo, "), text("wörld")]),
    "reasoning": lambda: Reply([reasoning("Let me "), reasoning("think."), text("42")]),
    "tool_calls": interleaved_tool_calls,
    "length": lambda: Reply([text("cut")], finish_reason="length", usage={
        "prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6,
    }),
}


# ---------------------------------------------------------------------- streaming


async def test_streams_reasoning_text_usage_and_finish(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    openai_server.script(
        Reply([reasoning("Let me "), reasoning("think."), text("The answer"), text(" is 42.")])
    )
    chunks = await collect(model)
    assert chunks[:4] == [
        ThinkingChunk("Let me "),
        ThinkingChunk("think."),
        TextChunk("The answer"),
        TextChunk(" is 42."),
    ]
    usage_chunk, finish = chunks[4:]
    assert isinstance(usage_chunk, UsageChunk)
    usage = usage_chunk.usage
    assert (usage.input_tokens, usage.output_tokens) == (11, 7)
    assert (usage.cached_tokens, usage.reasoning_tokens) == (3, 2)
    assert usage.time is not None and usage.time > 0
    assert finish == FinishChunk("stop")


async def test_reasoning_field_alias(openai_server: OpenAIServer, model: OpenAIChatModel) -> None:
    # Ollama and OpenRouter name the field "reasoning".
    openai_server.script(Reply([reasoning("hmm", key="reasoning"), text("ok")]))
    chunks = await collect(model)
    assert chunks[:2] == [ThinkingChunk("hmm"), TextChunk("ok")]


async def test_interleaved_tool_calls_become_pieces_by_index(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    openai_server.script(interleaved_tool_calls())
    chunks = await collect(model, tools=[WEATHER, CLOCK])
    calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert calls == [
        ToolCallChunk(0, "call_a", "get_weather", ""),
        ToolCallChunk(1, "call_b", "clock", '{"tz"'),
        ToolCallChunk(0, None, None, '{"ci'),
        ToolCallChunk(1, None, None, ': "UTC"}'),
        ToolCallChunk(0, None, None, 'ty": "Oslo"}'),
    ]
    parsed = parse_ours(chunks)
    assert json.loads(parsed.tool_calls[0]["arguments"]) == {"city": "Oslo"}
    assert json.loads(parsed.tool_calls[1]["arguments"]) == {"tz": "UTC"}
    assert chunks[-1] == FinishChunk("tool_calls")


async def test_invalid_tool_arguments_are_passed_through(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    # Bad JSON in the arguments is the model's mistake, reported to it by the runtime.
    piece = tool_call(0, id="c1", name="clock", arguments='{"tz": ')
    openai_server.script(Reply([piece], finish_reason="tool_calls"))
    chunks = await collect(model, tools=[CLOCK])
    assert ToolCallChunk(0, "c1", "clock", '{"tz": ') in chunks


async def test_tool_calls_without_index_or_id(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    # Some compatible servers send whole calls without "index", or without an id.
    openai_server.script(
        Reply(
            [
                tool_call(None, id="g1", name="clock", arguments="{}"),
                tool_call(None, id="g2", name="get_weather", arguments='{"city": "Rome"}'),
                tool_call(5, name="clock", arguments="{}"),
            ],
            finish_reason="tool_calls",
        )
    )
    parsed = parse_ours(await collect(model, tools=[WEATHER, CLOCK]))
    assert parsed.tool_calls[0] == {"id": "g1", "name": "clock", "arguments": "{}"}
    assert parsed.tool_calls[1] == {
        "id": "g2", "name": "get_weather", "arguments": '{"city": "Rome"}'
    }
    assert parsed.tool_calls[5]["id"].startswith("call_")  # generated: results match by id


@pytest.mark.parametrize("script", sorted(SCRIPTS))
async def test_parses_like_the_official_sdk(
    openai_server: OpenAIServer, model: OpenAIChatModel, script: str
) -> None:
    openai_server.script(SCRIPTS[script](), SCRIPTS[script]())
    ours = parse_ours(await collect(model, tools=[WEATHER, CLOCK]))
    sdk = await parse_with_sdk(openai_server, stream=True)
    assert ours == sdk
    assert ours.finish_reason is not None and (ours.text or ours.tool_calls)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
async def test_non_streaming_parses_like_the_official_sdk(
    openai_server: OpenAIServer, script: str
) -> None:
    openai_server.script(SCRIPTS[script](), SCRIPTS[script](), SCRIPTS[script]())
    async with OpenAIChatModel("test-model", base_url=openai_server.url, stream=False) as plain:
        ours = parse_ours(await collect(plain, tools=[WEATHER, CLOCK]))
    sdk = await parse_with_sdk(openai_server, stream=False)
    assert ours == sdk
    # And the same as streaming the same reply.
    async with OpenAIChatModel("test-model", base_url=openai_server.url) as streaming:
        assert parse_ours(await collect(streaming, tools=[WEATHER, CLOCK])) == ours


async def test_non_streaming_request_and_reverse_conversion(openai_server: OpenAIServer) -> None:
    openai_server.script(interleaved_tool_calls())
    async with OpenAIChatModel("test-model", base_url=openai_server.url, stream=False) as plain:
        chunks = await collect(plain, tools=[WEATHER])
    body = openai_server.requests[0].body
    assert body["stream"] is False
    assert "stream_options" not in body
    assert isinstance(chunks[-1], FinishChunk)
    assert all(c.done for c in chunks if isinstance(c, ToolCallChunk))

    msg = parse_completion(interleaved_tool_calls().completion("m")).to_msg()
    assert msg.thinking == "Two lookups. "
    assert msg.text == "Checking."
    assert [(c.id, c.name, c.input) for c in msg.tool_calls] == [
        ("call_a", "get_weather", {"city": "Oslo"}),
        ("call_b", "clock", {"tz": "UTC"}),
    ]
    assert msg.usage is not None and msg.usage.input_tokens == 11
    bad = Reply([tool_call(0, id="x", name="clock", arguments="{oops")]).completion("m")
    (call,) = parse_completion(bad).to_msg().tool_calls
    assert call.raw_input == "{oops"


async def test_a_server_that_does_not_stream(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    openai_server.script(interleaved_tool_calls())
    streamed = parse_ours(await collect(model, tools=[WEATHER, CLOCK]))
    whole = interleaved_tool_calls()
    whole.ignore_stream = True
    openai_server.script(whole)
    chunks = await collect(model, tools=[WEATHER, CLOCK])
    assert openai_server.requests[-1].body["stream"] is True
    assert all(c.done for c in chunks if isinstance(c, ToolCallChunk))  # came whole
    assert parse_ours(chunks) == streamed


async def test_unencodable_request_is_a_request_error(model: OpenAIChatModel) -> None:
    bad_schema = {"name": "f", "description": "d", "parameters": {"default": object()}}
    with pytest.raises(ModelRequestError, match="cannot build the request") as caught:
        await collect(model, tools=[bad_schema])
    assert not caught.value.retryable


async def test_sse_framing_is_parsed_robustly(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    def data(payload: dict[str, Any]) -> str:
        return json.dumps(payload, ensure_ascii=False)

    first = data({"choices": [{"index": 0, "delta": {"content": "Hé"}}]})
    second = data({"choices": [{"index": 0, "delta": {"content": "llo"}}]})
    multi = '{"choices": [{"index": 0,\ndata: "delta": {"content": "!"}}]}'
    finish = data({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = (
        f": keep-alive comment\r\n"
        f"id: 1\r\nevent: message\r\ndata: {first}\r\n\r\n"
        f"retry: 10\n"
        f"data:{second}\r\r"  # no space after the colon; lone CR line endings
        f"data: {multi}\n\n"  # one event over two data: lines
        f": ping\n\n"
        f"data: {finish}\r\n\r\n"
        "data: [DONE]\r\n\r\n"
    ).encode()
    # Cut the body at awkward places: inside a multi-byte character, between the CR
    # and LF of a line end, inside "data:".
    cuts = sorted({body.index("é".encode()) + 1, body.index(b"\r\n") + 1, 50, 51, 120, 200})
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    openai_server.script(Reply(raw=pieces))
    chunks = await collect(model)
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == "Héllo!"
    assert chunks[-1] == FinishChunk("stop")


@pytest.mark.parametrize(
    ("finish_reason", "send_done"), [("stop", False), (None, True)], ids=["no-done", "no-finish"]
)
async def test_a_complete_stream_needs_finish_reason_or_done(
    openai_server: OpenAIServer, model: OpenAIChatModel, finish_reason: str | None, send_done: bool
) -> None:
    openai_server.script(Reply([text("ok")], finish_reason=finish_reason, send_done=send_done))
    chunks = await collect(model)
    assert chunks[0] == TextChunk("ok")
    assert (chunks[-1] == FinishChunk("stop")) == (finish_reason is not None)


# ------------------------------------------------------------------------ request


async def test_request_body_headers_and_message_conversion(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script(Reply([text("done")]))
    model = OpenAIChatModel(
        "gpt-test",
        base_url=openai_server.url + "/",
        api_key="sk-secret",
        temperature=0.1,
        seed=7,
        max_tokens=50,
        headers={"X-Trace": "t1"},
    )
    messages = [
        Msg(role="system", content="Be brief."),
        Msg(
            role="user",
            content=[
                TextBlock(text="What is in "),
                TextBlock(text="this picture?"),
                DataBlock(media_type="image/png", data="iVBORw0K"),
                DataBlock(media_type="image/jpeg", url="https://example.com/cat.jpg"),
            ],
        ),
        Msg(
            role="assistant",
            content=[
                ThinkingBlock(thinking="secret reasoning"),
                TextBlock(text="Let me check."),
                ToolUseBlock(id="call_1", name="get_weather", input={"city": "Oslo"}),
                ToolUseBlock(id="call_2", name="clock", input={}),
            ],
        ),
        Msg(
            role="tool",
            content=[
                ToolResultBlock(id="call_1", name="get_weather", output="sunny"),
                ToolResultBlock(
                    id="call_2",
                    name="clock",
                    output=[
                        TextBlock(text="12:00"),
                        DataBlock(media_type="image/png", data="AAAA"),
                    ],
                ),
            ],
        ),
        Msg(role="assistant", content=[ThinkingBlock(thinking="only thinking")]),  # skipped
        Msg(role="user", content=[HintBlock(hint="Answer now."), TextBlock(text="Thanks")]),
    ]
    options = GenerateOptions(
        temperature=0.5, top_p=0.9, stop=("END",), tool_choice="clock", extra={"user": "u1"}
    )
    try:
        await collect(model, messages, [WEATHER, CLOCK], options)
    finally:
        await model.aclose()

    (request,) = openai_server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-secret"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["x-trace"] == "t1"
    body = request.body
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    # Per-call options over constructor options; untouched constructor options kept.
    assert body["temperature"] == 0.5
    assert body["top_p"] == 0.9
    assert body["max_tokens"] == 50
    assert body["seed"] == 7
    assert body["stop"] == ["END"]
    assert body["user"] == "u1"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "clock"}}
    assert body["tools"] == [
        {"type": "function", "function": WEATHER},
        {"type": "function", "function": CLOCK},
    ]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in "},
                {"type": "text", "text": "this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "clock", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
        # Images a tool returned follow the run of tool messages.
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attachments returned by tool call call_2:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {"role": "user", "content": "Answer now.Thanks"},
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tool_choice(
    openai_server: OpenAIServer, model: OpenAIChatModel, choice: str, wire: Any
) -> None:
    openai_server.script(Reply([text("a")]), Reply([text("b")]))
    await collect(model, tools=[WEATHER], options=GenerateOptions(tool_choice=choice))
    assert openai_server.requests[0].body["tool_choice"] == wire
    # A call without tools (the max-iterations summary) sends neither.
    await collect(model, tools=[], options=GenerateOptions(tool_choice=choice))
    assert "tool_choice" not in openai_server.requests[1].body
    assert "tools" not in openai_server.requests[1].body


def test_message_conversion_edge_cases() -> None:
    assert to_openai_messages(
        [
            Msg(role="assistant", content=[]),  # skipped
            Msg(role="assistant", content=[ToolUseBlock(id="c", name="clock", input={})]),
            Msg(role="tool", content=[ToolResultBlock(id="c", name="clock", output="")]),
            Msg(
                role="assistant",
                content=[ToolUseBlock(id="d", name="clock", input={}, raw_input="{bad")],
            ),
        ]
    ) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": ""},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "d", "type": "function", "function": {"name": "clock", "arguments": "{bad"}}
            ],
        },
    ]


# ------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "error_type", "retryable"),
    [
        (400, ModelRequestError, False),
        (401, ModelAuthenticationError, False),
        (403, ModelAuthenticationError, False),
        (404, ModelRequestError, False),
        (422, ModelRequestError, False),
        (500, ModelServerError, True),
        (503, ModelServerError, True),
    ],
)
async def test_http_errors_are_typed(
    openai_server: OpenAIServer,
    model: OpenAIChatModel,
    status: int,
    error_type: type[ModelError],
    retryable: bool,
) -> None:
    openai_server.script(
        Reply(status=status, error={"message": "the server says no", "type": "invalid_request"})
    )
    with pytest.raises(error_type) as caught:
        await collect(model)
    error = caught.value
    assert type(error) is error_type
    assert error.status_code == status
    assert error.retryable is retryable
    assert "the server says no" in str(error)
    assert str(status) in str(error)
    assert openai_server.url in str(error)


async def test_plain_text_error_body(openai_server: OpenAIServer, model: OpenAIChatModel) -> None:
    openai_server.script(Reply(status=502, error="upstream exploded"))
    with pytest.raises(ModelServerError, match="502 Bad Gateway: upstream exploded"):
        await collect(model)


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "plain"])
async def test_rate_limit_with_retry_after_seconds(
    openai_server: OpenAIServer, streaming: bool
) -> None:
    openai_server.script(
        Reply(status=429, headers={"Retry-After": "7"}, error={"message": "slow down"})
    )
    async with OpenAIChatModel("m", base_url=openai_server.url, stream=streaming) as model:
        with pytest.raises(ModelRateLimitError) as caught:
            await collect(model)
    assert caught.value.retry_after == 7.0
    assert caught.value.retryable
    assert caught.value.status_code == 429
    assert "slow down" in str(caught.value)


async def test_rate_limit_with_retry_after_date(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    openai_server.script(Reply(status=429, headers={"Retry-After": when}))
    with pytest.raises(ModelRateLimitError) as caught:
        await collect(model)
    assert caught.value.retry_after is not None
    assert 25 <= caught.value.retry_after <= 30


async def test_rate_limit_retry_after_ms_wins(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    openai_server.script(
        Reply(status=429, headers={"retry-after-ms": "1500", "Retry-After": "2"})
    )
    with pytest.raises(ModelRateLimitError) as caught:
        await collect(model)
    assert caught.value.retry_after == 1.5


async def test_timeout(openai_server: OpenAIServer) -> None:
    openai_server.script(Reply([text("late")], response_delay=2.0))
    started = time.monotonic()
    async with OpenAIChatModel("m", base_url=openai_server.url, timeout=0.2) as model:
        with pytest.raises(ModelTimeoutError, match=r"timed out after 0\.2s") as caught:
            await collect(model)
    assert time.monotonic() - started < 1.5
    assert caught.value.retryable
    # The server saw the client give up.
    assert await openai_server.wait_for(lambda: openai_server.disconnects)


async def test_connection_refused_names_the_url() -> None:
    # A bound socket that does not listen: connecting is refused, and no other
    # process can take the port meanwhile.
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{blocker.getsockname()[1]}/v1"
        async with OpenAIChatModel("m", base_url=url) as model:
            with pytest.raises(ModelConnectionError) as caught:
                await collect(model)
    assert f"{url}/chat/completions" in str(caught.value)
    assert caught.value.retryable


async def test_mid_stream_disconnect(openai_server: OpenAIServer, model: OpenAIChatModel) -> None:
    openai_server.script(Reply([text("one"), text("two"), text("three")], disconnect_after=2))
    seen: list[ModelChunk] = []
    with pytest.raises(ModelResponseError, match="broke off"):
        async for chunk in model.astream(HI, [], GenerateOptions()):
            seen.append(chunk)
    assert seen == [TextChunk("one"), TextChunk("two")]


async def test_truncated_stream(openai_server: OpenAIServer, model: OpenAIChatModel) -> None:
    # The body ends cleanly, but neither a finish_reason nor [DONE] ever came.
    openai_server.script(Reply([text("half an ans")], finish_reason=None, send_done=False))
    with pytest.raises(ModelResponseError, match="ended before the answer was complete"):
        await collect(model)


async def test_malformed_json(openai_server: OpenAIServer, model: OpenAIChatModel) -> None:
    openai_server.script(Reply(raw=[b'data: {"choices": [{"index": 0, "delta": {"con\n\n']))
    with pytest.raises(ModelResponseError, match="malformed JSON") as caught:
        await collect(model)
    assert caught.value.retryable


async def test_non_json_body_in_plain_mode(openai_server: OpenAIServer) -> None:
    openai_server.script(Reply(json_body="not a completion"))
    async with OpenAIChatModel("m", base_url=openai_server.url, stream=False) as model:
        with pytest.raises(ModelResponseError, match="unexpected chat completion"):
            await collect(model)


async def test_error_event_inside_the_stream(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    error = json.dumps({"error": {"message": "context too long", "code": 400}})
    openai_server.script(Reply(raw=[b'data: {"choices": []}\n\n', f"data: {error}\n\n".encode()]))
    with pytest.raises(ModelRequestError, match="context too long"):
        await collect(model)
    overloaded = json.dumps({"error": {"message": "overloaded", "type": "server_error"}})
    openai_server.script(Reply(raw=[f"data: {overloaded}\n\n".encode()]))
    with pytest.raises(ModelServerError, match="overloaded"):
        await collect(model)


# ------------------------------------------------------------------- cancellation


async def test_dispose_closes_the_connection(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    openai_server.script(Reply([text(f"t{i} ") for i in range(100)], chunk_delay=0.02))
    received: list[ModelChunk] = []
    errors: list[Exception] = []
    completed = asyncio.Event()
    two = asyncio.Event()

    def on_next(chunk: ModelChunk) -> None:
        received.append(chunk)
        if len(received) == 2:
            two.set()

    subscription = model.stream(HI).subscribe(on_next, errors.append, completed.set)
    await asyncio.wait_for(two.wait(), 3)
    subscription.dispose()

    # The server notices the client went away long before it would have finished
    # (100 chunks x 20 ms), because the HTTP response was closed, not abandoned.
    assert await openai_server.wait_for(lambda: openai_server.disconnects, timeout=1.0)
    (request,) = openai_server.requests
    assert request.disconnected and not request.completed
    assert request.events_sent < 10
    await asyncio.sleep(0.1)
    assert len(received) < 10 and not errors and not completed.is_set()


async def test_closing_the_generator_closes_the_connection(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    # Closing astream() while it is suspended at a yield (not inside an HTTP read)
    # must still close the response: only the generator's own cleanup can.
    openai_server.script(Reply([text(f"t{i} ") for i in range(100)], chunk_delay=0.02))
    generator = cast(AsyncGenerator[ModelChunk, None], model.astream(HI, [], GenerateOptions()))
    async with contextlib.aclosing(generator) as chunks:
        async for chunk in chunks:
            assert chunk == TextChunk("t0 ")
            break
    assert await openai_server.wait_for(lambda: openai_server.disconnects, timeout=1.0)
    assert openai_server.requests[0].events_sent < 10


async def test_cancelling_a_plain_request_closes_the_connection(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script(Reply([text("slow")], response_delay=5))
    async with OpenAIChatModel("m", base_url=openai_server.url, stream=False) as model:
        task = asyncio.ensure_future(collect(model))
        assert await openai_server.wait_for(lambda: openai_server.requests)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await openai_server.wait_for(lambda: openai_server.disconnects, timeout=1.0)


async def test_connections_are_reused(openai_server: OpenAIServer, model: OpenAIChatModel) -> None:
    # Reading through [DONE] to the end of the body puts the connection back in the pool.
    openai_server.script(Reply([text("a")]), Reply([text("b")]), Reply([text("c")]))
    for _ in range(3):
        await collect(model)
    assert [r.connection for r in openai_server.requests] == [1, 1, 1]
    (pool,) = model._pools.values()
    assert len(pool.clients) == 1


async def test_concurrent_calls_use_separate_connections(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    openai_server.default = Reply([text("x"), text("y")], chunk_delay=0.05)
    started = time.monotonic()
    results = await asyncio.gather(*(collect(model) for _ in range(20)))
    elapsed = time.monotonic() - started
    assert all(parse_ours(chunks).text == "xy" for chunks in results)
    # 5 events of 50 ms each: together, not one after another (20 x 0.25 s).
    assert elapsed < 1.5
    assert len({r.connection for r in openai_server.requests}) == 20
    # A second wave reuses those connections instead of opening new ones.
    await asyncio.gather(*(collect(model) for _ in range(20)))
    assert len({r.connection for r in openai_server.requests}) == 20


async def test_max_connections_queues_calls(openai_server: OpenAIServer) -> None:
    openai_server.default = Reply([text("z")], chunk_delay=0.02)
    async with OpenAIChatModel("m", base_url=openai_server.url, max_connections=2) as model:
        results = await asyncio.gather(*(collect(model) for _ in range(6)))
        assert all(parse_ours(chunks).text == "z" for chunks in results)
        # A queued call that is cancelled gives up its place without leaking one.
        openai_server.default = Reply([text("slow")], chunk_delay=0.5)
        running = [asyncio.ensure_future(collect(model)) for _ in range(3)]
        assert await openai_server.wait_for(lambda: len(openai_server.requests) >= 8)
        await asyncio.sleep(0.05)
        assert len(openai_server.requests) == 8  # the third call waits for a connection
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        openai_server.default = Reply([text("again")])
        assert parse_ours(await collect(model)).text == "again"
    assert len({r.connection for r in openai_server.requests}) <= 3


# ------------------------------------------------------------- configuration, loops


def test_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1/")
    model = OpenAIChatModel("llama3.2")
    assert (model.name, model.provider) == ("llama3.2", "openai")
    assert model.api_key == "sk-env"
    assert model.url == "http://localhost:11434/v1/chat/completions"
    explicit = OpenAIChatModel("m", base_url="https://example.com/v1", api_key="sk-arg")
    assert (explicit.base_url, explicit.api_key) == ("https://example.com/v1", "sk-arg")
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    default = OpenAIChatModel("gpt-4o-mini")
    assert default.base_url == DEFAULT_BASE_URL == "https://api.openai.com/v1"
    assert default.api_key is None
    assert "sk-" not in repr(explicit)
    with pytest.raises(ValueError, match="base_url"):
        OpenAIChatModel("m", base_url="localhost:8000")
    with pytest.raises(TypeError, match="JSON"):
        OpenAIChatModel("m", base_url="http://x", seed=object())


async def test_environment_reaches_the_server(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.url)
    openai_server.require_key = "sk-from-env"
    openai_server.script(Reply([text("hello")]))
    async with OpenAIChatModel("m") as model:
        assert (await collect(model))[0] == TextChunk("hello")
    # Without a key, no Authorization header goes out, and the 401 is typed.
    monkeypatch.delenv("OPENAI_API_KEY")
    async with OpenAIChatModel("m") as keyless:
        with pytest.raises(ModelAuthenticationError, match="Incorrect API key"):
            await collect(keyless)
    assert "authorization" not in openai_server.requests[-1].headers


async def test_used_from_two_loops(openai_server: OpenAIServer, model: OpenAIChatModel) -> None:
    """Subscribed from a thread without a loop, the call runs on the runtime's loop;
    from the test, on this loop. Each loop gets its own client; aclose closes both."""
    openai_server.script(Reply([text("from a thread")]), Reply([text("from the loop")]))

    def from_thread() -> list[ModelChunk]:
        assert threading.current_thread() is not threading.main_thread()
        result: list[ModelChunk] = model.stream(HI).pipe(ops.to_list()).run()
        return result

    assert (await asyncio.to_thread(from_thread))[0] == TextChunk("from a thread")
    assert (await collect(model))[0] == TextChunk("from the loop")
    clients = [c for pool in model._pools.values() for c in pool.clients]
    assert len(model._pools) == len(clients) == 2
    await model.aclose()
    assert all(c.is_closed for c in clients)
    assert not model._pools


# ------------------------------------------------------------------------- decoder


def _events(pieces: Iterator[bytes] | list[bytes]) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    out: list[ServerSentEvent] = []
    for piece in pieces:
        out.extend(decoder.feed(piece))
    return out + decoder.close()


def test_sse_decoder_byte_by_byte_equals_whole() -> None:
    stream = (
        "\ufeffdata: a\r\n\r\n: c\r\nevent: x\rdata: ü\rdata:  two\r\rid: 9\ndata\n\n"
        "data: tail-without-blank-line"
    ).encode()
    whole = _events([stream])
    assert whole == [
        ServerSentEvent("a"),
        ServerSentEvent("ü\n two", "x"),
        ServerSentEvent("", "message", "9"),
        ServerSentEvent("tail-without-blank-line", "message", "9"),
    ]
    assert _events(stream[i : i + 1] for i in range(len(stream))) == whole


def test_options_cannot_replace_the_call_itself() -> None:
    model = OpenAIChatModel("m", base_url="http://x/v1", stream_options={"continuous": True})
    body = model.request_body(
        HI, [], GenerateOptions(extra={"model": "other", "stream": False, "messages": []})
    )
    assert list(body)[:2] == ["model", "messages"]
    assert (body["model"], body["stream"], len(body["messages"])) == ("m", True, 1)
    assert body["stream_options"] == {"include_usage": True, "continuous": True}
    # A server that rejects stream_options: turn it off.
    off = OpenAIChatModel("m", base_url="http://x/v1", stream_options=None)
    assert "stream_options" not in off.request_body(HI)


async def test_requests_name_rx_agent_and_carry_the_callers_headers(
    openai_server: OpenAIServer,
) -> None:
    from rx_agent import __version__

    openai_server.script(Reply([text("hi")]), Reply([text("hi")]))
    async with OpenAIChatModel("m", base_url=openai_server.url, api_key="sk-1",
                               headers={"X-Team": "core"}) as model:
        await collect(model)
    sent = openai_server.requests[-1].headers
    assert sent["user-agent"] == f"rx-agent/{__version__}"
    assert sent["authorization"] == "Bearer sk-1" and sent["x-team"] == "core"
    async with OpenAIChatModel("m", base_url=openai_server.url,
                               headers={"User-Agent": "mine/1"}) as own:
        await collect(own)
    assert openai_server.requests[-1].headers["user-agent"] == "mine/1"


async def test_an_event_that_is_not_a_json_object(
    openai_server: OpenAIServer, model: OpenAIChatModel
) -> None:
    openai_server.script(Reply(raw=[b"data: [1, 2]\n\n"]))
    with pytest.raises(ModelResponseError, match="unexpected event in the stream"):
        await collect(model)
