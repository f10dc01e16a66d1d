"""Agents on Temporal: each call of an agent runs as a durable workflow.

Workers (:class:`AgentWorker`, or ``rx-agent worker MODULE:ATTR``) serve the agents
their factory built; callers (:class:`TemporalAgent`) start calls on the task queue and
read their events. Every model attempt and every tool call is an activity, so a call
survives the death of its worker and no finished model call or tool runs twice. Needs
the ``temporal`` extra (``pip install -e '.[temporal]'``). See docs/concepts/temporal.md.
"""

from ._require import require_temporalio

require_temporalio()

from .. import _publish  # noqa: E402
from ._client import TemporalAgent  # noqa: E402
from ._connect import connect  # noqa: E402
from ._driver import TemporalDriver, Timeouts  # noqa: E402
from ._errors import TemporalCallError, TemporalUnavailableError  # noqa: E402
from ._worker import AgentWorker  # noqa: E402
from ._workflow import AgentWorkflow  # noqa: E402

__all__ = [
    "AgentWorker",
    "AgentWorkflow",
    "TemporalAgent",
    "TemporalCallError",
    "TemporalDriver",
    "TemporalUnavailableError",
    "Timeouts",
    "connect",
]

_publish.publish_all(globals(), __all__)
