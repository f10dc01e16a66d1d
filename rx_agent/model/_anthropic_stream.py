"""Reading an Anthropic Messages event stream into model chunks.

``message_start`` carries the prompt usage; each content block is opened by
``content_block_start``, grown by ``content_block_delta`` (``text_delta``,
``thinking_delta``, ``input_json_delta`` for a tool call's partial JSON) and closed
by ``content_block_stop``; ``message_delta`` carries the stop reason and the output
usage; ``message_stop`` ends it. ``ping`` and unknown events are skipped (the API
adds event types over time); an ``error`` event raises the typed error its type means.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ._anthropic_format import ERROR_STATUS, parse_usage, stop_reason
from ._http import HTTPTransport
from ._sse import ServerSentEvent
from .base import FinishChunk, ModelChunk, TextChunk, ThinkingChunk, ToolCallChunk, UsageChunk
from .errors import ModelResponseError

__all__ = ["AnthropicStreamParser"]

class AnthropicStreamParser:
    """One stream's events → chunks; usage and the stop reason are held for the end."""

    def __init__(self, transport: HTTPTransport) -> None:
        # The transport maps an HTTP status, reads events and names the endpoint.
        self._transport = transport
        self.url = transport.shown_url
        self.done = False
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self._tools: set[int] = set()  # indexes of open tool_use blocks

    def event(self, event: ServerSentEvent) -> list[ModelChunk]:
        data = event.data.strip()
        if not data:
            return []
        payload = self._transport.event_json(data)
        kind = payload.get("type", event.event)
        handler = _HANDLERS.get(kind)
        return handler(self, payload) if handler is not None else []

    def _error(self, payload: dict[str, Any]) -> list[ModelChunk]:
        error = payload.get("error") if isinstance(payload.get("error"), dict) else {}
        assert isinstance(error, dict)
        kind = str(error.get("type") or "api_error")
        message = str(error.get("message") or kind)
        raise self._transport.error_for_status(ERROR_STATUS.get(kind, 500),
                                 f"{message} ({kind}, reported in the response stream)", None)

    def _message_start(self, payload: dict[str, Any]) -> list[ModelChunk]:
        message = payload.get("message")
        if isinstance(message, dict) and isinstance(message.get("usage"), dict):
            self._usage(message["usage"])
        return []

    def _block_start(self, payload: dict[str, Any]) -> list[ModelChunk]:
        block = payload.get("content_block") or {}
        index = payload.get("index", 0)
        kind = block.get("type")
        if kind == "tool_use":
            self._tools.add(index)
            given = block.get("input")
            # Streamed input comes as input_json_delta; a block that arrives whole
            # carries it here.
            arguments = json.dumps(given, ensure_ascii=False) if given else ""
            return [ToolCallChunk(index, block.get("id"), block.get("name"), arguments)]
        if kind == "text" and block.get("text"):
            return [TextChunk(str(block["text"]))]
        if kind == "thinking" and block.get("thinking"):
            return [ThinkingChunk(str(block["thinking"]))]
        return []

    def _block_delta(self, payload: dict[str, Any]) -> list[ModelChunk]:
        delta = payload.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            return [TextChunk(str(delta.get("text", "")))]
        if kind == "thinking_delta":
            return [ThinkingChunk(str(delta.get("thinking", "")))]
        if kind == "input_json_delta":
            partial = str(delta.get("partial_json", ""))
            return [ToolCallChunk(payload.get("index", 0), arguments=partial)] if partial else []
        return []  # signature_delta, citations_delta: nothing the runtime keeps

    def _block_stop(self, payload: dict[str, Any]) -> list[ModelChunk]:
        index = payload.get("index", 0)
        if index in self._tools:
            self._tools.discard(index)
            return [ToolCallChunk(index, done=True)]
        return []

    def _message_delta(self, payload: dict[str, Any]) -> list[ModelChunk]:
        delta = payload.get("delta") or {}
        if isinstance(delta.get("stop_reason"), str):
            self.stop_reason = delta["stop_reason"]
        if isinstance(payload.get("usage"), dict):
            self._usage(payload["usage"])
        return []

    def _message_stop(self, payload: dict[str, Any]) -> list[ModelChunk]:
        self.done = True
        return []

    def _usage(self, usage: dict[str, Any]) -> None:
        # message_delta repeats some fields cumulatively: the latest value wins.
        self.usage.update({k: v for k, v in usage.items() if v is not None})

    def finish(self, elapsed: float) -> list[ModelChunk]:
        """The closing chunks; raises when the stream ended before ``message_stop``."""
        if not self.done:
            raise ModelResponseError(
                f"the event stream from {self.url} ended before the answer was complete "
                "(no message_stop)")
        out: list[ModelChunk] = [ToolCallChunk(i, done=True) for i in sorted(self._tools)]
        if self.usage:
            out.append(UsageChunk(parse_usage(self.usage).model_copy(update={"time": elapsed})))
        if self.stop_reason is not None:
            out.append(FinishChunk(stop_reason(self.stop_reason)))
        return out


_HANDLERS: dict[str, Callable[[AnthropicStreamParser, dict[str, Any]], list[ModelChunk]]] = {
    "error": AnthropicStreamParser._error,
    "message_start": AnthropicStreamParser._message_start,
    "content_block_start": AnthropicStreamParser._block_start,
    "content_block_delta": AnthropicStreamParser._block_delta,
    "content_block_stop": AnthropicStreamParser._block_stop,
    "message_delta": AnthropicStreamParser._message_delta,
    "message_stop": AnthropicStreamParser._message_stop,
}
