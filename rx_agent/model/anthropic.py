"""``AnthropicChatModel``: a streaming adapter for the Anthropic Messages API.

Like :class:`~rx_agent.OpenAIChatModel` it talks HTTP itself (``httpx``, through the
shared transport of :mod:`rx_agent.model._http_model`): the same typed errors, the
same retry signals (``Retry-After``), the same per-loop connection pools, and
disposing a call closes its response at once. The wire format is in
``_anthropic_format`` and ``_anthropic_stream``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from rx_agent.message import Msg
from rx_agent.options import GenerateOptions

from ._anthropic_format import (
    anthropic_message_json,
    join_anthropic_json,
    parse_message,
    to_anthropic_messages,
    to_anthropic_tool_choice,
    to_anthropic_tools,
)
from ._anthropic_stream import AnthropicStreamParser
from ._http import resolve_base_url
from ._http_model import HTTPChatModel, StreamParser
from ._wire_cache import RawJSON, ToolsCache, WireCache, encode_json
from .base import ModelChunk

__all__ = ["AnthropicChatModel"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


def _tools_json(tools: Sequence[Mapping[str, Any]]) -> RawJSON:
    return RawJSON([encode_json(t) for t in to_anthropic_tools(tools)])


class AnthropicChatModel(HTTPChatModel):
    """A Claude model over the Anthropic Messages API (``POST {base_url}/v1/messages``).

    ``model`` is the model name (``"claude-sonnet-4-5"``). ``base_url`` defaults to
    ``$ANTHROPIC_BASE_URL``, then ``https://api.anthropic.com``; ``api_key`` to
    ``$ANTHROPIC_API_KEY`` (sent as ``x-api-key``). ``max_tokens`` is required by the
    API: the default is 4096 unless the call's :class:`GenerateOptions` say otherwise.
    Other keyword arguments are request fields sent with every call
    (``thinking={"type": "enabled", "budget_tokens": 2048}``, ``metadata=...``).

    ``stream``, ``timeout``, ``connect_timeout``, ``headers`` and
    ``max_connections`` behave as for :class:`~rx_agent.OpenAIChatModel`;
    ``anthropic_version`` is the ``anthropic-version`` header. Stop reasons are
    reported as every adapter reports them (``end_turn`` → ``stop``, ``tool_use`` →
    ``tool_calls``, ``max_tokens`` → ``length``); usage counts cache writes and
    reads in ``input_tokens`` and reads in ``cached_tokens``.
    """

    provider = "anthropic"
    _answer_kind = "message"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        max_tokens: int = 4096,
        stream: bool = True,
        timeout: float | None = 120.0,
        connect_timeout: float | None = 10.0,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 1000,
        anthropic_version: str = API_VERSION,
        **generation_options: Any,
    ) -> None:
        if not model:
            raise ValueError("AnthropicChatModel needs a model name")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
        self.name = model
        self.base_url = resolve_base_url(base_url, "ANTHROPIC_BASE_URL", DEFAULT_BASE_URL)
        self.api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        self.max_tokens = max_tokens
        http_headers = {"anthropic-version": anthropic_version, **(headers or {})}
        if self.api_key:
            http_headers["x-api-key"] = self.api_key
        self._setup_http(
            url=f"{self.base_url}/v1/messages",
            stream=stream,
            timeout=timeout,
            connect_timeout=connect_timeout,
            headers=http_headers,
            max_connections=max_connections,
            generation_options=generation_options,
            key_hint="ANTHROPIC_API_KEY or api_key=",
        )
        # Each message's wire form, and the tool schemas', made once (see _wire_cache).
        self._wire_messages = WireCache(anthropic_message_json)
        self._wire_tools = ToolsCache(_tools_json)

    def __repr__(self) -> str:
        return f"AnthropicChatModel(name={self.name!r}, base_url={self.base_url!r})"

    def _body(
        self,
        messages: Sequence[Msg],
        tools: Sequence[Mapping[str, Any]],
        options: GenerateOptions | None,
        *,
        cached: bool,
    ) -> dict[str, Any]:
        opts = options or GenerateOptions()
        body: dict[str, Any] = {"max_tokens": self.max_tokens, **self.generation_options}
        self._lay_options(body, opts, stop_key="stop_sequences")
        if tools:
            body["tools"] = self._wire_tools.get(tools) if cached else to_anthropic_tools(tools)
            if opts.tool_choice is not None:
                body["tool_choice"] = to_anthropic_tool_choice(opts.tool_choice)
        else:
            body.pop("tool_choice", None)  # rejected without tools (the summary call)
        turns: list[dict[str, Any]] | RawJSON
        if cached:
            system, items = join_anthropic_json(self._wire_messages.values(messages))
            turns = RawJSON(items)
        else:
            system, turns = to_anthropic_messages(messages)
        for key in ("model", "messages", "stream", "system"):
            body.pop(key, None)
        head: dict[str, Any] = {"model": self.name}
        if system:
            head["system"] = system
        return {**head, "messages": turns, **body, "stream": self.streaming}

    def _stream_parser(self) -> StreamParser:
        return AnthropicStreamParser(self._transport)

    def _parse_complete(self, data: Any) -> list[ModelChunk]:
        return parse_message(data)
