"""Adding events: ``inject_before`` and ``inject_after``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..event import (
    AgentEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ._base import Operator, Relay, relay_op
from ._select import type_match

__all__ = ["inject_after", "inject_before"]

Predicate = type[AgentEvent] | tuple[type[AgentEvent], ...] | Callable[[AgentEvent], bool]
Factory = Callable[[AgentEvent], AgentEvent | Iterable[AgentEvent] | None]

_STARTS = {TextBlockStartEvent: "text", ThinkingBlockStartEvent: "thinking",
           DataBlockStartEvent: "data"}
_INSIDE = {TextBlockDeltaEvent: "text", TextBlockEndEvent: "text",
           ThinkingBlockDeltaEvent: "thinking", ThinkingBlockEndEvent: "thinking",
           DataBlockDeltaEvent: "data", DataBlockEndEvent: "data"}
_TOOL_CALLS = (ToolCallStartEvent, ToolCallDeltaEvent, ToolCallEndEvent)


def _predicate(who: str, predicate: Any) -> Callable[[AgentEvent], bool]:
    classes = predicate if isinstance(predicate, tuple) else (predicate,)
    if all(isinstance(c, type) for c in classes):
        for cls in classes:
            if not issubclass(cls, AgentEvent):
                raise TypeError(f"{who}(): {cls!r} is not an AgentEvent class")
        match = type_match(classes)
        yes, no = match.yes, match.no

        def is_one(event: AgentEvent) -> bool:
            kind = type(event)
            return kind in yes or (kind not in no and match.learn(kind))

        return is_one
    if callable(predicate):
        return predicate  # type: ignore[no-any-return]
    raise TypeError(f"{who}(): the predicate is an event class, a tuple of them or a "
                    f"function of the event, not {type(predicate).__name__}")


def _batch(who: str, made: Any) -> tuple[AgentEvent, ...]:
    """The factory's events, checked: events only, and whole blocks only (an injected
    delta or end of a block the batch did not open would break block ids; a tool call
    the model never made would be executed)."""
    if made is None:
        return ()
    events = (made,) if isinstance(made, AgentEvent) else tuple(made)
    opened: set[tuple[str, str, str]] = set()
    for event in events:
        if not isinstance(event, AgentEvent):
            raise TypeError(f"{who}(): the factory returned {type(event).__name__}, "
                            "expected AgentEvent(s)")
        kind = type(event)
        if isinstance(event, _TOOL_CALLS):
            raise TypeError(f"{who}(): injecting {kind.__name__} would make a tool call the "
                            "model never made; rewrite the model's events instead")
        block = _STARTS.get(kind)
        if block is not None:
            opened.add((block, event.reply_id, event.block_id))  # type: ignore[attr-defined]
            continue
        block = _INSIDE.get(kind)
        if block is not None:
            key = (block, event.reply_id, event.block_id)  # type: ignore[attr-defined]
            if key not in opened:
                raise ValueError(f"{who}(): the injected {kind.__name__} belongs to block "
                                 f"{key[2]!r}, which the injected events do not start")
            if kind in (TextBlockEndEvent, ThinkingBlockEndEvent, DataBlockEndEvent):
                opened.discard(key)
    if opened:
        raise ValueError(f"{who}(): the injected events leave block(s) "
                         f"{sorted(k[2] for k in opened)} open; end every block they start")
    return events


def _inject(
    who: str, predicate: Any, factory: Any, after: bool
) -> Operator[AgentEvent, AgentEvent]:
    test = _predicate(who, predicate)
    if not callable(factory):
        raise TypeError(f"{who}() takes a factory function, not {type(factory).__name__}")

    def start(relay: Relay) -> Callable[[AgentEvent], None]:
        forward = relay.forward

        def on_next(event: AgentEvent) -> None:
            if relay.stopped:
                return
            try:
                extra = _batch(who, factory(event)) if test(event) else None
            except Exception as exc:
                relay.fail(exc)
                return
            if not extra:
                forward(event)
                return
            if after:
                forward(event)
            for injected in extra:
                forward(injected)
            if not after:
                forward(event)

        return on_next

    return relay_op(f"{who}()", start)


def inject_before(predicate: Predicate, factory: Factory) -> Operator[AgentEvent, AgentEvent]:
    """Emit ``factory(event)`` (an event, several, or ``None`` for none) just before
    each event that matches ``predicate`` (an event class, a tuple of them, or a
    function of the event).

    Injected events must not break the stream's guarantees: a tool-call event is
    refused (it would be a call the model never made) and an injected block must be
    whole (start ... end); either mistake fails the stream with a clear error.
    """
    return _inject("inject_before", predicate, factory, after=False)


def inject_after(predicate: Predicate, factory: Factory) -> Operator[AgentEvent, AgentEvent]:
    """Emit ``factory(event)`` just after each event that matches ``predicate``; see
    :func:`inject_before`. The Java guide's stop-on-all-denied middleware is::

        next(input).pipe(aops.inject_after(
            AllToolsDeniedEvent,
            lambda e: RequestStopEvent("All tools denied", GenerateReason.ALL_TOOLS_DENIED),
        ))
    """
    return _inject("inject_after", predicate, factory, after=True)
