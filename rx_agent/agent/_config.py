"""What a run needs to know about its agent, frozen and validated once at ``build()``.

The run and the model-call attempts receive an :class:`AgentConfig` instead of the
agent object, so they never reach back into the agent layer (no import cycle) and no
setting can change under a call in flight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._record import jitter
from ..context import RuntimeContext
from ..middleware._plan import ExecutionPlan
from ..model.base import ChatModel
from ..options import GenerateOptions
from ..permissions import PermissionRule
from ..session import ConflictPolicy, SessionStore
from ..tool.toolkit import Toolkit
from ._permission_handler import PermissionHandler

__all__ = ["MAX_RETRY_AFTER", "AgentConfig", "FailoverListener", "RetryPolicy"]

MAX_RETRY_AFTER = 60.0
"""Seconds: a ``retry_after`` longer than this fails the attempt instead of waiting."""

FailoverListener = Callable[[ChatModel, BaseException], Any]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempts per model call and the backoff between them.

    ``max_attempts`` counts every attempt (Java's ``maxRetries``): 3 means one call and
    two retries. The delay doubles from ``initial_backoff`` up to ``max_backoff`` with
    jitter; a server's ``retry_after`` wins when larger, and one over
    ``max_retry_after`` is not waited for at all.
    """

    max_attempts: int = 3
    initial_backoff: float = 0.25
    max_backoff: float = 8.0
    max_retry_after: float = MAX_RETRY_AFTER

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        if self.initial_backoff <= 0 and retry_after is None:
            return 0.0
        base = min(self.max_backoff, self.initial_backoff * (2 ** (attempt - 1)))
        delay: float = base * (0.5 + jitter() / 2)  # the workflow's draw in a workflow
        if retry_after is not None:
            delay = max(delay, float(retry_after))
        return delay

    def should_retry(self, attempt: int, error: BaseException) -> bool:
        """Whether attempt ``attempt`` failing with ``error`` gets another try."""
        retry_after = getattr(error, "retry_after", None)
        too_long = retry_after is not None and retry_after > self.max_retry_after
        return attempt < self.max_attempts and getattr(error, "retryable", True) and not too_long


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """The agent's settings as one run sees them, checked and resolved.

    What each means, its default and its check are declared once, in
    ``agent/_settings.py`` (the constructor's signature is its typed view); this record
    holds the resolved values: the assembled toolkit and plan, the store (in memory
    when none was given), ``retry`` from ``max_retries`` and ``retry_backoff``,
    ``loop_lag`` from ``loop_lag_threshold`` or ``RX_AGENT_LOOP_LAG``, and ``durable``,
    which the agent derives from the store.
    """

    name: str
    sys_prompt: str
    model: ChatModel
    toolkit: Toolkit
    plan: ExecutionPlan
    session_store: SessionStore
    max_iters: int
    retry: RetryPolicy
    fallback_model: ChatModel | None
    failover_listener: FailoverListener | None
    generate_options: GenerateOptions
    permission_rules: tuple[PermissionRule, ...]
    tool_execution_context: RuntimeContext | None
    session_wait: float
    session_lease_ttl: float
    conflict_policy: ConflictPolicy
    tool_timeout: float | None
    durable: bool
    permission_handler: PermissionHandler | None
    loop_lag: float | None
