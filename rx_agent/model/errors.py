"""Typed model errors. ``retryable`` tells the runtime whether another attempt may help."""

from __future__ import annotations

from ..errors import RxAgentError

__all__ = [
    "ModelAuthenticationError",
    "ModelConnectionError",
    "ModelError",
    "ModelRateLimitError",
    "ModelRequestError",
    "ModelResponseError",
    "ModelServerError",
    "ModelTimeoutError",
    "ScriptExhaustedError",
]


class ModelError(RxAgentError):
    """A model call failed.

    ``retryable``: whether the runtime may try again (``max_retries``);
    ``status_code``: the HTTP status when there was one; ``retry_after``: seconds the
    server asked us to wait, if it said.
    """

    retryable: bool = True

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after
        if retryable is not None:
            self.retryable = retryable


class ModelAuthenticationError(ModelError):
    """401/403: the key is missing, wrong or lacks permission. Not retried."""

    retryable = False


class ModelRequestError(ModelError):
    """A 4xx other than 401/403/429: the request itself is wrong. Not retried."""

    retryable = False


class ModelRateLimitError(ModelError):
    """429: retried after ``retry_after`` when the server gave one."""


class ModelServerError(ModelError):
    """5xx: retried."""


class ModelTimeoutError(ModelError):
    """The server did not answer in time: retried."""


class ModelConnectionError(ModelError):
    """The server could not be reached (refused, reset, DNS): retried."""


class ModelResponseError(ModelError):
    """The response was malformed or cut short (bad SSE, bad JSON): retried."""


class ScriptExhaustedError(ModelError):
    """A :class:`~rx_agent.ScriptedModel` was called more times than it has responses."""

    retryable = False
