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

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from rx_agent._version import __version__
from rx_agent.message import Msg
from rx_agent.options import GenerateOptions

from ._http import HTTPTransport, excerpt, is_json, read_events
from ._http_pool import ClientPool
from ._openai_format import (
    parse_completion,
    to_openai_messages,
    to_openai_tool_choice,
    to_openai_tools,
)
from ._openai_stream import OpenAIStreamParser
from .base import AsyncChatModel, ModelChunk
from .errors import ModelRequestError, ModelResponseError

__all__ = ["OpenAIChatModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIChatModel(AsyncChatModel):
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

    Connections are pooled per event loop the model is used from (a connection belongs
    to the loop that opened it), so one model can serve a runtime-owned loop and the
    caller's loop alike. Call :meth:`aclose` (or use ``async with model:``) to close
    them.
    """

    provider = "openai"

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
        **generation_options: Any,
    ) -> None:
        if not model:
            raise ValueError("OpenAIChatModel needs a model name")
        resolved = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        if not resolved.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {resolved!r}")
        try:
            json.dumps(generation_options)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"OpenAIChatModel generation options must be JSON values: {exc}"
            ) from exc
        self.name = model
        self.base_url = resolved.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.streaming = stream
        self.generation_options: dict[str, Any] = dict(generation_options)
        self.url = f"{self.base_url}/chat/completions"
        http_timeout = httpx.Timeout(timeout, connect=connect_timeout)
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.max_connections = max_connections
        http_headers = {"User-Agent": f"rx-agent/{__version__}", **(headers or {})}
        if self.api_key:
            http_headers["Authorization"] = f"Bearer {self.api_key}"
        self._transport = HTTPTransport(
            self.url,
            timeout=http_timeout,
            headers=http_headers,
            max_connections=max_connections,
            key_hint="OPENAI_API_KEY or api_key=",
        )

    def __repr__(self) -> str:
        return f"OpenAIChatModel(name={self.name!r}, base_url={self.base_url!r})"

    # ------------------------------------------------------------------ lifecycle

    @property
    def _pools(self) -> dict[asyncio.AbstractEventLoop, ClientPool]:
        """The client pool of each event loop (for tests and benchmarks)."""
        return self._transport.pools.by_loop

    async def aclose(self) -> None:
        """Close the HTTP clients (and their pooled connections) of every loop.

        Clients belonging to another, still running loop are closed on that loop; those
        whose loop is already closed are just dropped. The model stays usable: the
        next call opens new clients.
        """
        await self._transport.aclose()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -------------------------------------------------------------------- request

    def request_body(
        self,
        messages: Sequence[Msg],
        tools: Sequence[Mapping[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> dict[str, Any]:
        """The JSON body this model would send for one call (public for debugging)."""
        opts = options or GenerateOptions()
        body: dict[str, Any] = dict(self.generation_options)
        if opts.temperature is not None:
            body["temperature"] = opts.temperature
        if opts.top_p is not None:
            body["top_p"] = opts.top_p
        if opts.max_tokens is not None:
            body["max_tokens"] = opts.max_tokens
        if opts.stop is not None:
            body["stop"] = list(opts.stop)
        body.update(opts.extra)
        wire_tools = to_openai_tools(tools)
        if wire_tools:
            body["tools"] = wire_tools
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
            "messages": to_openai_messages(messages),
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

    async def astream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]],
        options: GenerateOptions,
    ) -> AsyncIterator[ModelChunk]:
        try:
            body = self.request_body(messages, tools, options)
            # Encoded here rather than by httpx so that a value JSON cannot carry
            # (in a tool schema, say) fails as a typed, non-retryable error.
            payload = json.dumps(body, ensure_ascii=False).encode()
        except (TypeError, ValueError, KeyError) as exc:
            raise ModelRequestError(f"cannot build the request for {self.url}: {exc}") from exc
        transport = self._transport
        async with transport.client() as client:
            started = time.perf_counter()
            if not self.streaming:
                response = await transport.post(client, payload)
                for chunk in self._completion_chunks(response, started):
                    yield chunk
                return
            async with transport.stream(client, payload) as response:
                if is_json(response):
                    # A server that does not stream answers with one JSON completion.
                    await response.aread()
                    for chunk in self._completion_chunks(response, started):
                        yield chunk
                    return
                parser = OpenAIStreamParser(self.url, transport.payload_error)
                async for chunk in read_events(response, parser):
                    yield chunk
                for chunk in parser.finish(time.perf_counter() - started):
                    yield chunk

    def _completion_chunks(self, response: httpx.Response, started: float) -> list[ModelChunk]:
        """The chunks of a complete (read) non-streaming response."""
        try:
            data = response.json()
        except ValueError as exc:
            raise ModelResponseError(
                f"{self.url} answered {response.status_code} with a body that is not JSON: "
                f"{excerpt(response.text)}"
            ) from exc
        if isinstance(data, dict) and data.get("error"):
            raise self._transport.payload_error(data)
        try:
            parsed = parse_completion(data)
        except ValueError as exc:
            raise ModelResponseError(
                f"{self.url} answered with an unexpected chat completion: {exc}"
            ) from exc
        if parsed.usage is not None:
            parsed.usage = parsed.usage.model_copy(
                update={"time": time.perf_counter() - started}
            )
        return parsed.chunks()
