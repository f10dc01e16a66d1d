"""``OpenAIChatModel``: a streaming adapter for OpenAI-compatible chat-completions APIs.

It talks HTTP itself (``httpx``) instead of going through the ``openai`` SDK so that it
controls what the runtime depends on: cancellation closes the HTTP response at once,
errors map onto the typed :mod:`~rx_agent.model.errors` (the runtime owns retrying),
and servers that only approximate the protocol (Ollama, vLLM, DashScope, ...) are read
leniently (``reasoning`` / ``reasoning_content``, tool calls without ``index``).

The provider-neutral HTTP side (client pools, error mapping, event streams) is in
:mod:`rx_agent.model._http`; the wire format in ``_openai_format`` and
``_openai_stream``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from rx_agent.message import Msg
from rx_agent.options import GenerateOptions

from ._http import bearer_headers, resolve_base_url
from ._http_model import HTTPChatModel, StreamParser
from ._openai_format import (
    join_openai_json,
    openai_message_json,
    parse_completion,
    to_openai_messages,
    to_openai_tool_choice,
    to_openai_tools,
)
from ._openai_stream import OpenAIStreamParser
from ._wire_cache import RawJSON, ToolsCache, WireCache, encode_json
from .base import ModelChunk

__all__ = ["OpenAIChatModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def _tools_json(tools: Sequence[Mapping[str, Any]]) -> RawJSON:
    return RawJSON([encode_json(t) for t in to_openai_tools(tools)])


class OpenAIChatModel(HTTPChatModel):
    """A model served over the OpenAI chat-completions API (or a compatible one).

    ``model`` is the model name sent to the server (and :attr:`name`). ``base_url``
    defaults to ``$OPENAI_BASE_URL``, then ``https://api.openai.com/v1``; ``api_key``
    to ``$OPENAI_API_KEY`` (no ``Authorization`` header is sent when there is none,
    which local servers accept). Other keyword arguments are request fields sent with
    every call (``temperature=0.2``, ``seed=7``, ``reasoning_effort="low"``, ...);
    the per-call :class:`GenerateOptions` are laid over them.

    Adapter settings (keyword-only, not sent to the server):

    * ``stream``: ``True`` (default) streams server-sent events; ``False`` makes one
      plain request and turns the whole answer into the same chunks.
    * ``timeout``: seconds to wait for each read or write (so a slow but steady stream
      is fine); ``None`` waits forever. ``connect_timeout``: seconds to connect.
    * ``headers``: extra HTTP headers (e.g. ``{"OpenAI-Organization": ...}``).
    * ``max_connections``: at most this many calls run at once (one connection each);
      more wait for a free connection, in order.
    * ``structured_output``: ``"tool"`` (default) answers ``structured_model=`` calls
      through a response tool (any tool-calling server can); ``"json_schema"`` sends
      the schema as ``response_format`` (OpenAI's structured outputs, and servers that
      implement it).

    Connections are pooled per event loop the model is used from (a connection belongs
    to the loop that opened it), so one model can serve a runtime-owned loop and the
    caller's loop alike. Call :meth:`aclose` (or use ``async with model:``) to close
    them.
    """

    provider = "openai"
    _answer_kind = "chat completion"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        stream: bool = True,
        timeout: float | None = 120.0,
        connect_timeout: float | None = 10.0,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 1000,
        structured_output: str = "tool",
        **generation_options: Any,
    ) -> None:
        if not model:
            raise ValueError("OpenAIChatModel needs a model name")
        if structured_output not in ("tool", "json_schema"):
            raise ValueError(f'structured_output must be "tool" or "json_schema", got '
                             f"{structured_output!r}")
        self.supports_response_schema = structured_output == "json_schema"
        self.name = model
        self.base_url = resolve_base_url(base_url, "OPENAI_BASE_URL", DEFAULT_BASE_URL)
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._setup_http(
            url=f"{self.base_url}/chat/completions",
            stream=stream,
            timeout=timeout,
            connect_timeout=connect_timeout,
            headers=bearer_headers(self.api_key, headers),
            max_connections=max_connections,
            generation_options=generation_options,
            key_hint="OPENAI_API_KEY or api_key=",
        )
        # Each message's wire form, and the tool schemas', made once (see _wire_cache).
        self._wire_messages = WireCache(openai_message_json)
        self._wire_tools = ToolsCache(_tools_json)

    def __repr__(self) -> str:
        return f"OpenAIChatModel(name={self.name!r}, base_url={self.base_url!r})"

    # -------------------------------------------------------------------- request

    def _body(
        self,
        messages: Sequence[Msg],
        tools: Sequence[Mapping[str, Any]],
        options: GenerateOptions | None,
        *,
        cached: bool,
    ) -> dict[str, Any]:
        opts = options or GenerateOptions()
        body: dict[str, Any] = dict(self.generation_options)
        self._lay_options(body, opts)
        schema = opts.response_schema
        if schema is not None and self.supports_response_schema:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": schema["name"], "schema": schema["schema"], "strict": False}}
        if tools:
            body["tools"] = self._wire_tools.get(tools) if cached else to_openai_tools(tools)
            if opts.tool_choice is not None:
                body["tool_choice"] = to_openai_tool_choice(opts.tool_choice)
        else:
            # OpenAI rejects these without tools, and a call without tools (the
            # max-iterations summary) must not fail for options meant for the others.
            body.pop("tool_choice", None)
            body.pop("parallel_tool_calls", None)
        # The call's identity and transport are not options: whatever the options
        # say, these are set here (and model and messages lead, for readable logs).
        for key in ("model", "messages", "stream"):
            body.pop(key, None)
        body = {
            "model": self.name,
            "messages": RawJSON(join_openai_json(self._wire_messages.values(messages)))
            if cached else to_openai_messages(messages),
            **body,
            "stream": self.streaming,
        }
        if self.streaming:
            extra_stream_options = body.get("stream_options", {})
            if extra_stream_options is None:
                body.pop("stream_options")  # explicitly disabled for a server that rejects it
            else:
                body["stream_options"] = {"include_usage": True, **extra_stream_options}
        else:
            body.pop("stream_options", None)
        return body

    def _stream_parser(self) -> StreamParser:
        return OpenAIStreamParser(self._transport)

    def _parse_complete(self, data: Any) -> list[ModelChunk]:
        return parse_completion(data).chunks()
