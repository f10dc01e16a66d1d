"""The exceptions rx_agent raises, under one root, every one importable from here.

Catch :class:`RxAgentError` to handle anything the library raised on purpose. Each
error also keeps the built-in base it always had (``ValueError``, ``TypeError``,
``RuntimeError``...), so ``except ValueError`` written before the root existed still
works (tests/core/test_errors_tree.py keeps this tree equal to the classes)::

    RxAgentError
    ├── PlanError (TypeError)                  a middleware the plan cannot use
    ├── ToolArgumentError (ValueError)         tool arguments that do not validate
    ├── ToolMiddlewareError (ValueError)       a tool middleware broke the contract
    ├── McpConnectionError (ConnectionError)   an MCP server unreachable, or gone
    ├── ResumeError (ValueError)               resume input that does not fit the pause
    ├── NoResultError (RuntimeError)           a call that ended without a result
    ├── StructuredOutputError (ValueError)     no valid structured answer in the attempts
    ├── TodoListError (ValueError)             a bad todo_write call (task list)
    ├── CassetteMismatchError (AssertionError) a replayed call no recorded call matches
    ├── ReplayedError (RuntimeError)           a recorded error that cannot be rebuilt
    ├── MissingDirectoryError (FileNotFoundError, ValueError)
    │                                          a SQLite file two missing folders deep
    ├── CLIError                               a one-line rx-agent error, with an exit status
    ├── TargetError (ValueError)               a MODULE:ATTR that names no agent
    ├── ServeError (ValueError)                a setting rx-agent serve cannot run with
    ├── HTTPError                              an error answer of the server (serve extra)
    │   └── OpenAIError                        the same in OpenAI's shape (type, param)
    ├── RemoteAgentError                       a remote (A2A) agent call failed
    │   ├── RemoteAgentUnavailableError        unreachable, HTTP error, no card
    │   │   └── RemoteAgentTimeoutError        silent for longer than the timeout
    │   ├── RemoteAgentAuthError               401 / 403
    │   ├── RemoteAgentRequestError            a JSON-RPC error answer
    │   └── RemoteTaskFailedError              the remote task failed or was rejected
    ├── SessionError                           durable sessions
    │   ├── ConcurrentSessionModificationError (RuntimeError)
    │   │                                      a newer state was saved meanwhile
    │   ├── SessionBusyError (RuntimeError)    another worker holds the session
    │   ├── SessionCorruptError (ValueError)   a stored record cannot be read
    │   └── JournalExpiredError (LookupError)  run-journal entries trimmed by retention
    ├── TemporalUnavailableError (ConnectionError) no Temporal server at the address
    ├── TemporalCallError (RuntimeError)       a call run as a workflow failed there
    └── ModelError                             a model call failed
        ├── ModelAuthenticationError           401 / 403
        ├── ModelRequestError                  4xx: the request is wrong
        ├── ModelRateLimitError                429 (retryable, may carry retry_after)
        ├── ModelServerError                   5xx (retryable)
        ├── ModelTimeoutError                  no answer in time (retryable)
        ├── ModelConnectionError               refused, reset (retryable)
        ├── ModelResponseError                 a truncated or malformed stream
        └── ScriptExhaustedError               a ScriptedModel ran past its script

Errors raised by user code (a tool, a middleware) reach the caller unchanged. The
command line's and the server's own errors (``CLIError`` to ``OpenAIError``) are
mostly reported by ``rx-agent`` and the server as one line or a JSON answer; they sit
under the root all the same, for a program that calls ``main`` or ``build_app``.

This is the bottom layer: every error but the root loads from its module on first
access (rx_agent/_publish.py). Only ``ServeError``, ``HTTPError`` and ``OpenAIError``
need an extra (``serve``), and ``TemporalUnavailableError`` and ``TemporalCallError``
theirs (``temporal``); without it, naming them raises an ``ImportError`` that
says what to install.
"""

from __future__ import annotations

from typing import Any

from . import _publish

# tests/core/test_publish.py keeps this table and __all__ in step.
_LAZY = {
    "CLIError": "rx_agent.cli._base",
    "CassetteMismatchError": "rx_agent.testing._cassette",
    "ConcurrentSessionModificationError": "rx_agent.session._base",
    "HTTPError": "rx_agent.serve._errors",
    "JournalExpiredError": "rx_agent.session._journal",
    "McpConnectionError": "rx_agent.tool._mcp_errors",
    "MissingDirectoryError": "rx_agent.session._sqlite_file",
    "ModelAuthenticationError": "rx_agent.model.errors",
    "ModelConnectionError": "rx_agent.model.errors",
    "ModelError": "rx_agent.model.errors",
    "ModelRateLimitError": "rx_agent.model.errors",
    "ModelRequestError": "rx_agent.model.errors",
    "ModelResponseError": "rx_agent.model.errors",
    "ModelServerError": "rx_agent.model.errors",
    "ModelTimeoutError": "rx_agent.model.errors",
    "NoResultError": "rx_agent.agent._calling",
    "OpenAIError": "rx_agent.serve._openai_request",
    "PlanError": "rx_agent.middleware._forms",
    "RemoteAgentAuthError": "rx_agent.a2a._errors",
    "RemoteAgentError": "rx_agent.a2a._errors",
    "RemoteAgentRequestError": "rx_agent.a2a._errors",
    "RemoteAgentTimeoutError": "rx_agent.a2a._errors",
    "RemoteAgentUnavailableError": "rx_agent.a2a._errors",
    "RemoteTaskFailedError": "rx_agent.a2a._errors",
    "ReplayedError": "rx_agent.testing._cassette",
    "ResumeError": "rx_agent.agent._hitl",
    "ScriptExhaustedError": "rx_agent.model.errors",
    "ServeError": "rx_agent.serve._cli",
    "SessionBusyError": "rx_agent.session._base",
    "SessionCorruptError": "rx_agent.session._base",
    "SessionError": "rx_agent.session._base",
    "StructuredOutputError": "rx_agent.agent._structured",
    "TargetError": "rx_agent.cli._target",
    "TemporalCallError": "rx_agent.temporal._errors",
    "TemporalUnavailableError": "rx_agent.temporal._errors",
    "TodoListError": "rx_agent.builtin.tasks",
    "ToolArgumentError": "rx_agent.tool.toolkit",
    "ToolMiddlewareError": "rx_agent.tool._middleware",
}

__all__ = [
    "CLIError",
    "CassetteMismatchError",
    "ConcurrentSessionModificationError",
    "HTTPError",
    "JournalExpiredError",
    "McpConnectionError",
    "MissingDirectoryError",
    "ModelAuthenticationError",
    "ModelConnectionError",
    "ModelError",
    "ModelRateLimitError",
    "ModelRequestError",
    "ModelResponseError",
    "ModelServerError",
    "ModelTimeoutError",
    "NoResultError",
    "OpenAIError",
    "PlanError",
    "RemoteAgentAuthError",
    "RemoteAgentError",
    "RemoteAgentRequestError",
    "RemoteAgentTimeoutError",
    "RemoteAgentUnavailableError",
    "RemoteTaskFailedError",
    "ReplayedError",
    "ResumeError",
    "RxAgentError",
    "ScriptExhaustedError",
    "ServeError",
    "SessionBusyError",
    "SessionCorruptError",
    "SessionError",
    "StructuredOutputError",
    "TargetError",
    "TemporalCallError",
    "TemporalUnavailableError",
    "TodoListError",
    "ToolArgumentError",
    "ToolMiddlewareError",
]


class RxAgentError(Exception):
    """The root of every exception rx_agent raises on purpose."""


# Each error keeps the module path it shows today (the root's, or its package's).
_getattr, __dir__ = _publish.lazy_names(globals(), _LAZY, __all__, shorten=False)


def __getattr__(name: str) -> Any:
    # A def, not the helper's value: mypy types ``rx_agent.errors.X`` through it.
    return _getattr(name)
