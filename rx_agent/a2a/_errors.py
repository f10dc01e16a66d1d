"""What a remote agent call raises: one root, a class per kind of failure.

Importable without the ``a2a`` extra, so ``except RemoteAgentError`` works anywhere.
"""

from __future__ import annotations

from ..errors import RxAgentError

__all__ = [
    "RemoteAgentAuthError",
    "RemoteAgentError",
    "RemoteAgentRequestError",
    "RemoteAgentTimeoutError",
    "RemoteAgentUnavailableError",
    "RemoteTaskFailedError",
]


class RemoteAgentError(RxAgentError):
    """A call of a remote (A2A) agent failed; ``url`` names the peer."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class RemoteAgentUnavailableError(RemoteAgentError):
    """The peer cannot be reached: refused or reset connection, an unknown host, an HTTP
    error status, or an answer that is not A2A (a wrong URL)."""

    def __init__(self, message: str, *, url: str, status_code: int | None = None) -> None:
        super().__init__(message, url=url)
        self.status_code = status_code


class RemoteAgentTimeoutError(RemoteAgentUnavailableError):
    """The peer did not answer, or went silent mid-stream, for longer than ``timeout``."""


class RemoteAgentAuthError(RemoteAgentError):
    """The peer refused the credentials (HTTP 401 or 403): check ``headers=``."""

    def __init__(self, message: str, *, url: str, status_code: int) -> None:
        super().__init__(message, url=url)
        self.status_code = status_code


class RemoteAgentRequestError(RemoteAgentError):
    """The peer answered the request with a JSON-RPC error (``code``, e.g. -32001 for an
    unknown task, -32602 for invalid parameters)."""

    def __init__(self, message: str, *, url: str, code: int | None) -> None:
        super().__init__(message, url=url)
        self.code = code


class RemoteTaskFailedError(RemoteAgentError):
    """The remote task ended ``failed`` or ``rejected``; ``task_id`` and ``state`` say
    which, the message carries the peer's explanation."""

    def __init__(self, message: str, *, url: str, task_id: str, state: str) -> None:
        super().__init__(message, url=url)
        self.task_id = task_id
        self.state = state
