"""The exceptions rx_agent raises, under one root.

Catch :class:`RxAgentError` to handle anything the library raised on purpose. Each
error also keeps the built-in base it always had (``ValueError``, ``TypeError``,
``RuntimeError``), so ``except ValueError`` written before the root existed still
works::

    RxAgentError
    ├── PlanError (TypeError)                  a middleware the plan cannot use
    ├── ToolArgumentError (ValueError)         tool arguments that do not validate
    ├── ResumeError (ValueError)               resume input that does not fit the pause
    ├── NoResultError (RuntimeError)           a call that ended without a result
    ├── TodoListError (ValueError)             a bad todo_write call (task list)
    ├── RemoteAgentError                       a remote (A2A) agent call failed
    │   ├── RemoteAgentUnavailableError        unreachable, HTTP error, no card
    │   │   └── RemoteAgentTimeoutError        silent for longer than the timeout
    │   ├── RemoteAgentAuthError               401 / 403
    │   ├── RemoteAgentRequestError            a JSON-RPC error answer
    │   └── RemoteTaskFailedError              the remote task failed or was rejected
    ├── SessionError                           durable sessions
    │   ├── ConcurrentSessionModificationError a newer state was saved meanwhile
    │   ├── SessionBusyError                   another worker holds the session
    │   └── SessionCorruptError                a stored record cannot be read
    └── ModelError                             a model call failed
        ├── ModelAuthenticationError           401 / 403
        ├── ModelRequestError                  4xx: the request is wrong
        ├── ModelRateLimitError                429 (retryable, may carry retry_after)
        ├── ModelServerError                   5xx (retryable)
        ├── ModelTimeoutError                  no answer in time (retryable)
        ├── ModelConnectionError               refused, reset (retryable)
        ├── ModelResponseError                 a truncated or malformed stream
        └── ScriptExhaustedError               a ScriptedModel ran past its script

Errors raised by user code (a tool, a middleware) reach the caller unchanged.
"""

from __future__ import annotations

__all__ = ["RxAgentError"]


class RxAgentError(Exception):
    """The root of every exception rx_agent raises on purpose."""
