"""``OpenAITTSModel``: speech from an OpenAI-compatible ``/v1/audio/speech`` endpoint.

Shares the HTTP side (client pools per event loop, typed errors) with the chat
adapter through :mod:`rx_agent.model._http`.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any

import httpx

from ._http import HTTPTransport, bearer_headers, is_json, resolve_base_url
from ._http_pool import ClientPool
from .errors import ModelError, ModelRequestError, ModelResponseError
from .tts import TTSModel, parse_wav

__all__ = ["OpenAITTSModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAITTSModel(TTSModel):
    """Speech from the OpenAI audio API (or a compatible server: LocalAI, vLLM,
    openedai-speech, Kokoro-FastAPI, ...).

    One :meth:`synthesize` is one ``POST {base_url}/audio/speech`` with
    ``response_format: "wav"``; the WAV answer is returned with exact header sizes
    (servers stream it with "unknown" ones).

    Args:
        model: the TTS model name (``"gpt-4o-mini-tts"``, ``"tts-1"``, ...).
        voice: the voice (``"alloy"``, ``"nova"``, ...).
        base_url: defaults to ``$OPENAI_BASE_URL``, then ``https://api.openai.com/v1``.
        api_key: defaults to ``$OPENAI_API_KEY`` (no ``Authorization`` header without
            one, which local servers accept).
        instructions: how to speak (tone, accent), for models that take it.
        speed: 0.25-4.0.
        timeout: seconds to wait for each read or write; ``connect_timeout``: to
            connect.
        headers: extra HTTP headers.
        max_connections: at most this many requests at once per event loop.
        **extra: other request fields, sent as they are.
    """

    provider = "openai"

    def __init__(
        self,
        model: str = "gpt-4o-mini-tts",
        voice: str = "alloy",
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        instructions: str | None = None,
        speed: float | None = None,
        timeout: float | None = 120.0,
        connect_timeout: float | None = 10.0,
        headers: Mapping[str, str] | None = None,
        max_connections: int = 100,
        **extra: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("OpenAITTSModel needs a model name")
        if not isinstance(voice, str) or not voice:
            raise ValueError("OpenAITTSModel needs a voice")
        if speed is not None and not 0.25 <= speed <= 4.0:
            raise ValueError(f"speed must be in 0.25..4.0, got {speed}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        resolved = resolve_base_url(base_url, "OPENAI_BASE_URL", DEFAULT_BASE_URL)
        try:
            json.dumps(extra)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"OpenAITTSModel request fields must be JSON values: {exc}") from exc
        self.name = model
        self.voice = voice
        self.instructions = instructions
        self.speed = speed
        self.extra: dict[str, Any] = dict(extra)
        self.base_url = resolved
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.url = f"{self.base_url}/audio/speech"
        self._transport = HTTPTransport(
            self.url,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            headers=bearer_headers(self.api_key, headers),
            max_connections=max_connections,
            key_hint="OPENAI_API_KEY or api_key=",
        )

    def request_body(self, text: str) -> dict[str, Any]:
        """The JSON body one synthesis sends (public for debugging)."""
        body: dict[str, Any] = {**self.extra, "model": self.name, "input": text,
                                "voice": self.voice, "response_format": "wav"}
        if self.instructions is not None:
            body["instructions"] = self.instructions
        if self.speed is not None:
            body["speed"] = self.speed
        return body

    async def synthesize(self, text: str) -> bytes:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("OpenAITTSModel.synthesize needs non-blank text")
        transport = self._transport
        url = transport.shown_url
        try:
            payload = json.dumps(self.request_body(text), ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            raise ModelRequestError(f"cannot build the request for {url}: {exc}",
                                    url=url) from exc
        try:
            async with transport.client() as client:
                response = await transport.post(client, payload)
            if is_json(response):  # an error some servers send with status 200
                try:
                    data = response.json()
                except ValueError:
                    data = None
                if isinstance(data, dict) and data.get("error"):
                    raise transport.payload_error(data)
                raise ModelResponseError(
                    f"{url} answered with JSON instead of audio: {transport.quote(response.text)}",
                    url=url,
                )
            return parse_wav(response.content, url).to_bytes()
        except ModelError as exc:
            transport.scrub(exc)  # no message carries the key (see _http.py)
            raise

    @property
    def _pools(self) -> dict[asyncio.AbstractEventLoop, ClientPool]:
        """The client pool of each event loop (for tests)."""
        return self._transport.pools.by_loop

    async def aclose(self) -> None:
        """Close the HTTP clients of every loop (the model stays usable)."""
        await self._transport.aclose()

    async def __aenter__(self) -> OpenAITTSModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return (f"OpenAITTSModel(name={self.name!r}, voice={self.voice!r}, "
                f"base_url={self.base_url!r})")
