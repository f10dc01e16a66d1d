"""The errors of running agents on Temporal (importable without the extra)."""

from __future__ import annotations

from ..errors import RxAgentError

__all__ = ["TemporalCallError", "TemporalUnavailableError"]


class TemporalUnavailableError(RxAgentError, ConnectionError):
    """No Temporal server answered at the address (the message names it)."""


class TemporalCallError(RxAgentError, RuntimeError):
    """A call run as a workflow failed there: ``kind`` is the type of the error the
    reply ended with (its message follows), ``workflow_id`` the session's workflow."""

    def __init__(self, message: str, *, kind: str = "", workflow_id: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.workflow_id = workflow_id
