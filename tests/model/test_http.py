"""The provider-neutral HTTP seam (rx_agent.model._http) with a non-OpenAI event format.

The OpenAI adapter's use of it is covered end to end in test_openai.py; these tests pin
what a second adapter (Anthropic's Messages API, say) relies on: no OpenAI wording in
the error mapping, and an event stream read through any parser.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from rx_agent.model import (
    ModelAuthenticationError,
    ModelChunk,
    ModelRateLimitError,
    ModelServerError,
    TextChunk,
)
from rx_agent.model._http import HTTPTransport, read_events
from rx_agent.model._sse import ServerSentEvent

URL = "https://api.example.test/v1/messages"


def transport(key_hint: str = "") -> HTTPTransport:
    return HTTPTransport(
        URL, timeout=httpx.Timeout(5.0), headers={}, max_connections=1, key_hint=key_hint
    )


def test_a_401_names_the_adapters_key_source_and_only_that() -> None:
    plain = transport().error_for_status(401, "invalid x-api-key", None)
    hinted = transport("ANTHROPIC_API_KEY or api_key=").error_for_status(401, "bad", None)
    assert isinstance(plain, ModelAuthenticationError)
    assert str(plain) == f"{URL} answered 401 Unauthorized: invalid x-api-key"
    assert str(hinted).endswith(" (check the API key: ANTHROPIC_API_KEY or api_key=)")
    assert "OPENAI" not in str(plain) + str(hinted)


def test_in_body_errors_of_another_provider_map_to_typed_errors() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    error = transport().payload_error(overloaded)
    assert isinstance(error, ModelServerError)
    assert str(error) == f"{URL} reported an error in the response: Overloaded (overloaded_error)"
    limited = transport().payload_error({"error": {"message": "slow down", "code": "429"}})
    assert isinstance(limited, ModelRateLimitError)
    assert limited.status_code == 429


class _MessagesParser:
    """A minimal Anthropic-style parser: text deltas, ``message_stop`` ends the stream."""

    def __init__(self) -> None:
        self.done = False
        self.seen: list[str] = []

    def event(self, event: ServerSentEvent) -> list[ModelChunk]:
        self.seen.append(event.event)
        if event.event == "message_stop":
            self.done = True
            return []
        delta = json.loads(event.data).get("delta", {})
        return [TextChunk(delta["text"])] if "text" in delta else []


async def _pieces(body: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.mark.parametrize("size", [1, 7, 4096])
async def test_read_events_feeds_any_parser_and_stops_at_its_end(size: int) -> None:
    body = (
        b"event: content_block_delta\r\ndata: {\"delta\": {\"text\": \"Hel\"}}\r\n\r\n"
        b": keep-alive\n\n"
        b"event: content_block_delta\ndata: {\"delta\": {\"text\": \"lo \\u00b0\"}}\n\n"
        b"event: message_stop\ndata: {}\n\n"
        b"event: content_block_delta\ndata: {\"delta\": {\"text\": \"after the end\"}}\n\n"
    )
    response = httpx.Response(200, content=_pieces(body, size))
    parser = _MessagesParser()
    chunks = [chunk async for chunk in read_events(response, parser)]
    assert chunks == [TextChunk("Hel"), TextChunk("lo °")]
    # Nothing after the end event is parsed; the rest of the body is drained.
    assert parser.seen == ["content_block_delta", "content_block_delta", "message_stop"]
    assert response.is_closed
