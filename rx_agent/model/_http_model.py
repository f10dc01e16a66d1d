"""What every HTTP model adapter shares: settings, the per-loop client pools and their
closing, and one call's course (encode the body, POST it, read the event stream or
the one JSON answer). An adapter supplies its request body, its stream parser and its
reading of a complete answer; see ``openai.py`` and ``anthropic.py``.
"""

from __future__ import annotations

import abc
import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol, Self

import httpx

from rx_agent.message import Msg
from rx_agent.options import GenerateOptions

from ._http import EventParser, HTTPTransport, is_json, read_events
from ._http_pool import ClientPool
from ._wire_cache import encode_body
from .base import AsyncChatModel, ModelChunk, UsageChunk
from .errors import ModelError, ModelRequestError, ModelResponseError

__all__ = ["HTTPChatModel", "StreamParser"]


class StreamParser(EventParser, Protocol):
    """An :class:`EventParser` that also ends the stream: the held usage and finish
    chunks (``elapsed``: seconds since the request), or a typed error when the stream
    stopped before its end."""

    def finish(self, elapsed: float) -> list[ModelChunk]: ...


class HTTPChatModel(AsyncChatModel):
    """An adapter that POSTs JSON to one URL (see the module docstring)."""

    name: str
    url: str
    streaming: bool
    generation_options: dict[str, Any]
    max_connections: int
    _transport: HTTPTransport
    _answer_kind = "response"  # in the message about a malformed complete answer

    def _setup_http(
        self,
        *,
        url: str,
        stream: bool,
        timeout: float | None,
        connect_timeout: float | None,
        headers: Mapping[str, str],
        max_connections: int,
        generation_options: Mapping[str, Any],
        key_hint: str,
    ) -> None:
        """Check and keep the settings every adapter takes; build the transport."""
        kind = type(self).__name__
        try:
            json.dumps(dict(generation_options))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{kind} generation options must be JSON values: {exc}") from exc
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.url = url
        self.streaming = stream
        self.generation_options = dict(generation_options)
        self.max_connections = max_connections
        self._transport = HTTPTransport(
            url,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            headers=headers,
            max_connections=max_connections,
            key_hint=key_hint,
        )

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

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --------------------------------------------------------------- one call

    def request_body(
        self,
        messages: Sequence[Msg],
        tools: Sequence[Mapping[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> dict[str, Any]:
        """The JSON body this model would send for one call (public for debugging).

        Built afresh: changing it changes nothing else. A call sends the same body
        built from the wire forms the model keeps of each message and of the tool
        schemas (``_wire_cache``), which are shared between calls and never changed."""
        return self._body(messages, tools, options, cached=False)

    @abc.abstractmethod
    def _body(
        self,
        messages: Sequence[Msg],
        tools: Sequence[Mapping[str, Any]],
        options: GenerateOptions | None,
        *,
        cached: bool,
    ) -> dict[str, Any]:
        """The request body; with ``cached``, its messages and tool schemas are the
        JSON kept between calls (``RawJSON``, for :func:`encode_body`)."""

    def _call_payload(
        self,
        messages: Sequence[Msg],
        tools: Sequence[Mapping[str, Any]],
        options: GenerateOptions | None,
    ) -> bytes:
        """What a call sends: ``request_body``'s JSON, with the messages and the tool
        schemas as kept encoded between calls (a subclass that overrides
        :meth:`request_body` is asked instead)."""
        if type(self).request_body is HTTPChatModel.request_body:
            return encode_body(self._body(messages, tools, options, cached=True))
        return json.dumps(self.request_body(messages, tools, options),
                          ensure_ascii=False).encode()

    @staticmethod
    def _lay_options(body: dict[str, Any], opts: GenerateOptions, stop_key: str = "stop") -> None:
        """Lay the sampling options a call sets over ``body``, then its ``extra`` keys
        (the fields every provider names alike; ``stop_key`` is the stop field's name)."""
        if opts.temperature is not None:
            body["temperature"] = opts.temperature
        if opts.top_p is not None:
            body["top_p"] = opts.top_p
        if opts.max_tokens is not None:
            body["max_tokens"] = opts.max_tokens
        if opts.stop is not None:
            body[stop_key] = list(opts.stop)
        body.update(opts.extra)

    @abc.abstractmethod
    def _stream_parser(self) -> StreamParser:
        """A parser for one call's event stream."""

    @abc.abstractmethod
    def _parse_complete(self, data: Any) -> list[ModelChunk]:
        """The chunks a stream would have carried, from a complete JSON answer; a
        ``ValueError`` when it is not the expected shape."""

    async def astream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]],
        options: GenerateOptions,
    ) -> AsyncIterator[ModelChunk]:
        transport = self._transport
        try:
            # Encoded here rather than by httpx so that a value JSON cannot carry
            # (in a tool schema, say) fails as a typed, non-retryable error.
            payload = self._call_payload(messages, tools, options)
        except (TypeError, ValueError, KeyError) as exc:
            raise ModelRequestError(f"cannot build the request for {transport.shown_url}: "
                                    f"{exc}", url=transport.shown_url) from exc
        try:
            async with transport.client() as client:
                started = time.perf_counter()
                if not self.streaming:
                    response = await transport.post(client, payload)
                    for chunk in self._completion_chunks(response, started):
                        yield chunk
                    return
                async with transport.stream(client, payload) as response:
                    if is_json(response):
                        # A server that does not stream answers with one JSON body.
                        await response.aread()
                        for chunk in self._completion_chunks(response, started):
                            yield chunk
                        return
                    parser = self._stream_parser()
                    async for chunk in read_events(response, parser):
                        yield chunk
                    for chunk in parser.finish(time.perf_counter() - started):
                        yield chunk
        except ModelError as exc:
            # The transport quotes what the server said without secrets; this covers
            # every other message an adapter builds (its parser's, say) as well.
            transport.scrub(exc)
            raise

    def _completion_chunks(self, response: httpx.Response, started: float) -> list[ModelChunk]:
        """The chunks of a complete (read) non-streaming response; usage and finish
        come last, as from a stream."""
        transport = self._transport
        data = transport.json(response)
        try:
            chunks = self._parse_complete(data)
        except ValueError as exc:
            raise ModelResponseError(
                f"{transport.shown_url} answered with an unexpected {self._answer_kind}: "
                f"{transport.quote(str(exc))}", url=transport.shown_url,
            ) from None
        elapsed = time.perf_counter() - started
        for chunk in chunks:
            if isinstance(chunk, UsageChunk):
                chunk.usage = chunk.usage.model_copy(update={"time": elapsed})
        return chunks
