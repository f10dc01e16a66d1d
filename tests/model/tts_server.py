"""A small OpenAI-compatible ``/v1/audio/speech`` server for the TTS tests.

Real HTTP/1.1 on 127.0.0.1 (an ephemeral port) from an asyncio server in a background
thread; the speech itself comes from ``espeak-ng``, as self-hosted OpenAI-compatible
speech servers do with a local engine. It answers as a streaming server does: a WAV
whose header says "length unknown", sent with chunked transfer encoding.

Scripted failures (:attr:`TTSServer.failures`) answer the next requests with an
HTTP status and a JSON error body, or with a 200 JSON error. Requests are recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import deque
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

__all__ = ["Failure", "TTSServer"]


@dataclass
class Failure:
    status: int
    body: dict[str, Any]


class TTSServer:
    def __init__(self, espeak: str) -> None:
        self.espeak = espeak
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.failures: deque[Failure] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> TTSServer:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._server = loop.run_until_complete(
                asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            loop.call_soon(ready.set)
            loop.run_forever()
            self._server.close()
            loop.run_until_complete(self._server.wait_closed())
            loop.close()

        self._thread = threading.Thread(target=run, name="tts-server", daemon=True)
        self._thread.start()
        ready.wait(5)
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                payload = json.loads(body) if body else {}
                self.requests.append((f"{method} {path}", headers, payload))
                await self._answer(writer, path, payload)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, writer: asyncio.StreamWriter, path: str,
                      payload: dict[str, Any]) -> None:
        if self.failures:
            failure = self.failures.popleft()
            self._send(writer, failure.status, json.dumps(failure.body).encode(),
                       "application/json")
            await writer.drain()
            return
        if path != "/v1/audio/speech":
            self._send(writer, 404, b'{"error": {"message": "not found"}}', "application/json")
            await writer.drain()
            return
        speed = payload.get("speed")
        cmd = [self.espeak, "--stdout", "--stdin", "-b", "1"]
        if isinstance(speed, (int, float)):
            cmd += ["-s", str(int(175 * speed))]
        process = await asyncio.create_subprocess_exec(
            *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL)
        audio, _ = await process.communicate(str(payload.get("input", "")).encode())
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: audio/wav\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        for start in range(0, len(audio), 8192):
            piece = audio[start:start + 8192]
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    @staticmethod
    def _send(writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str) -> None:
        phrase = HTTPStatus(status).phrase
        writer.write(f"HTTP/1.1 {status} {phrase}\r\nContent-Type: {content_type}\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
