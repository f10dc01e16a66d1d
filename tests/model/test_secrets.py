"""The configured API key never leaves the process, whatever the upstream says.

Some gateways quote the rejected key in their 401 body. The model's error must not
carry it; so neither the server's 502 answer, its SSE error frame, the router's
fallback event, the spans of a run, nor the logs do. Clients of ``rx-agent serve`` are
not told the internal endpoint's URL either.
"""

from __future__ import annotations

import json
import logging
import threading
import traceback
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from _live import LiveServer
from opentelemetry.sdk.trace import TracerProvider

from rx_agent import (
    AnthropicChatModel,
    ChatModelCandidate,
    ModelRouterMiddleware,
    Msg,
    OpenAIChatModel,
    OpenAITTSModel,
    OtelTracingMiddleware,
    ReActAgent,
    parse_event,
)
from rx_agent.model import ModelAuthenticationError, ModelError
from rx_agent.model._redact import MARK, Redactor
from rx_agent.model.embeddings import OpenAIEmbeddings
from rx_agent.options import GenerateOptions
from rx_agent.serve import create_app

KEY = "sk-proj-Q7sLk2ZpX9vB4nR8tW1yC6mE3hJ5aD0fG"


def leaks(text: str) -> list[str]:
    """The pieces of the key found in ``text`` (any 12 characters of it)."""
    return sorted({KEY[i:i + 12] for i in range(len(KEY) - 11) if KEY[i:i + 12] in text})


class EchoingGateway:
    """A loopback "provider" that rejects every request and quotes the credentials it
    got, as some gateways do. ``shape`` says how: an OpenAI-style 401 (default), a
    text/plain 401, a 500, an error inside a 200 body, a malformed or non-object event,
    or a long message cut at the key."""

    def __init__(self) -> None:
        self.shape = "json"
        self.seen: list[dict[str, str]] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                gateway.seen.append(headers)
                key = headers.get("x-api-key") or headers.get("authorization", "")
                key = key.removeprefix("Bearer ")
                status, kind, body = gateway.answer(key, headers.get("authorization", ""))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def answer(self, key: str, authorization: str) -> tuple[int, str, str]:
        message = (f"Incorrect API key provided: {key}. You sent "
                   f"'Authorization: {authorization}'.")
        error = {"message": message, "type": "invalid_request_error",
                 "code": "invalid_api_key"}
        if self.shape == "json":
            return 401, "application/json", json.dumps({"error": error})
        if self.shape == "text":
            return 401, "text/plain", f"bad key {key}\nAuthorization: {authorization}"
        if self.shape == "500":
            return 500, "application/json", json.dumps(
                {"error": {"message": f"upstream rejected x-api-key={key}"}})
        if self.shape == "in-body":
            return 200, "application/json", json.dumps(
                {"error": {"message": f"key {key} is revoked", "code": "401"}})
        if self.shape == "bad-event":
            return 200, "text/event-stream", f"data: {{not json {key}\n\n"
        if self.shape == "list-event":
            return 200, "text/event-stream", f'data: ["{key}"]\n\n'
        assert self.shape == "long"
        return 401, "application/json", json.dumps({"error": {"message": "x" * 490 + key}})

    def __enter__(self) -> EchoingGateway:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def upstream() -> Iterator[EchoingGateway]:
    with EchoingGateway() as gateway:
        yield gateway


def model(gateway: EchoingGateway, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-test", base_url=gateway.url, api_key=KEY, **kwargs)


# -- the model's own errors ------------------------------------------------------------


async def ask(chat: Any) -> None:
    async for _ in chat.astream([Msg("user", "hi")], [], GenerateOptions()):
        pass


@pytest.mark.parametrize("stream", [True, False])
async def test_a_401_that_quotes_the_key_is_an_error_without_it(
    upstream: EchoingGateway, stream: bool
) -> None:
    async with model(upstream, stream=stream) as chat:
        with pytest.raises(ModelAuthenticationError) as info:
            await ask(chat)
    error = info.value
    assert upstream.seen[0]["authorization"] == f"Bearer {KEY}"  # it was sent
    shown = "".join(traceback.format_exception(error))
    assert leaks(shown) == []
    assert f"Incorrect API key provided: {MARK}" in str(error)
    assert f"Authorization: Bearer {MARK}" in str(error)
    assert "(check the API key: OPENAI_API_KEY or api_key=)" in str(error)
    # Operators still see where; a server's clients need not.
    assert error.url == f"{upstream.url}/chat/completions" and error.url in str(error)
    assert error.public_message.startswith("the model endpoint answered 401 Unauthorized: ")
    assert "127.0.0.1" not in error.public_message


@pytest.mark.parametrize("shape", ["text", "500", "in-body", "bad-event", "list-event", "long"])
async def test_no_message_of_any_failure_quotes_the_key(
    upstream: EchoingGateway, shape: str
) -> None:
    upstream.shape = shape
    async with model(upstream, max_connections=1) as chat:
        with pytest.raises(ModelError) as info:
            await ask(chat)
    assert leaks("".join(traceback.format_exception(info.value))) == []
    assert str(info.value).startswith(("the response", "malformed", "unexpected", upstream.url))


async def test_the_anthropic_key_header_is_kept_out_too(upstream: EchoingGateway) -> None:
    chat = AnthropicChatModel("claude-test", base_url=upstream.url, api_key=KEY, max_tokens=8)
    async with chat:
        with pytest.raises(ModelAuthenticationError) as info:
            await ask(chat)
    assert upstream.seen[0]["x-api-key"] == KEY
    assert leaks(str(info.value)) == []
    assert f"Incorrect API key provided: {MARK}" in str(info.value)


async def test_embeddings_errors_are_scrubbed(upstream: EchoingGateway) -> None:
    async with OpenAIEmbeddings(base_url=upstream.url, api_key=KEY) as embeddings:
        with pytest.raises(ModelAuthenticationError) as info:
            await embeddings.embed(["hello"])
    assert leaks(str(info.value)) == []


async def test_tts_errors_are_scrubbed(upstream: EchoingGateway) -> None:
    async with OpenAITTSModel(base_url=upstream.url, api_key=KEY) as tts:
        with pytest.raises(ModelAuthenticationError) as info:
            await tts.synthesize("hello")
    assert leaks(str(info.value)) == []


def test_the_redactor_knows_every_credential_it_sends() -> None:
    redactor = Redactor({"Authorization": f"Bearer {KEY}", "X-Custom-Token": "tok-123456",
                         "User-Agent": "rx-agent/1"},
                        "https://user:hunter22@gw.internal:8443/v1?api-key=qs-secret-9&x=1")
    said = (f"{KEY} {KEY[:20]} tok-123456 hunter22 qs-secret-9 rx-agent/1 "
            f"Bearer someone-elses-key token=abc Authorization: Basic dXNlcjpwYXNz")
    clean = redactor.upstream(said)
    for secret in (KEY[:12], "tok-123456", "hunter22", "qs-secret-9", "someone-elses",
                   "dXNlcjpwYXNz"):
        assert secret not in clean, clean
    assert "rx-agent/1" in clean  # not a credential
    assert redactor.url == "https://gw.internal:8443/v1?api-key=[redacted]&x=1"
    assert redactor.upstream(clean) == clean  # idempotent
    assert json.dumps(KEY)[1:-1] not in redactor.secrets(json.dumps({"k": KEY}))


# -- served: what reaches the server's clients ------------------------------------------


def read_sse(response: httpx.Response) -> list[dict[str, str]]:
    frames, frame = [], {}
    for line in response.iter_lines():
        if not line:
            if frame:
                frames.append(frame)
            frame = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            frame[name] = value
    return frames


def test_a_served_agent_never_shows_the_key_nor_the_upstream_url(
    upstream: EchoingGateway, caplog: pytest.LogCaptureFixture
) -> None:
    provider = TracerProvider()
    router = ModelRouterMiddleware(
        model(upstream), [ChatModelCandidate("other", model(upstream), "anything")])
    agent = ReActAgent(name="assistant", model=model(upstream),
                       middlewares=[router, OtelTracingMiddleware(provider)])
    where = f"127.0.0.1:{upstream.port}"
    caplog.set_level(logging.DEBUG)
    with LiveServer(create_app(agent, tracer_provider=provider)) as server:
        base = server.url + "/v1/sessions/s1"
        answer = httpx.post(base + "/messages", json={"message": "hi"},
                            headers={"Accept": "application/json"}, timeout=30)
        assert answer.status_code == 502, answer.text
        error = answer.json()["error"]
        assert error["code"] == "model_error"
        assert error["message"].startswith("the model endpoint answered 401 Unauthorized")

        with httpx.stream("POST", base + "/messages", json={"message": "again"},
                          timeout=30) as streamed:
            run_id = streamed.headers["x-run-id"]
            frames = read_sse(streamed)
        assert frames[-1]["event"] == "error"
        assert json.loads(frames[-1]["data"])["error"]["code"] == "model_error"
        route = next(parse_event(f["data"]) for f in frames if f.get("event") == "custom")
        fallback = route.value["fallback"]  # type: ignore[attr-defined]
        assert fallback.startswith("routing failed: ModelAuthenticationError: the model "
                                   "endpoint answered 401"), fallback

        run = httpx.get(base + f"/runs/{run_id}", timeout=10)
        assert run.status_code == 200
        spans = run.json()["spans"]
        assert any(s["status"] == "ERROR" and "answered 401" in (s["description"] or "")
                   for s in spans), spans
        session = httpx.get(base, timeout=10)  # the router's stored choice is in it

    seen = {"502 body": answer.text, "SSE frames": json.dumps(frames),
            "run": run.text, "session": session.text}
    for name, body in seen.items():
        assert leaks(body) == [], name
        assert where not in body, name
    assert len(upstream.seen) >= 4, "the upstream was not asked (twice per post)"
    logged = "\n".join(
        record.getMessage()
        + ("".join(traceback.format_exception(*record.exc_info)) if record.exc_info else "")
        for record in caplog.records)
    assert "routing fell back" in logged  # the router's warning is there ...
    assert leaks(logged) == []  # ... without the key


def test_the_gateway_really_quotes_the_key(upstream: EchoingGateway) -> None:
    """The premise: a raw client would have seen the key in the answer."""
    body = httpx.post(f"{upstream.url}/chat/completions", json={"model": "m", "messages": []},
                      headers={"Authorization": f"Bearer {KEY}"}).text
    assert leaks(body) != [] and KEY in body
