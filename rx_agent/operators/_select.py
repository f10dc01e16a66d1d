"""Selecting and assembling: ``of_type``, ``text``, ``buffer_round``, ``collect_message``.

These read a stream; their output is not an event stream a hook would return (except
``of_type``, which keeps the events it selects as they are).
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar, overload

from reactivex import Observable, abc

from ..agent._blocks import MessageAccumulator
from ..event import AgentEvent, ModelCallEndEvent, ModelCallStartEvent, TextBlockDeltaEvent
from ..message import Msg
from ._base import Op, Operator, direct, subscribe_to

__all__ = ["buffer_round", "collect_message", "of_type", "text"]

E = TypeVar("E", bound=AgentEvent)
E2 = TypeVar("E2", bound=AgentEvent)


def _event_classes(who: str, classes: tuple[Any, ...]) -> tuple[type[AgentEvent], ...]:
    if not classes:
        raise TypeError(f"{who}() needs at least one event class, e.g. {who}(TextBlockDeltaEvent)")
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, AgentEvent)):
            raise TypeError(f"{who}(): {cls!r} is not an AgentEvent class")
    return classes


class TypeMatch:
    """``isinstance(event, classes)`` answered by set lookups: the answer per concrete
    class is computed once (pydantic's ABC ``isinstance`` is the slow path), and one
    matcher serves every operator built for the same classes (hooks build theirs per
    call)."""

    __slots__ = ("classes", "no", "yes")

    def __init__(self, classes: tuple[type[AgentEvent], ...]) -> None:
        self.classes = classes
        self.yes: set[type] = set()
        self.no: set[type] = set()

    def learn(self, kind: type) -> bool:
        hit = issubclass(kind, self.classes)
        (self.yes if hit else self.no).add(kind)
        return hit


@functools.lru_cache(maxsize=256)
def type_match(classes: tuple[type[AgentEvent], ...]) -> TypeMatch:
    return TypeMatch(classes)


@overload
def of_type(cls: type[E], /) -> Operator[AgentEvent, E]: ...
@overload
def of_type(cls: type[E], cls2: type[E2], /) -> Operator[AgentEvent, E | E2]: ...
@overload
def of_type(*classes: type[AgentEvent]) -> Operator[AgentEvent, AgentEvent]: ...
def of_type(*classes: type[AgentEvent]) -> Operator[AgentEvent, Any]:
    """Keep the events that are instances of any of ``classes`` (Reactor's ``ofType``).

    The events pass unchanged; everything else is dropped. A selection for reading a
    stream (a caller, a tap, a test): a hook that returns it drops the other events
    on purpose, block boundaries included.
    """
    match = type_match(_event_classes("of_type", classes))
    yes, no = match.yes, match.no

    def operator(source: Observable[AgentEvent]) -> Observable[Any]:
        def subscribe(
            observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            forward = observer.on_next

            def on_next(event: AgentEvent) -> None:
                kind = type(event)
                if kind in yes or (kind not in no and match.learn(kind)):
                    forward(event)

            return subscribe_to(source, on_next, observer.on_error, observer.on_completed,
                                scheduler)

        return direct(subscribe)

    return Op("of_type()", operator)


def text() -> Operator[AgentEvent, str]:
    """The text deltas as ``str`` (``TextBlockDeltaEvent.delta``; thinking excluded).

    ``agent.stream(q).pipe(aops.text())`` prints a reply as it streams.
    """

    def operator(source: Observable[AgentEvent]) -> Observable[str]:
        def subscribe(
            observer: abc.ObserverBase[str], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            forward = observer.on_next

            def on_next(event: AgentEvent) -> None:
                if type(event) is TextBlockDeltaEvent:
                    forward(event.delta)

            return subscribe_to(source, on_next, observer.on_error, observer.on_completed,
                                scheduler)

        return direct(subscribe)

    return Op("text()", operator)


def buffer_round() -> Operator[AgentEvent, list[AgentEvent]]:
    """One list per model call: its events from ``ModelCallStartEvent`` to
    ``ModelCallEndEvent``, emitted at the end event.

    Events outside a model call (tool results, lifecycle events) belong to no round
    and are skipped. A ``ModelCallStartEvent`` while a round is open starts over (the
    open attempt failed and was retried), as the runtime's message does. On
    completion an unfinished round is emitted as it is; on error it is dropped.
    """

    def operator(source: Observable[AgentEvent]) -> Observable[list[AgentEvent]]:
        def subscribe(
            observer: abc.ObserverBase[list[AgentEvent]],
            scheduler: abc.SchedulerBase | None = None,
        ) -> abc.DisposableBase:
            current: list[AgentEvent] | None = None

            def on_next(event: AgentEvent) -> None:
                nonlocal current
                kind = type(event)
                if kind is ModelCallStartEvent:
                    current = [event]
                elif current is not None:
                    current.append(event)
                    if kind is ModelCallEndEvent:
                        done, current = current, None
                        observer.on_next(done)

            def on_completed() -> None:
                nonlocal current
                if current:
                    done, current = current, None
                    observer.on_next(done)
                observer.on_completed()

            return subscribe_to(source, on_next, observer.on_error, on_completed, scheduler)

        return direct(subscribe)

    return Op("buffer_round()", operator)


def collect_message() -> Operator[AgentEvent, Msg]:
    """The assistant :class:`~rx_agent.Msg` of each model call, as the runtime builds
    the one a round stores: text, thinking, data blocks and tool calls, with usage.

    Emitted at each ``ModelCallEndEvent`` (a call that produced nothing emits
    nothing); a ``ModelCallStartEvent`` starts over. On completion, content seen after
    the last end event is emitted as one more message. The message's ``name`` is the
    ``source`` of the call's ``ModelCallStartEvent`` (the agent's name).
    """

    def operator(source: Observable[AgentEvent]) -> Observable[Msg]:
        def subscribe(
            observer: abc.ObserverBase[Msg], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            acc = MessageAccumulator()
            name: list[str | None] = [None]

            def emit() -> None:
                if not acc.empty:
                    msg = acc.build(name[0])
                    acc.reset()
                    observer.on_next(msg)

            def on_next(event: AgentEvent) -> None:
                acc.feed(event)
                kind = type(event)
                if kind is ModelCallStartEvent:
                    name[0] = event.source
                elif kind is ModelCallEndEvent:
                    emit()

            def on_completed() -> None:
                emit()
                observer.on_completed()

            return subscribe_to(source, on_next, observer.on_error, on_completed, scheduler)

        return direct(subscribe)

    return Op("collect_message()", operator)
