"""``OpenAIChatModel``: a streaming adapter for OpenAI-compatible chat-completions APIs.

It talks HTTP itself (``httpx``) instead of going through the ``openai`` SDK so that it
controls what the runtime depends on: cancellation closes the HTTP response at once,
errors map onto the typed :mod:`~rx_agent.model.errors` (the runtime owns retrying),
and servers that only approximate the protocol (Ollama, vLLM, DashScope, ...) are read
leniently (``reasoning`` / ``reasoning_content``, tool calls without ``index``).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import os
import ssl
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import httpx

from rx_agent._record import new_id
from rx_agent._version import __version__
from rx_agent.message import ChatUsage, Msg
from rx_agent.options import GenerateOptions

from ._openai_format import (
    content_text,
    parse_completion,
    parse_usage,
    reasoning_text,
    to_openai_messages,
    to_openai_tool_choice,
    to_openai_tools,
)
from ._sse import ServerSentEvent, SSEDecoder
from .base import (
    AsyncChatModel,
    FinishChunk,
    ModelChunk,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from .errors import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelRateLimitError,
    ModelRequestError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
)

__all__ = ["OpenAIChatModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"

# After [DONE] the server normally ends the body at once; reading that end lets the
# connection go back to the pool. A server that keeps the body open is not waited
# for longer than this: the connection is dropped instead.
_DRAIN_SECONDS = 0.5
# Error bodies are quoted in exception messages; keep those readable.
_MAX_DETAIL = 500

# One slot rather than a module global rebound with ``global``.
_ssl_context: list[ssl.SSLContext] = []


async def _default_ssl_context() -> ssl.SSLContext:
    """The process-wide TLS context, built once in a worker thread.

    Building it reads the CA bundle from disk (tens of milliseconds), which must not
    happen on the event loop; ``httpx.AsyncClient()`` would do exactly that.
    """
    if not _ssl_context:
        context = await asyncio.to_thread(httpx.create_ssl_context)
        # Two loops may race here; both contexts are equivalent, the first one wins.
        if not _ssl_context:
            _ssl_context.append(context)
    return _ssl_context[0]


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
    * ``timeout``: seconds to wait for each read/write (so a slow but steady stream is
      fine) ; ``None`` waits forever. ``connect_timeout``: seconds to connect.
    * ``headers``: extra HTTP headers (e.g. ``{"OpenAI-Organization": ...}``).
    * ``max_connections``: the size of the connection pool (one per concurrent call).

    One ``httpx.AsyncClient`` is kept per event loop the model is used from (a client's
    connections belong to the loop that opened them). Call :meth:`aclose` (or use
    ``async with model:``) to release them.
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
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._limits = httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=min(100, max_connections),
        )
        self._headers = {"User-Agent": f"rx-agent/{__version__}", **(headers or {})}
        if self.api_key:
            self._headers["Authorization"] = f"Bearer {self.api_key}"
        # Clients by loop. A plain dict, not a WeakKeyDictionary: a client's
        # connections reference their loop, so the key would never be collected.
        # Entries of closed loops are dropped whenever a client is created.
        self._clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}
        self._clients_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIChatModel(name={self.name!r}, base_url={self.base_url!r})"

    # ------------------------------------------------------------------ lifecycle

    async def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        with self._clients_lock:
            client = self._clients.get(loop)
        if client is not None and not client.is_closed:
            return client
        verify: ssl.SSLContext | bool = (
            await _default_ssl_context() if self.base_url.startswith("https://") else False
        )
        with self._clients_lock:
            for other in [other for other in self._clients if other.is_closed()]:
                # Its connections died with it; nothing can be closed any more.
                del self._clients[other]
            client = self._clients.get(loop)
            if client is None or client.is_closed:
                client = httpx.AsyncClient(
                    timeout=self._timeout,
                    limits=self._limits,
                    headers=self._headers,
                    verify=verify,
                )
                self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the HTTP clients (and their pooled connections) of every loop.

        A client belonging to another, still running loop is closed on that loop; one
        whose loop is already closed is just dropped. The model stays usable: the next
        call opens a new client.
        """
        with self._clients_lock:
            clients = list(self._clients.items())
            self._clients.clear()
        current = asyncio.get_running_loop()
        for loop, client in clients:
            if loop is current:
                await client.aclose()
            elif loop.is_running() and not loop.is_closed():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(client.aclose(), loop))

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
        # Set last so no option can break the call's identity or transport.
        body["model"] = self.name
        body["messages"] = to_openai_messages(messages)
        body["stream"] = self.streaming
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
        body = self.request_body(messages, tools, options)
        client = await self._client()
        started = time.perf_counter()
        if self.streaming:
            async for chunk in self._stream(client, body, started):
                yield chunk
        else:
            for chunk in await self._complete(client, body, started):
                yield chunk

    async def _stream(
        self, client: httpx.AsyncClient, body: dict[str, Any], started: float
    ) -> AsyncIterator[ModelChunk]:
        responded = False
        try:
            # ``async with`` closes the response on every exit, cancellation included:
            # disposing the subscription cancels this task, and the connection is
            # closed rather than left streaming into a dead consumer.
            async with client.stream(
                "POST", self.url, json=body, headers={"Accept": "text/event-stream"}
            ) as response:
                responded = True
                if response.status_code >= 400:
                    raise await self._status_error(response)
                parser = _StreamParser(self.url)
                decoder = SSEDecoder()
                pieces = response.aiter_bytes()
                async for piece in pieces:
                    for event in decoder.feed(piece):
                        for chunk in parser.event(event):
                            yield chunk
                        if parser.done:
                            break
                    if parser.done:
                        break
                else:
                    for event in decoder.close():
                        for chunk in parser.event(event):
                            yield chunk
                if parser.done:
                    await _drain(pieces)
                for chunk in parser.finish(time.perf_counter() - started):
                    yield chunk
        except httpx.TimeoutException as exc:
            raise self._timeout_error(exc) from exc
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, responded) from exc

    async def _complete(
        self, client: httpx.AsyncClient, body: dict[str, Any], started: float
    ) -> list[ModelChunk]:
        try:
            response = await client.post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise self._timeout_error(exc) from exc
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, False) from exc
        if response.status_code >= 400:
            raise await self._status_error(response)
        try:
            data = response.json()
        except ValueError as exc:
            raise ModelResponseError(
                f"{self.url} answered {response.status_code} with a body that is not JSON: "
                f"{_excerpt(response.text)}"
            ) from exc
        if isinstance(data, dict) and data.get("error"):
            raise _payload_error(data, self.url)
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

    # --------------------------------------------------------------------- errors

    async def _status_error(self, response: httpx.Response) -> ModelError:
        try:
            await response.aread()
            detail = _error_detail(response.content)
        except httpx.HTTPError:
            detail = ""  # the status alone still says what happened
        return _error_for_status(
            response.status_code, detail, self.url, _retry_after(response.headers)
        )

    def _timeout_error(self, exc: httpx.TimeoutException) -> ModelTimeoutError:
        what = {
            httpx.ConnectTimeout: f"connecting to {self.url}",
            httpx.PoolTimeout: f"waiting for a free connection to {self.url}",
            httpx.WriteTimeout: f"sending the request to {self.url}",
        }.get(type(exc), f"waiting for data from {self.url}")
        seconds = self._timeout.connect if isinstance(exc, httpx.ConnectTimeout) else (
            self._timeout.read
        )
        return ModelTimeoutError(f"timed out after {seconds}s {what}")

    def _transport_error(self, exc: httpx.HTTPError, responded: bool) -> ModelError:
        reason = str(exc) or type(exc).__name__
        if responded:
            # The connection broke while the body was streaming: the answer is cut short.
            return ModelResponseError(f"the response stream from {self.url} broke off: {reason}")
        if isinstance(exc, httpx.ConnectError):
            return ModelConnectionError(f"cannot connect to {self.url}: {reason}")
        return ModelConnectionError(f"the request to {self.url} failed: {reason}")


# ------------------------------------------------------------------ stream parsing


@dataclass(slots=True)
class _ToolCallState:
    id: str | None
    name: str | None
    pending: str = ""  # arguments that arrived before the name
    started: bool = False


class _StreamParser:
    """Turns the ``chat.completion.chunk`` payloads of one stream into chunks.

    Only choice 0 is read (the runtime asks for one). Usage is held until the end
    because some servers repeat it (cumulatively) on every chunk; the finish reason
    too, so the last chunks are always usage then finish, as from any model.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.done = False
        self.finish_reason: str | None = None
        self.usage: ChatUsage | None = None
        self._calls: dict[int, _ToolCallState] = {}
        self._index_by_id: dict[str, int] = {}
        self._last_index: int | None = None

    def event(self, event: ServerSentEvent) -> list[ModelChunk]:
        data = event.data.strip()
        if data == "[DONE]":
            self.done = True
            return []
        if not data:
            return []
        try:
            payload = json.loads(data)
        except ValueError as exc:
            raise ModelResponseError(
                f"malformed JSON in the event stream from {self.url}: {exc} "
                f"(data: {_excerpt(data)})"
            ) from exc
        if not isinstance(payload, dict):
            raise ModelResponseError(
                f"unexpected event in the stream from {self.url}: {_excerpt(data)}"
            )
        if event.event == "error" or payload.get("error"):
            raise _payload_error(payload, self.url)
        return self._payload(payload)

    def _payload(self, payload: dict[str, Any]) -> list[ModelChunk]:
        out: list[ModelChunk] = []
        usage = payload.get("usage")
        if isinstance(usage, dict):
            self.usage = parse_usage(usage)
        choices = payload.get("choices")
        if not isinstance(choices, list):
            return out
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                thinking = reasoning_text(delta)
                if thinking:
                    out.append(ThinkingChunk(thinking))
                text = content_text(delta.get("content"))
                if text:
                    out.append(TextChunk(text))
                refusal = delta.get("refusal")
                if isinstance(refusal, str) and refusal:
                    # A refusal is the visible answer; dropping it would look like
                    # an empty reply.
                    out.append(TextChunk(refusal))
                calls = delta.get("tool_calls")
                if isinstance(calls, list):
                    out.extend(self._tool_calls(calls))
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
        return out

    def _tool_calls(self, calls: list[Any]) -> list[ModelChunk]:
        out: list[ModelChunk] = []
        for call in calls:
            if not isinstance(call, dict):
                continue
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
            name = function.get("name") if isinstance(function.get("name"), str) else None
            arguments = function.get("arguments")
            if arguments is None:
                arguments = ""
            elif not isinstance(arguments, str):
                arguments = json.dumps(arguments)  # some servers send an object
            index = self._index(call.get("index"), call_id)
            state = self._calls.get(index)
            if state is None:
                state = self._calls[index] = _ToolCallState(call_id, name or None)
            elif state.started:
                # Later pieces: only argument fragments matter (some servers repeat
                # the id and name on every piece).
                if arguments:
                    out.append(ToolCallChunk(index, arguments=arguments))
                continue
            else:
                state.id = state.id or call_id
                state.name = state.name or name or None
            state.pending += arguments
            if call_id:
                self._index_by_id[call_id] = index
            if state.name:
                out.append(self._start(index, state))
        return out

    def _index(self, index: Any, call_id: str | None) -> int:
        if isinstance(index, int) and not isinstance(index, bool):
            self._last_index = index
            return index
        # No index (Gemini's compatible endpoint, some proxies): calls come whole or
        # continue the last one; a new id starts a new call.
        if call_id is not None and call_id in self._index_by_id:
            result = self._index_by_id[call_id]
        elif call_id is None and self._last_index is not None:
            result = self._last_index
        else:
            result = max(self._calls, default=-1) + 1
        self._last_index = result
        return result

    @staticmethod
    def _start(index: int, state: _ToolCallState) -> ToolCallChunk:
        state.started = True
        if state.id is None:
            state.id = f"call_{new_id()}"  # the runtime matches results by id
        chunk = ToolCallChunk(index, state.id, state.name or "", state.pending)
        state.pending = ""
        return chunk

    def finish(self, elapsed: float) -> list[ModelChunk]:
        """The closing chunks; raises when the stream ended before the answer did."""
        if not self.done and self.finish_reason is None:
            raise ModelResponseError(
                f"the event stream from {self.url} ended before the answer was complete "
                "(no finish_reason and no [DONE])"
            )
        out: list[ModelChunk] = []
        for index, state in self._calls.items():
            if not state.started:
                # The name never came. Pass the call on anyway: the runtime answers
                # an unknown tool with an error the model can react to.
                out.append(self._start(index, state))
        if self.usage is not None:
            out.append(UsageChunk(self.usage.model_copy(update={"time": elapsed})))
        if self.finish_reason is not None:
            out.append(FinishChunk(self.finish_reason))
        return out


async def _drain(pieces: AsyncIterator[bytes]) -> None:
    """Read what follows ``[DONE]`` (normally just the end of the body), briefly."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in pieces:
                pass


# ---------------------------------------------------------------- error helpers


def _excerpt(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _MAX_DETAIL else text[:_MAX_DETAIL] + "..."


def _error_detail(content: bytes) -> str:
    """The server's own error message, from the body shapes servers use."""
    text = content.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        return _excerpt(text)
    return _message_of(data) or _excerpt(text)


def _message_of(data: Any) -> str:
    if not isinstance(data, dict):
        return ""
    error = data.get("error")
    if isinstance(error, str):
        return error  # Ollama: {"error": "model 'x' not found"}
    if isinstance(error, dict):
        message = str(error.get("message") or "").strip()
        tags = [str(error[k]) for k in ("type", "code") if error.get(k) not in (None, "")]
        tags = [t for t in dict.fromkeys(tags) if t not in message]
        return f"{message} ({', '.join(tags)})" if tags and message else message or ", ".join(tags)
    for key in ("message", "detail"):  # vLLM / FastAPI shapes
        if isinstance(data.get(key), str):
            return str(data[key])
    return ""


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` (OpenAI) or ``Retry-After``."""
    millis = headers.get("retry-after-ms")
    if millis:
        with contextlib.suppress(ValueError):
            return max(0.0, float(millis) / 1000)
    value = headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_for_status(
    status: int, detail: str, url: str, retry_after: float | None
) -> ModelError:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    message = f"{url} answered {status}{' ' + phrase if phrase else ''}"
    if detail:
        message += f": {detail}"
    if status in (401, 403):
        hint = " (check the API key: OPENAI_API_KEY or api_key=)" if status == 401 else ""
        return ModelAuthenticationError(message + hint, status_code=status)
    if status == 429:
        return ModelRateLimitError(message, status_code=status, retry_after=retry_after)
    if status >= 500:
        return ModelServerError(message, status_code=status, retry_after=retry_after)
    # 408 (request timeout) and 409 (lock conflict) are transient although 4xx.
    return ModelRequestError(
        message, status_code=status, retry_after=retry_after, retryable=status in (408, 409)
    )


def _payload_error(payload: dict[str, Any], url: str) -> ModelError:
    """An error the server reported inside a 200 response (often mid-stream)."""
    detail = _message_of(payload) or _excerpt(json.dumps(payload))
    error = payload.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    if isinstance(code, int) and 400 <= code < 600:
        return _error_for_status(code, f"{detail} (reported in the response body)", url, None)
    return ModelServerError(f"{url} reported an error in the response: {detail}")
