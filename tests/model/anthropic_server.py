"""A small Anthropic Messages API server for the tests, on 127.0.0.1.

It reuses :class:`OpenAIServer`'s HTTP/1.1 machinery (keep-alive, chunked bodies,
disconnect detection, request recording) and answers ``POST /v1/messages`` with the
next scripted :class:`MessageReply`, rendered as the Messages event stream
(``message_start``, ``content_block_*``, ``message_delta``, ``message_stop``, with
``ping`` s) or as one ``message`` JSON body, as the request's ``stream`` asks.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from .openai_server import OpenAIServer, RecordedRequest, _head

__all__ = ["AnthropicServer", "MessageReply", "text", "thinking", "tool_use"]

DEFAULT_USAGE: dict[str, Any] = {
    "input_tokens": 21,
    "cache_creation_input_tokens": 5,
    "cache_read_input_tokens": 40,
    "output_tokens": 9,
}


def text(*pieces: str) -> dict[str, Any]:
    """A text block streamed as these ``text_delta`` s."""
    return {"type": "text", "pieces": list(pieces)}


def thinking(*pieces: str, signature: str = "sig-1") -> dict[str, Any]:
    """A thinking block (``thinking_delta`` s, then a ``signature_delta``)."""
    return {"type": "thinking", "pieces": list(pieces), "signature": signature}


def tool_use(id: str, name: str, *json_pieces: str) -> dict[str, Any]:
    """A tool_use block whose input arrives as these ``input_json_delta`` pieces."""
    return {"type": "tool_use", "id": id, "name": name, "pieces": list(json_pieces)}


@dataclass
class MessageReply:
    """One scripted answer: content ``blocks`` (see :func:`text`, :func:`thinking`,
    :func:`tool_use`), the ``stop_reason``, ``usage`` (the input side is sent in
    ``message_start``, ``output_tokens`` in ``message_delta``). ``status >= 400``
    answers with an error body of ``error_type``. ``error_after=n`` sends an ``error``
    event of ``error_type`` after ``n`` events; ``disconnect_after=n`` drops the
    connection; ``send_stop=False`` leaves ``message_stop`` out; ``chunk_delay``
    passes before each event."""

    blocks: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = "end_turn"
    usage: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_USAGE))
    status: int = 200
    error_type: str = "overloaded_error"
    error_message: str = "Overloaded"
    headers: dict[str, str] = field(default_factory=dict)
    error_after: int | None = None
    disconnect_after: int | None = None
    send_stop: bool = True
    chunk_delay: float = 0.0
    raw: list[bytes] | None = None

    def events(self, model: str) -> list[bytes]:
        if self.raw is not None:
            return list(self.raw)
        out: list[tuple[str, dict[str, Any]]] = []
        start_usage = {k: v for k, v in self.usage.items() if k != "output_tokens"}
        out.append(("message_start", {"type": "message_start", "message": {
            "id": "msg_test", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**start_usage, "output_tokens": 1}}}))
        out.append(("ping", {"type": "ping"}))
        for index, block in enumerate(self.blocks):
            kind = block["type"]
            if kind == "text":
                opened: dict[str, Any] = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in block["pieces"]]
            elif kind == "thinking":
                opened = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [{"type": "thinking_delta", "thinking": p} for p in block["pieces"]]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            else:
                opened = {"type": "tool_use", "id": block["id"], "name": block["name"],
                          "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": p}
                          for p in block["pieces"]]
            out.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                "content_block": opened}))
            out.extend(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                 "delta": d}) for d in deltas)
            out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        out.append(("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": self.usage.get("output_tokens", 0)}}))
        if self.send_stop:
            out.append(("message_stop", {"type": "message_stop"}))
        if self.error_after is not None:
            error = ("error", {"type": "error", "error": {"type": self.error_type,
                                                          "message": self.error_message}})
            out = [*out[: self.error_after], error]
        return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in out]

    def message(self, model: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for block in self.blocks:
            joined = "".join(block["pieces"])
            if block["type"] == "text":
                content.append({"type": "text", "text": joined})
            elif block["type"] == "thinking":
                content.append({"type": "thinking", "thinking": joined,
                                "signature": block["signature"]})
            else:
                content.append({"type": "tool_use", "id": block["id"], "name": block["name"],
                                "input": json.loads(joined or "{}")})
        return {"id": "msg_test", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": self.stop_reason, "stop_sequence": None,
                "usage": self.usage}


class AnthropicServer(OpenAIServer):
    """:attr:`url` is the base URL to give a client (``http://127.0.0.1:PORT``)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _respond(
        self, writer: asyncio.StreamWriter, request: RecordedRequest, watch: asyncio.Future[bytes]
    ) -> bool:
        reply = self._next_reply()
        body = request.body if isinstance(request.body, dict) else {}
        if request.method != "POST" or not request.path.endswith("/v1/messages"):
            await self._error(writer, 404, "not_found_error", f"no route {request.path}")
            return True
        # The adapter sends x-api-key; the SDK (2.x) sends the key as a bearer token.
        keys = {request.headers.get("x-api-key"),
                request.headers.get("authorization", "").removeprefix("Bearer ")}
        if self.require_key is not None and self.require_key not in keys:
            await self._error(writer, 401, "authentication_error", "invalid x-api-key")
            return True
        if not isinstance(reply, MessageReply):
            await self._error(writer, 500, "api_error", "test server: no scripted reply left")
            return True
        model = str(body.get("model", "claude-test"))
        if reply.status >= 400:
            await self._error(writer, reply.status, reply.error_type, reply.error_message,
                              reply.headers)
            return True
        if not body.get("stream"):
            await self._send_json(writer, 200, reply.message(model), reply.headers)
            return True
        writer.write(_head(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                 "Transfer-Encoding": "chunked", **reply.headers}))
        await writer.drain()
        for event in reply.events(model):
            if reply.disconnect_after is not None and request.events_sent >= reply.disconnect_after:
                writer.transport.abort()
                return False
            await self._pause(reply.chunk_delay, watch)
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            request.events_sent += 1
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _error(self, writer: asyncio.StreamWriter, status: int, kind: str, message: str,
                     headers: dict[str, str] | None = None) -> None:
        await self._send_json(writer, status, {"type": "error", "error": {
            "type": kind, "message": message}}, headers)

