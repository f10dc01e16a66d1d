"""A model call outside the loop (a summary, a routing decision), as block events.

Built-ins that ask a model something of their own use :func:`model_events`: the same
chunk-to-event rules as the loop's own calls, without its retries, its
``on_model_call`` chain or its context, so the answer never becomes part of the reply.
Callers usually wrap the events in :class:`~rx_agent.NestedEvent` before they join a
stream, so consumers of the reply's text never mistake them for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import SingleAssignmentDisposable

from .._record import new_id
from ..event import AgentEvent, ModelCallStartEvent, TextBlockDeltaEvent
from ..message import Msg
from ..middleware.types import ModelLike
from ..options import GenerateOptions
from ._blocks import ChunkConverter

__all__ = ["model_events", "text_of"]


def model_events(
    model: ModelLike,
    messages: Sequence[Msg],
    tools: Sequence[dict[str, Any]] = (),
    options: GenerateOptions | None = None,
    source: str | None = None,
) -> Observable[AgentEvent]:
    """One call of ``model`` as ``ModelCallStart``, block events, ``ModelCallEnd``;
    cold, and disposing it cancels the model stream."""

    def subscribe(
        observer: rxabc.ObserverBase[AgentEvent], scheduler: rxabc.SchedulerBase | None = None
    ) -> rxabc.DisposableBase:
        reply_id = new_id()
        observer.on_next(ModelCallStartEvent.make(source, reply_id=reply_id,
                                                  model_name=model.name))
        converter = ChunkConverter(reply_id, source or "", observer.on_next)
        subscription = SingleAssignmentDisposable()
        failed = False

        def on_next(chunk: Any) -> None:
            nonlocal failed
            if failed:
                return
            try:
                converter.feed(chunk)
            except Exception as exc:  # a chunk the converter cannot read
                failed = True
                subscription.dispose()
                observer.on_error(exc)

        def on_error(exc: Exception) -> None:
            if not failed:
                observer.on_error(exc)

        def on_completed() -> None:
            if not failed:
                converter.finish()
                observer.on_completed()

        stream = model.stream(list(messages), list(tools), options or GenerateOptions())
        subscription.disposable = stream.subscribe(on_next, on_error, on_completed,
                                                   scheduler=scheduler)
        return subscription

    return Observable(subscribe)


def text_of(events: Sequence[AgentEvent]) -> str:
    """The visible text of a call's events (its text deltas, joined)."""
    return "".join(e.delta for e in events if type(e) is TextBlockDeltaEvent)
