"""An OpenAI-compatible ``POST /v1/embeddings`` server on 127.0.0.1, for tests.

It computes real, deterministic embeddings: hashed bag-of-words vectors (each
non-stop word, crudely stemmed, adds +-1 to one of ``dim`` coordinates chosen by a
hash), so texts sharing words are close and retrieval quality is meaningful. Every
request is recorded; ``fail_next`` scripts an error answer.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["EmbeddingsServer", "embed_text"]

_WORD = re.compile(r"\w+")
_STOP = frozenset(re.findall(r"\w+", """
    a an and are as at be by can do does did for from has have how i if in is it its me my
    of on or our so than that the their them then there these they this to us was we were
    what when where which who will with would you your long many much"""))


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def embed_text(text: str, dim: int) -> list[float]:
    vector = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        digest = hashlib.blake2b(_stem(word).encode(), digest_size=8).digest()
        slot = int.from_bytes(digest[:4], "little") % dim
        vector[slot] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class EmbeddingsServer:
    dim: int = 256
    reverse: bool = False  # answer rows in reverse order (clients must sort by index)
    requests: list[Recorded] = field(default_factory=list)
    _failures: list[tuple[int, bytes]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def fail_next(self, status: int, body: dict[str, Any] | bytes) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self._failures.append((status, raw))

    def start(self) -> EmbeddingsServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out at once

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append(Recorded(self.path, dict(self.headers), body))
                if owner._failures:
                    status, raw = owner._failures.pop(0)
                    self._send(status, raw)
                    return
                if self.path != "/v1/embeddings":
                    self._send(404, b'{"error": {"message": "no such route"}}')
                    return
                dim = body.get("dimensions") or owner.dim
                rows = [{"object": "embedding", "index": i, "embedding": embed_text(t, dim)}
                        for i, t in enumerate(body["input"])]
                if owner.reverse:
                    rows.reverse()
                answer = {"object": "list", "data": rows, "model": body.get("model"),
                          "usage": {"prompt_tokens": 1, "total_tokens": 1}}
                self._send(200, json.dumps(answer).encode())

            def _send(self, status: int, raw: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
