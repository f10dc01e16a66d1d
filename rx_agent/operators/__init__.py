"""Typed operators over agent events, for onion hooks and for callers.

Import as ``from rx_agent import operators as aops`` and use them in any hook with
``next(input).pipe(...)``::

    def on_model_call(self, agent, ctx, input, next):
        return next(input).pipe(aops.redact(), aops.with_timeout(first_event=10))

Every operator keeps the runtime's guarantees: the stream a hook returns still has
valid block ids, no tool call without its end, errors pass through, and disposing the
result disposes the source. ``retry_model`` and ``fallback_to`` wrap ``next`` itself
(``aops.retry_model(3)(next, input)``). Time-based operators take ``scheduler=None``
and otherwise use the scheduler given at subscription, so a
``reactivex.testing.TestScheduler`` drives them. See docs/operators.md.
"""

from __future__ import annotations

from .. import _publish
from ._inject import inject_after, inject_before
from ._model import fallback_to, retry_model
from ._redact import redact
from ._select import buffer_round, collect_message, of_type, text
from ._tap import on_text, on_tool_call, tap_usage
from ._text import map_text
from ._timing import rate_limit, with_timeout

__all__ = [
    "buffer_round",
    "collect_message",
    "fallback_to",
    "inject_after",
    "inject_before",
    "map_text",
    "of_type",
    "on_text",
    "on_tool_call",
    "rate_limit",
    "redact",
    "retry_model",
    "tap_usage",
    "text",
    "with_timeout",
]

# Reprs, tracebacks and docs show ``rx_agent.operators.map_text``.
_publish.publish_all(globals(), __all__)
