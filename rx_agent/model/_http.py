"""The HTTP side of a model adapter, shared by every provider.

:class:`HTTPTransport` posts JSON to one URL through per-loop client pools
(:mod:`rx_agent.model._http_pool`), maps every failure (an HTTP error status, a timeout,
a broken connection, an error reported inside a 200 body) onto the typed errors of
:mod:`rx_agent.model.errors`, and closes a streamed response on every exit, cancellation
included. What an error quotes of the server's answer passes through the transport's
:class:`~rx_agent.model._redact.Redactor` first, so no message carries the API key.
:func:`read_events` feeds a ``text/event-stream`` body to a provider's
:class:`EventParser`. What is provider-specific (the request body, the events' JSON)
stays in the adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from http import HTTPStatus
from typing import Any, Protocol

import httpx

from .._version import __version__
from ._http_pool import LoopPools
from ._redact import Redactor
from ._sse import ServerSentEvent, SSEDecoder
from .base import ModelChunk
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

__all__ = [
    "EventParser",
    "HTTPTransport",
    "bearer_headers",
    "excerpt",
    "is_json",
    "read_events",
    "resolve_base_url",
]

# After the end-of-stream event the server normally ends the body at once; reading
# that end lets the connection go back to the pool. A server that keeps the body open
# is not waited for longer than this: the connection is dropped instead.
_DRAIN_SECONDS = 0.5
_JSON_HEADERS = {"Content-Type": "application/json"}
_STREAM_HEADERS = {**_JSON_HEADERS, "Accept": "text/event-stream"}
# Error bodies are quoted in exception messages; keep those readable.
_MAX_DETAIL = 500
# How much of a server's text is searched for secrets before it is cut to _MAX_DETAIL:
# cutting first could split a key and leave its first half unrecognised.
_SCAN = 8 * _MAX_DETAIL


def resolve_base_url(given: str | None, env: str, default: str) -> str:
    """``given``, else ``$env``, else ``default``, checked and without a trailing ``/``."""
    resolved = given or os.environ.get(env) or default
    if not resolved.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, got {resolved!r}")
    return resolved.rstrip("/")


def bearer_headers(api_key: str | None, headers: Mapping[str, str] | None) -> dict[str, str]:
    """``headers`` with ``Authorization: Bearer <api_key>`` when there is a key (the
    OpenAI-compatible endpoints)."""
    out = dict(headers or {})
    if api_key:
        out["Authorization"] = f"Bearer {api_key}"
    return out


class HTTPTransport:
    """POSTs to ``url`` for one model, with typed errors.

    ``key_hint`` says where the API key comes from (``"OPENAI_API_KEY or api_key="``);
    a 401 message points there. ``pools`` holds the clients of each event loop. Every
    request says ``User-Agent: rx-agent/<version>`` unless ``headers`` names another.

    Error messages name the endpoint as :attr:`shown_url` (``url`` without credentials)
    and quote the server's text only through :meth:`quote`: the credentials ``headers``
    and ``url`` carry, and any bearer value the server echoes, never appear in them.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: httpx.Timeout,
        headers: Mapping[str, str],
        max_connections: int,
        key_hint: str = "",
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.key_hint = key_hint
        self.redactor = Redactor(headers, url)
        self.shown_url = self.redactor.url
        self.pools = LoopPools(
            timeout=timeout,
            headers={"User-Agent": f"rx-agent/{__version__}", **headers},
            max_connections=max_connections,
            tls=url.startswith("https://"),
        )

    async def aclose(self) -> None:
        await self.pools.aclose()

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[httpx.AsyncClient]:
        """A client of the running loop's pool, borrowed for one call."""
        pool = await self.pools.current()
        client = await pool.acquire()
        try:
            yield client
        finally:
            pool.release(client)

    async def post(self, client: httpx.AsyncClient, payload: bytes) -> httpx.Response:
        """POST a JSON ``payload`` and read the whole answer; an error status raises."""
        try:
            response = await client.post(self.url, content=payload, headers=_JSON_HEADERS)
        except httpx.TimeoutException as exc:
            raise self.timeout_error(exc) from exc
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, False) from exc
        if response.status_code >= 400:
            raise await self.status_error(response)
        return response

    @contextlib.asynccontextmanager
    async def stream(
        self, client: httpx.AsyncClient, payload: bytes
    ) -> AsyncIterator[httpx.Response]:
        """POST a JSON ``payload`` asking for an event stream; the open response.

        An error status raises before the body is read; HTTP failures while the body
        is read (inside the ``async with``) become typed errors too.
        """
        responded = False
        try:
            # ``async with`` closes the response on every exit, cancellation included:
            # disposing the subscription cancels the call's task, and the connection
            # is closed rather than left streaming into a dead consumer.
            async with client.stream(
                "POST", self.url, content=payload, headers=_STREAM_HEADERS
            ) as response:
                responded = True
                if response.status_code >= 400:
                    raise await self.status_error(response)
                yield response
        except httpx.TimeoutException as exc:
            raise self.timeout_error(exc) from exc
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, responded) from exc

    # --------------------------------------------------------------------- errors

    def quote(self, text: str) -> str:
        """The server's ``text`` as an error may quote it: without secrets, cut short."""
        return excerpt(self.redactor.upstream(text[:_SCAN]))

    def scrub(self, error: ModelError) -> ModelError:
        """``error`` (changed in place) without the transport's secrets, whatever built
        its message, and with its ``url`` set when it names the endpoint."""
        message = str(error)
        clean = self.redactor.upstream(message)
        if clean != message:
            error.args = (clean, *error.args[1:])
        if error.url is None and self.shown_url in clean:
            error.url = self.shown_url
        return error

    async def status_error(self, response: httpx.Response) -> ModelError:
        try:
            await response.aread()
            detail = self._error_detail(response.content)
        except httpx.HTTPError:
            detail = ""  # the status alone still says what happened
        return self.error_for_status(
            response.status_code, detail, _retry_after(response.headers)
        )

    def _error_detail(self, content: bytes) -> str:
        """The server's own error message, from the body shapes servers use."""
        text = content.decode("utf-8", errors="replace")
        try:
            data = json.loads(text)
        except ValueError:
            return self.quote(text)
        return self.quote(_message_of(data) or text)

    def timeout_error(self, exc: httpx.TimeoutException) -> ModelTimeoutError:
        url = self.shown_url
        what = {
            httpx.ConnectTimeout: f"connecting to {url}",
            httpx.PoolTimeout: f"waiting for a free connection to {url}",
            httpx.WriteTimeout: f"sending the request to {url}",
        }.get(type(exc), f"waiting for data from {url}")
        seconds = self.timeout.connect if isinstance(exc, httpx.ConnectTimeout) else (
            self.timeout.read
        )
        return ModelTimeoutError(f"timed out after {seconds}s {what}", url=url)

    def transport_error(self, exc: httpx.HTTPError, responded: bool) -> ModelError:
        url = self.shown_url
        reason = self.quote(str(exc)) or type(exc).__name__
        if responded:
            # The connection broke while the body was streaming: the answer is cut short.
            return ModelResponseError(f"the response stream from {url} broke off: {reason}",
                                      url=url)
        if isinstance(exc, httpx.ConnectError):
            return ModelConnectionError(f"cannot connect to {url}: {reason}", url=url)
        return ModelConnectionError(f"the request to {url} failed: {reason}", url=url)

    def error_for_status(
        self, status: int, detail: str, retry_after: float | None
    ) -> ModelError:
        """The typed error of an HTTP ``status``; ``detail``: the server's own words."""
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        url = self.shown_url
        message = f"{url} answered {status}{' ' + phrase if phrase else ''}"
        detail = self.quote(detail)
        if detail:
            message += f": {detail}"
        if status in (401, 403):
            hint = (
                f" (check the API key: {self.key_hint})" if status == 401 and self.key_hint else ""
            )
            return ModelAuthenticationError(message + hint, status_code=status, url=url)
        if status == 429:
            return ModelRateLimitError(message, status_code=status, retry_after=retry_after,
                                       url=url)
        if status >= 500:
            return ModelServerError(message, status_code=status, retry_after=retry_after,
                                    url=url)
        # 408 (request timeout) and 409 (lock conflict) are transient although 4xx.
        return ModelRequestError(
            message, status_code=status, retry_after=retry_after, retryable=status in (408, 409),
            url=url,
        )

    def json(self, response: httpx.Response) -> Any:
        """The JSON of a complete answer; one that is not JSON, or that reports an
        error inside (``{"error": ...}``), raises the typed error."""
        try:
            data = response.json()
        except ValueError:
            # Not chained: the decoder's message may quote the body.
            raise ModelResponseError(
                f"{self.shown_url} answered {response.status_code} with a body that is not "
                f"JSON: {self.quote(response.text)}", url=self.shown_url,
            ) from None
        if isinstance(data, dict) and data.get("error"):
            raise self.payload_error(data)
        return data

    def payload_error(self, payload: dict[str, Any]) -> ModelError:
        """An error the server reported inside a 200 response (often mid-stream)."""
        detail = self.quote(_message_of(payload) or json.dumps(payload))
        error = payload.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        if isinstance(code, str) and code.isdigit():
            code = int(code)
        if isinstance(code, int) and 400 <= code < 600:
            return self.error_for_status(code, f"{detail} (reported in the response body)", None)
        return ModelServerError(f"{self.shown_url} reported an error in the response: {detail}",
                                url=self.shown_url)

    def event_json(self, data: str) -> dict[str, Any]:
        """The JSON object of one server-sent event's data; anything else raises."""
        try:
            payload = json.loads(data)
        except ValueError as exc:
            raise ModelResponseError(
                f"malformed JSON in the event stream from {self.shown_url}: {exc} "
                f"(data: {self.quote(data)})", url=self.shown_url,
            ) from None
        if not isinstance(payload, dict):
            raise ModelResponseError(
                f"unexpected event in the stream from {self.shown_url}: {self.quote(data)}",
                url=self.shown_url)
        return payload


# ------------------------------------------------------------------ event streams


class EventParser(Protocol):
    """One provider's reading of its event stream, fed by :func:`read_events`.

    ``event`` returns the chunks one event carries (and raises typed errors);
    ``done`` turns true at the provider's end-of-stream event.
    """

    done: bool

    def event(self, event: ServerSentEvent) -> list[ModelChunk]: ...


async def read_events(response: httpx.Response, parser: EventParser) -> AsyncIterator[ModelChunk]:
    """The chunks of a streamed response, until the body or ``parser.done`` ends it."""
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


async def _drain(pieces: AsyncIterator[bytes]) -> None:
    """Read what follows the end-of-stream event (normally just the end of the body)."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in pieces:
                pass


# ---------------------------------------------------------------- error helpers


def is_json(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0].strip().lower() == "application/json"


def excerpt(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _MAX_DETAIL else text[:_MAX_DETAIL] + "..."


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
