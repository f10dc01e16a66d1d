"""Streaming an agent call from a plain thread: events cross to the main thread."""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reactivex import Observable

from ..event import AgentEvent

__all__ = ["Outcome", "pump"]


@dataclass(slots=True)
class Outcome:
    """How a pumped stream ended."""

    error: BaseException | None = None
    interrupted: bool = False  # Ctrl-C asked the agent to stop the reply
    cancelled: bool = False  # the subscription was disposed before the end


def pump(
    events: Observable[AgentEvent],
    handle: Callable[[AgentEvent], None],
    interrupt: Callable[[], bool] | None = None,
) -> Outcome:
    """Subscribe and hand every event to ``handle`` on this (the main) thread.

    The agent runs on its own loop; events cross over through a queue, so rendering
    never races the runtime and Ctrl-C (a ``KeyboardInterrupt`` here) can be turned
    into ``interrupt()``: the agent then ends the reply with ``INTERRUPTED`` and the
    stream completes normally. A second Ctrl-C, or one without ``interrupt``,
    disposes the subscription, which cancels the model stream and running tools.
    """
    inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    outcome = Outcome()
    subscription = events.subscribe(
        on_next=lambda event: inbox.put(("event", event)),
        on_error=lambda exc: inbox.put(("error", exc)),
        on_completed=lambda: inbox.put(("done", None)),
    )
    try:
        while True:
            try:
                try:
                    # A timeout keeps Ctrl-C deliverable on every platform.
                    kind, value = inbox.get(timeout=0.1)
                except queue.Empty:
                    continue
                if kind == "event":
                    handle(value)
                elif kind == "error":
                    outcome.error = value
                    return outcome
                else:
                    return outcome
            except KeyboardInterrupt:
                if interrupt is not None and not outcome.interrupted:
                    outcome.interrupted = True
                    if interrupt():
                        continue  # drain: the INTERRUPTED result is on its way
                outcome.cancelled = True
                return outcome
    finally:
        subscription.dispose()

