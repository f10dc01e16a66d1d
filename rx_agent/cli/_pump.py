"""Streaming an agent call from a plain thread: events cross to the main thread."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reactivex import Observable

from .._rx import ERROR, NEXT, Inbox
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

    The agent runs on its own loop; events cross over through an inbox, so rendering
    never races the runtime and Ctrl-C (a ``KeyboardInterrupt`` here) can be turned
    into ``interrupt()``: the agent then ends the reply with ``INTERRUPTED`` and the
    stream completes normally. A second Ctrl-C, or one without ``interrupt``,
    disposes the subscription, which cancels the model stream and running tools.
    """
    inbox = Inbox(events, blocking=True)
    outcome = Outcome()
    try:
        while True:
            try:
                signal = inbox.ready()
                if signal is None:
                    # A timeout keeps Ctrl-C deliverable on every platform.
                    inbox.wait_blocking(0.1)
                    continue
                kind, value = signal
                if kind == NEXT:
                    handle(value)
                else:
                    if kind == ERROR:
                        outcome.error = value
                    return outcome
            except KeyboardInterrupt:
                if interrupt is not None and not outcome.interrupted:
                    outcome.interrupted = True
                    if interrupt():
                        continue  # drain: the INTERRUPTED result is on its way
                outcome.cancelled = True
                return outcome
    finally:
        inbox.dispose()
