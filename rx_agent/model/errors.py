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
    server asked us to wait, if it said; ``url``: the endpoint the message names, if it
    names one (without credentials). The message of an HTTP model's error never
    carries its API key, even when the server's answer quoted it.
    """

    retryable: bool = True

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after
        self.url = url
        if retryable is not None:
            self.retryable = retryable

    @property
    def public_message(self) -> str:
        """The message with the endpoint's URL replaced by ``"the model endpoint"``: what
        a server may tell its own clients, who need not learn where its model runs."""
        message = str(self)
        return message.replace(self.url, "the model endpoint") if self.url else message


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
