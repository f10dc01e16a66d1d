"""Every failure as a JSON answer: ``{"error": {"code": ..., "message": ...}}``.

Input mistakes are 4xx with a message naming the problem; anything unexpected is a
500 whose body says only where to look (the traceback goes to the server's log).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..agent import ResumeError
from ..errors import RxAgentError
from ..model.errors import ModelError
from ..session import (
    ConcurrentSessionModificationError,
    SessionBusyError,
    SessionCorruptError,
)

__all__ = ["RETRY_AFTER", "CrashAnswer", "HTTPError", "error_response", "from_exception"]

log = logging.getLogger("rx_agent.serve")

RETRY_AFTER = "1"
"""Seconds a client is told to wait before posting to a busy session again."""


class HTTPError(RxAgentError):
    """An answer with a status, a machine-readable code and a message for people."""

    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})

    def payload(self) -> dict[str, dict[str, str]]:
        return {"error": {"code": self.code, "message": self.message}}


def busy(session_id: str) -> HTTPError:
    return HTTPError(
        409, "session_busy",
        f"session {session_id!r} is running a call; retry after it ends "
        f"(Retry-After: {RETRY_AFTER} s)",
        {"Retry-After": RETRY_AFTER},
    )


def from_exception(exc: BaseException, session_id: str | None = None,
                   run_id: str | None = None) -> HTTPError:
    """The answer for an exception a call raised; the log gets what the answer does not
    say (the traceback, with the session and run ids to find it by)."""
    if isinstance(exc, HTTPError):
        return exc
    if isinstance(exc, SessionBusyError):
        return busy(exc.session_id)
    if isinstance(exc, ResumeError):
        return HTTPError(409, "resume_rejected", str(exc))
    if isinstance(exc, ConcurrentSessionModificationError):
        return HTTPError(409, "session_conflict", str(exc), {"Retry-After": RETRY_AFTER})
    ids = {"session_id": session_id, "run_id": run_id}
    if isinstance(exc, ModelError):
        log.warning("run %s on session %r: the model failed: %s", run_id, session_id, exc,
                    extra=ids)
        # Without the endpoint's URL: where the model runs is the server's business.
        return HTTPError(502, "model_error", exc.public_message)
    if isinstance(exc, SessionCorruptError):
        log.error("run %s: session %r cannot be read: %s", run_id, exc.session_id, exc,
                  extra=ids)
        return HTTPError(500, "session_corrupt", str(exc))
    log.error("run %s on session %r failed with %s", run_id, session_id,
              type(exc).__name__, exc_info=exc, extra=ids)
    where = f" (run {run_id})" if run_id else ""
    return HTTPError(500, "internal_error", f"the call failed with {type(exc).__name__}; "
                     f"the server log has the details{where}")


def error_response(error: HTTPError) -> JSONResponse:
    return JSONResponse(error.payload(), status_code=error.status, headers=error.headers)


class CrashAnswer:
    """ASGI middleware: an unexpected exception before the answer started becomes the
    ``on_crash`` answer, and the connection stays open for the client's next request.

    Starlette's own handler for ``Exception`` answers too, but then re-raises, and the
    server closes the connection after the 500 without ``Connection: close``: a pooling
    client's next request on it fails. Once an answer started, nothing can be said
    any more: the exception goes on and the server drops the connection.
    """

    def __init__(self, app: ASGIApp,
                 on_crash: Callable[[Request, Exception], Awaitable[Response]]) -> None:
        self.app = app
        self.on_crash = on_crash

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if started:
                raise
            answer = await self.on_crash(Request(scope, receive), exc)
            await answer(scope, receive, send)
