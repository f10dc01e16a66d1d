"""Every failure as a JSON answer: ``{"error": {"code": ..., "message": ...}}``.

Input mistakes are 4xx with a message naming the problem; anything unexpected is a
500 whose body says only where to look (the traceback goes to the server's log).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from starlette.responses import JSONResponse

from ..agent import ResumeError
from ..model.errors import ModelError
from ..session import (
    ConcurrentSessionModificationError,
    SessionBusyError,
    SessionCorruptError,
)

__all__ = ["RETRY_AFTER", "HTTPError", "error_response", "from_exception"]

log = logging.getLogger("rx_agent.serve")

RETRY_AFTER = "1"
"""Seconds a client is told to wait before posting to a busy session again."""


class HTTPError(Exception):
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


def from_exception(exc: BaseException, session_id: str | None = None) -> HTTPError:
    """The answer for an exception a call raised before its stream started."""
    if isinstance(exc, HTTPError):
        return exc
    if isinstance(exc, SessionBusyError):
        return busy(exc.session_id)
    if isinstance(exc, ResumeError):
        return HTTPError(409, "resume_rejected", str(exc))
    if isinstance(exc, ConcurrentSessionModificationError):
        return HTTPError(409, "session_conflict", str(exc), {"Retry-After": RETRY_AFTER})
    if isinstance(exc, ModelError):
        # Without the endpoint's URL: where the model runs is the server's business.
        return HTTPError(502, "model_error", exc.public_message)
    if isinstance(exc, SessionCorruptError):
        log.error("session %r cannot be read: %s", exc.session_id, exc)
        return HTTPError(500, "session_corrupt", str(exc))
    log.error("call on session %r failed", session_id, exc_info=exc)
    return HTTPError(500, "internal_error",
                     f"the call failed with {type(exc).__name__}; the server log has the details")


def error_response(error: HTTPError) -> JSONResponse:
    return JSONResponse(error.payload(), status_code=error.status, headers=error.headers)
