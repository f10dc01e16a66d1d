"""Messages for a hook's mistakes found while a call runs, each naming the fix.

Built only on the error path: nothing here runs per event or per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reactivex import Observable

from ..message import Msg
from .base import ExtensionPoint

__all__ = ["not_an_event"]


def not_an_event(point: ExtensionPoint, labels: Sequence[str], item: Any) -> TypeError:
    """A hook stream at ``point`` carried ``item``, which is not an ``AgentEvent``;
    ``labels`` are the middlewares whose hook at ``point`` could have emitted it."""
    hooks = [f"{label}.{point.value}()" for label in labels]
    if not hooks:
        who = "the runtime"
    elif len(hooks) == 1:
        who = hooks[0]
    else:
        who = "one of " + ", ".join(hooks)
    text = f"{who} emitted {type(item).__name__} {item!r:.80}, not an AgentEvent, into the " \
           f"{point.value} stream"
    hint = _hint(item)
    return TypeError(f"{text} ({hint})" if hint else text)


def _hint(item: Any) -> str | None:
    if type(item) is int:
        return ("a port of Mono.delay(...).thenMany(...) emits the timer's 0: drop it with "
                "ops.ignore_elements() or use ops.flat_map")
    if isinstance(item, Observable):
        return ("a stream inside the stream: to splice one in per event, use ops.flat_map "
                "or ops.concat_map instead of ops.map")
    if isinstance(item, Msg):
        return ("the reply's message is not an event: the runtime emits it itself, in "
                "AgentResultEvent; emit events such as TextBlockDeltaEvent to add text")
    return None
