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
from collections import deque
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
_JSON_HEADERS = {"Content-Type": "application/json"}
_STREAM_HEADERS = {**_JSON_HEADERS, "Accept": "text/event-stream"}
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
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.max_connections = max_connections
        self._headers = {"User-Agent": f"rx-agent/{__version__}", **(headers or {})}
        if self.api_key:
            self._headers["Authorization"] = f"Bearer {self.api_key}"
        # Client pools by loop. A plain dict, not a WeakKeyDictionary: a client's
        # connections reference their loop, so the key would never be collected.
        # Entries of closed loops are dropped whenever a pool is created.
        self._pools: dict[asyncio.AbstractEventLoop, _ClientPool] = {}
        self._pools_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIChatModel(name={self.name!r}, base_url={self.base_url!r})"

    # ------------------------------------------------------------------ lifecycle

    async def _pool(self) -> _ClientPool:
        loop = asyncio.get_running_loop()
        with self._pools_lock:
            pool = self._pools.get(loop)
        if pool is not None:
            return pool
        verify: ssl.SSLContext | bool = (
            await _default_ssl_context() if self.base_url.startswith("https://") else False
        )
        with self._pools_lock:
            for other in [other for other in self._pools if other.is_closed()]:
                # Its connections died with it; nothing can be closed any more.
                del self._pools[other]
            pool = self._pools.get(loop)
            if pool is None:
                pool = self._pools[loop] = _ClientPool(
                    timeout=self._timeout,
                    headers=self._headers,
                    verify=verify,
                    max_connections=self.max_connections,
                )
        return pool

    async def aclose(self) -> None:
        """Close the HTTP clients (and their pooled connections) of every loop.

        Clients belonging to another, still running loop are closed on that loop; those
        whose loop is already closed are just dropped. The model stays usable: the
        next call opens new clients.
        """
        with self._pools_lock:
            pools = list(self._pools.items())
            self._pools.clear()
        current = asyncio.get_running_loop()
        for loop, pool in pools:
            if loop is current:
                await pool.aclose()
            elif loop.is_running() and not loop.is_closed():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(pool.aclose(), loop))

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
        pool = await self._pool()
        client = await pool.acquire()
        started = time.perf_counter()
        try:
            if self.streaming:
                async for chunk in self._stream(client, payload, started):
                    yield chunk
            else:
                for chunk in await self._complete(client, payload, started):
                    yield chunk
        finally:
            pool.release(client)

    async def _stream(
        self, client: httpx.AsyncClient, payload: bytes, started: float
    ) -> AsyncIterator[ModelChunk]:
        responded = False
        try:
            # ``async with`` closes the response on every exit, cancellation included:
            # disposing the subscription cancels this task, and the connection is
            # closed rather than left streaming into a dead consumer.
            async with client.stream(
                "POST", self.url, content=payload, headers=_STREAM_HEADERS
            ) as response:
                responded = True
                if response.status_code >= 400:
                    raise await self._status_error(response)
                if _is_json(response):
                    # A server that does not stream answers with one JSON completion.
                    await response.aread()
                    for chunk in self._completion_chunks(response, started):
                        yield chunk
                    return
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
        self, client: httpx.AsyncClient, payload: bytes, started: float
    ) -> list[ModelChunk]:
        try:
            response = await client.post(self.url, content=payload, headers=_JSON_HEADERS)
        except httpx.TimeoutException as exc:
            raise self._timeout_error(exc) from exc
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, False) from exc
        if response.status_code >= 400:
            raise await self._status_error(response)
        return self._completion_chunks(response, started)

    def _completion_chunks(self, response: httpx.Response, started: float) -> list[ModelChunk]:
        """The chunks of a complete (read) non-streaming response."""
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


# ------------------------------------------------------------------- client pools

# How long an unused connection is kept (httpx's default keep-alive expiry).
_KEEPALIVE_SECONDS = 5.0


class _ClientPool:
    """The HTTP clients of one event loop, each holding at most one connection.

    A call borrows an idle client (the most recently used one, whose connection is the
    most likely to be still open) or opens a new one, up to ``max_connections``; past
    that, calls wait their turn in order.

    Why not one ``httpx.AsyncClient`` with a pool of many connections: httpcore's pool
    re-scans all of its connections (for every idle one, all of them again) whenever a
    request starts or ends, and several requests starting at once get assigned the
    same idle connection and retry. With hundreds of concurrent streams that
    bookkeeping dominates: 200 concurrent calls took 2.5x (cold) to 13x (warm pool)
    the time of one. With one connection per client it costs nothing.

    Only used from its loop's thread, so it needs no lock.
    """

    def __init__(
        self,
        *,
        timeout: httpx.Timeout,
        headers: Mapping[str, str],
        verify: ssl.SSLContext | bool,
        max_connections: int,
    ) -> None:
        self._timeout = timeout
        self._headers = dict(headers)
        self._verify = verify
        self._max = max_connections
        self._idle: list[tuple[httpx.AsyncClient, float]] = []  # a stack: newest last
        self._busy: set[httpx.AsyncClient] = set()
        self._waiters: deque[asyncio.Future[httpx.AsyncClient]] = deque()
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def clients(self) -> list[httpx.AsyncClient]:
        return [client for client, _ in self._idle] + list(self._busy)

    async def acquire(self) -> httpx.AsyncClient:
        if self._closed:
            raise ModelConnectionError("the model was closed (aclose) while a call started")
        self._expire()
        if self._idle:
            client, _ = self._idle.pop()
        elif len(self._busy) < self._max:
            client = httpx.AsyncClient(
                timeout=self._timeout,
                headers=self._headers,
                verify=self._verify,
                limits=httpx.Limits(
                    max_connections=1,
                    max_keepalive_connections=1,
                    keepalive_expiry=_KEEPALIVE_SECONDS,
                ),
            )
        else:
            waiter: asyncio.Future[httpx.AsyncClient] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                client = await waiter  # release() hands over a client already marked busy
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self.release(waiter.result())  # handed over just as we were cancelled
                raise
            return client
        self._busy.add(client)
        return client

    def release(self, client: httpx.AsyncClient) -> None:
        if client not in self._busy:
            return  # the pool was closed meanwhile
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(client)  # stays busy, now for the waiter
                return
        self._busy.discard(client)
        self._idle.append((client, time.monotonic()))

    def _expire(self) -> None:
        """Close clients unused for longer than the keep-alive expiry (oldest first).

        httpx closes an expired connection only when its client is used again; an idle
        client at the bottom of the stack might never be, so it is closed here.
        """
        limit = time.monotonic() - _KEEPALIVE_SECONDS
        stale = 0
        while stale < len(self._idle) and self._idle[stale][1] < limit:
            stale += 1
        if stale:
            expired, self._idle = self._idle[:stale], self._idle[stale:]
            for client, _ in expired:
                task = asyncio.get_running_loop().create_task(client.aclose())
                self._closing.add(task)  # keep a reference until it is done
                task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        self._closed = True
        clients = self.clients
        self._idle.clear()
        self._busy.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(
                    ModelConnectionError("the model was closed (aclose) while a call waited")
                )
        for client in clients:
            await client.aclose()
        if self._closing:
            await asyncio.wait(list(self._closing))


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


def _is_json(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0].strip().lower() == "application/json"


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
