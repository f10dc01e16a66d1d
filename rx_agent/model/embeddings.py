"""Text embeddings: the :class:`Embeddings` protocol and ``OpenAIEmbeddings``.

``OpenAIEmbeddings`` speaks the OpenAI-compatible ``POST /v1/embeddings`` endpoint
(OpenAI, Ollama, vLLM, LM Studio, ...) over the shared HTTP transport
(:mod:`rx_agent.model._http`): pooled connections per event loop and the typed
:mod:`~rx_agent.model.errors`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import httpx

from ._http import HTTPTransport, bearer_headers, resolve_base_url
from .errors import ModelError, ModelResponseError

__all__ = ["Embeddings", "OpenAIEmbeddings"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


@runtime_checkable
class Embeddings(Protocol):
    """Turns texts into vectors (one per text, in order, all of one length)."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class OpenAIEmbeddings:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint.

    ``base_url`` defaults to ``$OPENAI_BASE_URL``, then ``https://api.openai.com/v1``;
    ``api_key`` to ``$OPENAI_API_KEY`` (no ``Authorization`` header without one, which
    local servers accept). ``dimensions`` is sent when given (models that can shorten
    their vectors honour it). Inputs are sent ``batch_size`` texts per request.
    Failures raise the typed model errors (:class:`~rx_agent.ModelError` and its
    subclasses). Call :meth:`aclose` (or ``async with``) to close the connections.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        dimensions: int | None = None,
        batch_size: int = 128,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 16,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("OpenAIEmbeddings needs a model name")
        resolved = resolve_base_url(base_url, "OPENAI_BASE_URL", DEFAULT_BASE_URL)
        if dimensions is not None and (
            isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1
        ):
            raise ValueError(f"dimensions must be an int >= 1 or None, got {dimensions!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.model = model
        self.base_url = resolved
        self.url = f"{self.base_url}/embeddings"
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.dimensions = dimensions
        self.batch_size = batch_size
        self._transport = HTTPTransport(
            self.url,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            headers=bearer_headers(self.api_key, headers),
            max_connections=max_connections,
            key_hint="OPENAI_API_KEY or api_key=",
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbeddings(model={self.model!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        """Close the pooled connections of every event loop (the object stays usable)."""
        await self._transport.aclose()

    async def __aenter__(self) -> OpenAIEmbeddings:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def request_body(self, texts: Sequence[str]) -> dict[str, Any]:
        """The JSON body of one request (public for debugging)."""
        body: dict[str, Any] = {"model": self.model, "input": list(texts),
                                "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        return body

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts, not one str")
        items = list(texts)
        for i, text in enumerate(items):
            if not isinstance(text, str) or not text:
                # OpenAI rejects empty inputs with a 400 that does not say which one.
                raise ValueError(f"text #{i} to embed must be a non-empty str, got {text!r}")
        vectors: list[list[float]] = []
        url = self._transport.shown_url
        try:
            for start in range(0, len(items), self.batch_size):
                vectors.extend(await self._batch(items[start:start + self.batch_size]))
        except ModelError as exc:
            self._transport.scrub(exc)  # no message carries the key (see _http.py)
            raise
        if vectors and any(len(v) != len(vectors[0]) for v in vectors):
            raise ModelResponseError(f"{url} answered vectors of different lengths", url=url)
        return vectors

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        payload = json.dumps(self.request_body(texts), ensure_ascii=False).encode()
        async with self._transport.client() as client:
            response = await self._transport.post(client, payload)
        return _vectors(self._transport, self._transport.json(response), len(texts))


def _vectors(transport: HTTPTransport, data: Any, expected: int) -> list[list[float]]:
    url = transport.shown_url
    rows = data.get("data") if isinstance(data, dict) else None
    if not isinstance(rows, list) or len(rows) != expected:
        got = len(rows) if isinstance(rows, list) else "no"
        raise ModelResponseError(
            f"{url} answered {got} embeddings for {expected} inputs: "
            f"{transport.quote(str(data))}", url=url,
        )
    out: list[list[float] | None] = [None] * expected
    for position, row in enumerate(rows):
        index = row.get("index", position) if isinstance(row, dict) else None
        vector = row.get("embedding") if isinstance(row, dict) else None
        if (not isinstance(index, int) or not 0 <= index < expected or out[index] is not None
                or not isinstance(vector, list) or not vector
                or not all(isinstance(x, (int, float)) for x in vector)):
            raise ModelResponseError(
                f"{url} answered a malformed embedding at position {position} "
                "(expected {'index': int, 'embedding': [numbers]}; base64 is not read)", url=url,
            )
        out[index] = [float(x) for x in vector]
    return [v for v in out if v is not None]
