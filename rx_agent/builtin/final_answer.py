"""``FinalAnswerFilterMiddleware``: stream only the text of the final ReAct round.

A round's text cannot be judged until its model call ends: only then is it known
whether the round made a tool call (an intermediate round, whose text is narration
like "let me look that up") or not (the final answer). So the middleware holds the
round's text events back and decides at ``ModelCallEndEvent``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc

from ..context import RuntimeContext
from ..event import (
    AgentEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ToolCallStartEvent,
)
from ..middleware import Agent, ExtensionPoint, Handler, MiddlewareBase, ReasoningInput

__all__ = ["FinalAnswerFilterMiddleware"]

# Deltas first: they are most of a stream, and isinstance() stops at the first match.
_TEXT_EVENTS = (TextBlockDeltaEvent, TextBlockStartEvent, TextBlockEndEvent)
_POINTS = frozenset({ExtensionPoint.ON_REASONING})


class FinalAnswerFilterMiddleware(MiddlewareBase):
    """Suppress the text of rounds that call tools; stream the final round's text.

    Point: ``ON_REASONING``. Text events (``TextBlockStart/Delta/EndEvent``) of a
    model call are buffered until that call's ``ModelCallEndEvent``; they are
    released just before it when the call made no tool call (no
    ``ToolCallStartEvent``) and dropped otherwise. Every other event (thinking, tool
    calls, usage, tool results) passes through at once.

    Only what the caller sees changes: the assistant message stored in the context
    is built below this point (from the ``on_model_call`` chain), so it keeps the
    narration text of tool rounds.

    The buffer belongs to one subscription (one reasoning step of one call), so a
    single instance can be shared by any number of agents and concurrent calls.
    """

    def active_points(self) -> Collection[ExtensionPoint]:
        return _POINTS

    def on_reasoning(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ReasoningInput,
        next: Handler[ReasoningInput],
    ) -> Observable[AgentEvent]:
        source = next(input)

        def subscribe(
            observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
        ) -> rxabc.DisposableBase:
            # Per-subscription state: nothing lives on the instance.
            held: list[AgentEvent] = []
            called_tool = False

            def on_next(event: AgentEvent) -> None:
                nonlocal called_tool
                if isinstance(event, _TEXT_EVENTS):
                    if not called_tool:
                        held.append(event)
                    return
                if isinstance(event, ToolCallStartEvent):
                    called_tool = True
                    held.clear()
                elif isinstance(event, ModelCallEndEvent):
                    release(not called_tool)
                    called_tool = False
                elif isinstance(event, ModelCallStartEvent):
                    # A retrying middleware below may start a new call in the same
                    # step; the new call is judged on its own.
                    held.clear()
                    called_tool = False
                observer.on_next(event)

            def release(emit: bool) -> None:
                if emit:
                    for event in held:
                        observer.on_next(event)
                held.clear()

            def on_completed() -> None:
                # A step that ends without ModelCallEndEvent (an inner middleware
                # answered without calling the model) is final unless it called a
                # tool, so its text is released too.
                release(not called_tool)
                observer.on_completed()

            def on_error(error: Exception) -> None:
                held.clear()
                observer.on_error(error)

            return source.subscribe(on_next, on_error, on_completed, scheduler=scheduler)

        return Observable(subscribe)
