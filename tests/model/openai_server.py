"""A small OpenAI-compatible chat-completions server for tests and benchmarks.

It speaks real HTTP/1.1 on 127.0.0.1 (an ephemeral port) from an asyncio server in a
background thread, so the code under test goes through its whole network stack:
keep-alive, chunked transfer encoding, server-sent events. Nothing beyond the
standard library is used.

Each request is answered with the next scripted :class:`Reply` (then
:attr:`OpenAIServer.default`, if set). A reply describes an answer at the level of the
protocol (text/reasoning/tool-call deltas, finish reason, usage), and the server
renders it as an SSE stream or as one JSON body, as the request's ``stream`` flag asks,
so one script serves streaming and non-streaming clients alike. It also describes
failures: an HTTP status with headers, a delay before the response, per-chunk latency,
a disconnect in the middle of the stream, a stream without its end, or raw body bytes.

Every request is recorded (method, path, headers, JSON body), as is whether the client
went away before the response was fully sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

__all__ = [
    "DEFAULT_USAGE",
    "OpenAIServer",
    "RecordedRequest",
    "Reply",
    "reasoning",
    "text",
    "tool_call",
]

DEFAULT_USAGE: dict[str, Any] = {
    "prompt_tokens": 11,
    "completion_tokens": 7,
    "total_tokens": 18,
    "prompt_tokens_details": {"cached_tokens": 3},
    "completion_tokens_details": {"reasoning_tokens": 2},
}


def text(content: str) -> dict[str, Any]:
    """A delta carrying visible text."""
    return {"content": content}


def reasoning(content: str, key: str = "reasoning_content") -> dict[str, Any]:
    """A delta carrying reasoning text (``reasoning_content`` or ``reasoning``)."""
    return {key: content}


def tool_call(
    index: int | None,
    *,
    id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
) -> dict[str, Any]:
    """A delta carrying one tool-call piece (``index=None`` leaves the index out)."""
    call: dict[str, Any] = {}
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        call["function"] = function
    return {"tool_calls": [call]}


@dataclass
class Reply:
    """One scripted answer.

    ``deltas`` are the ``choices[0].delta`` objects of the stream, in order (see
    :func:`text`, :func:`reasoning`, :func:`tool_call`); ``finish_reason=None`` leaves
    the finish chunk out, ``usage=None`` the usage chunk, ``send_done=False`` the
    ``[DONE]`` line. ``status >= 400`` answers with ``{"error": error}`` (or ``error``
    verbatim when it is a ``str``) and ``headers``. ``response_delay`` passes before the
    status line, ``chunk_delay`` before each SSE event. ``disconnect_after=n`` drops the
    connection after ``n`` events. ``raw`` replaces the rendered SSE body with these
    exact pieces (each written as it is, so a piece boundary can fall anywhere).
    """

    deltas: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = "stop"
    usage: dict[str, Any] | None = field(default_factory=lambda: dict(DEFAULT_USAGE))
    send_done: bool = True
    status: int = 200
    error: dict[str, Any] | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    response_delay: float = 0.0
    chunk_delay: float = 0.0
    disconnect_after: int | None = None
    raw: list[bytes] | None = None
    json_body: Any = None  # a non-streaming body to send verbatim instead of rendering
    ignore_stream: bool = False  # answer a streaming request with one JSON body

    # ----------------------------------------------------------------- rendering

    def stream_events(self, model: str, include_usage: bool) -> list[bytes]:
        """The SSE body pieces for a streaming request."""
        if self.raw is not None:
            return list(self.raw)
        created = int(time.time())

        def chunk(choices: list[dict[str, Any]], **more: Any) -> bytes:
            payload = {
                "id": "chatcmpl-test",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": choices,
                **more,
            }
            return f"data: {json.dumps(payload)}\n\n".encode()

        events: list[bytes] = []
        for i, delta in enumerate(self.deltas):
            # Like OpenAI: the role comes with the first delta only.
            body = {"role": "assistant", **delta} if i == 0 else delta
            events.append(chunk([{"index": 0, "delta": body, "finish_reason": None}]))
        if self.finish_reason is not None:
            events.append(chunk([{"index": 0, "delta": {}, "finish_reason": self.finish_reason}]))
        if self.usage is not None and include_usage:
            events.append(chunk([], usage=self.usage))
        if self.send_done:
            events.append(b"data: [DONE]\n\n")
        return events

    def completion(self, model: str) -> Any:
        """The JSON body for a non-streaming request: the deltas merged into one message."""
        if self.json_body is not None:
            return self.json_body
        content = "".join(d.get("content") or "" for d in self.deltas)
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        for key in ("reasoning_content", "reasoning"):
            joined = "".join(d.get(key) or "" for d in self.deltas)
            if joined:
                message[key] = joined
        calls: dict[int, dict[str, Any]] = {}
        for delta in self.deltas:
            for piece in delta.get("tool_calls") or []:
                index = piece.get("index", len(calls))
                call = calls.setdefault(
                    index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                call["id"] = call["id"] or piece.get("id", "")
                function = piece.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        body: dict[str, Any] = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
        }
        if self.usage is not None:
            body["usage"] = self.usage
        return body


@dataclass
class RecordedRequest:
    """A request as the server received it, and how its answer went."""

    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any  # parsed JSON (or the raw bytes when it was not JSON)
    connection: int = 0  # which TCP connection (1, 2, ... in accept order) carried it
    events_sent: int = 0
    disconnected: bool = False  # the client went away before the answer was complete
    completed: bool = False


class _ClientGone(Exception):
    """The client closed the connection while we were answering."""


class OpenAIServer:
    """Start with :meth:`start` (or ``with OpenAIServer() as server``), stop with :meth:`stop`.

    :attr:`url` is the base URL to give a client (``http://127.0.0.1:PORT/v1``).
    """

    def __init__(self, require_key: str | None = None) -> None:
        self.require_key = require_key
        self.default: Reply | None = None
        self.requests: list[RecordedRequest] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._connections = 0
        self._handlers: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self.port = 0

    # ------------------------------------------------------------------ control

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies, one per coming request."""
        with self._lock:
            self._script.extend(replies)

    @property
    def disconnects(self) -> list[RecordedRequest]:
        """The requests whose client went away before the answer was complete."""
        return [r for r in self.requests if r.disconnected]

    async def wait_for(self, condition: Any, timeout: float = 3.0) -> bool:
        """Poll ``condition()`` from async test code until it is true (or time runs out)."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def start(self) -> OpenAIServer:
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="openai-test-server", daemon=True)
        self._thread.start()
        ready.wait()
        self._server = asyncio.run_coroutine_threadsafe(self._listen(), loop).result(5)
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def _listen(self) -> asyncio.Server:
        # A large backlog: benchmarks open hundreds of connections at once.
        server = await asyncio.start_server(
            self._accept, "127.0.0.1", 0, backlog=2048, limit=1 << 22
        )
        self.port = server.sockets[0].getsockname()[1]
        return server

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        # Drop the open connections; their handlers then end on their own (cancelling
        # them instead makes asyncio's stream callback log the cancellation).
        for writer in list(self._handlers.values()):
            writer.transport.abort()
        if self._handlers:
            await asyncio.wait(list(self._handlers), timeout=2)
        if self._server is not None:
            await self._server.wait_closed()

    def _next_reply(self) -> Reply | None:
        with self._lock:
            if self._script:
                return self._script.popleft()
            return self.default

    # ---------------------------------------------------------------- protocol

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers[task] = writer
        self._connections += 1
        connection = self._connections
        leftover = b""
        try:
            while True:
                parsed = await self._read_request(reader, leftover)
                if parsed is None:
                    return
                request, keep_alive = parsed
                request.connection = connection
                self.requests.append(request)
                leftover, keep_alive = await self._answer(reader, writer, request, keep_alive)
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return
        finally:
            self._handlers.pop(task, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read_request(
        self, reader: asyncio.StreamReader, leftover: bytes
    ) -> tuple[RecordedRequest, bool] | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None  # the client closed an idle keep-alive connection
        head = leftover + head
        lines = head.decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        keep_alive = headers.get("connection", "").lower() != "close"
        return RecordedRequest(method, path, headers, body), keep_alive

    async def _answer(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: RecordedRequest,
        keep_alive: bool,
    ) -> tuple[bytes, bool]:
        # The client sends nothing while it waits for an answer (no pipelining), so a
        # read that finishes now means it closed the connection: it went away.
        watch = asyncio.ensure_future(reader.read(1))
        try:
            request.completed = await self._respond(writer, request, watch)
        except (_ClientGone, ConnectionError):
            request.disconnected = True
            return b"", False
        finally:
            if not watch.done():
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
        # A byte read by the watcher after the answer belongs to the next request.
        leftover = watch.result() if not watch.cancelled() else b""
        if watch.done() and not watch.cancelled() and leftover == b"":
            return b"", False
        return leftover, keep_alive and request.completed

    async def _pause(self, seconds: float, watch: asyncio.Future[bytes]) -> None:
        """Sleep, but notice at once when the client goes away meanwhile."""
        if seconds > 0 and not watch.done():
            await asyncio.wait({watch}, timeout=seconds)
        if watch.done() and watch.result() == b"":
            raise _ClientGone

    async def _respond(
        self, writer: asyncio.StreamWriter, request: RecordedRequest, watch: asyncio.Future[bytes]
    ) -> bool:
        """Answer ``request``; False when the script dropped the connection."""
        reply = self._next_reply()
        body = request.body if isinstance(request.body, dict) else {}
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            await self._send_json(writer, 404, {"error": {"message": f"no route {request.path}"}})
            return True
        if self.require_key is not None and (
            request.headers.get("authorization") != f"Bearer {self.require_key}"
        ):
            await self._send_json(
                writer,
                401,
                {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}},
            )
            return True
        if reply is None:
            await self._send_json(
                writer, 500, {"error": {"message": "test server: no scripted reply left"}}
            )
            return True
        await self._pause(reply.response_delay, watch)
        model = str(body.get("model", "test-model"))
        if reply.status >= 400:
            error = reply.error if reply.error is not None else {"message": "scripted failure"}
            if isinstance(error, str):
                await self._send(writer, reply.status, error.encode(), "text/plain", reply.headers)
            else:
                await self._send_json(writer, reply.status, {"error": error}, reply.headers)
            return True
        if not body.get("stream") or reply.ignore_stream:
            await self._send_json(writer, reply.status, reply.completion(model), reply.headers)
            return True
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        writer.write(
            _head(
                200,
                {
                    "Content-Type": "text/event-stream",
                    "Cache-Control": "no-cache",
                    "Transfer-Encoding": "chunked",
                    **reply.headers,
                },
            )
        )
        await writer.drain()
        loop = asyncio.get_running_loop()
        # Event k leaves at start + k * chunk_delay: a fixed schedule, so that time the
        # server itself spends under load does not add up over the stream (a
        # benchmark should measure the client, not this server).
        due = loop.time()
        for event in reply.stream_events(model, include_usage):
            if reply.disconnect_after is not None and request.events_sent >= reply.disconnect_after:
                # Drop the connection without ending the chunked body.
                writer.transport.abort()
                return False
            due += reply.chunk_delay
            await self._pause(due - loop.time(), watch)
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            request.events_sent += 1
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _send_json(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        await self._send(writer, status, json.dumps(payload).encode(), "application/json", headers)

    @staticmethod
    async def _send(
        writer: asyncio.StreamWriter,
        status: int,
        data: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        writer.write(
            _head(
                status,
                {"Content-Type": content_type, "Content-Length": str(len(data)), **(headers or {})},
            )
            + data
        )
        await writer.drain()


def _head(status: int, headers: dict[str, str]) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Status"
    lines = [f"HTTP/1.1 {status} {phrase}"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def main(argv: list[str] | None = None) -> None:
    """Serve from the command line (for benchmarks and manual tries).

    Every request gets the same answer: ``--chunks`` text deltas, ``--latency`` seconds
    before each SSE event. Prints the base URL on one line, then serves until killed
    or until standard input closes.
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="A local OpenAI-compatible test server.")
    parser.add_argument("--chunks", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args(argv)
    server = OpenAIServer().start()
    server.default = Reply(
        [text(f"word{i} ") for i in range(args.chunks)], chunk_delay=args.latency
    )
    print(server.url, flush=True)
    try:
        sys.stdin.read()  # the parent closes our stdin to stop us
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
