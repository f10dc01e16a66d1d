"""Agents on Temporal: each call of an agent runs as a durable workflow.

Workers (:class:`AgentWorker`, or ``rx-agent worker MODULE:ATTR``) serve the agents
their factory built; callers (:class:`TemporalAgent`) start calls on the task queue and
read their events. Every model attempt and every tool call is an activity, so a call
survives the death of its worker and no finished model call or tool runs twice. Needs
the ``temporal`` extra (``pip install -e '.[temporal]'``). :func:`create_schedule` (or
``rx-agent schedule create``) calls an agent on a cron or interval schedule. See
docs/concepts/temporal.md.
"""

from __future__ import annotations

try:
    import temporalio  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised with the extra missing
    raise ImportError(
        "rx_agent.temporal needs the temporal extra (temporalio is missing): "
        "pip install 'rx-agent[temporal]' (from a checkout: pip install -e '.[temporal]')"
    ) from exc

from .. import _publish
from ._client import TemporalAgent
from ._connect import connect
from ._driver import TemporalDriver, Timeouts
from ._errors import TemporalCallError, TemporalUnavailableError
from ._schedule import (
    ScheduledAgent,
    create_schedule,
    delete_schedule,
    describe_schedule,
    list_schedules,
    pause_schedule,
    unpause_schedule,
)
from ._worker import AgentWorker
from ._workflow import AgentWorkflow

__all__ = [
    "AgentWorker",
    "AgentWorkflow",
    "ScheduledAgent",
    "TemporalAgent",
    "TemporalCallError",
    "TemporalDriver",
    "TemporalUnavailableError",
    "Timeouts",
    "connect",
    "create_schedule",
    "delete_schedule",
    "describe_schedule",
    "list_schedules",
    "pause_schedule",
    "unpause_schedule",
]

_publish.publish_all(globals(), __all__)
