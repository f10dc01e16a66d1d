"""Rewriting streamed text: ``map_text``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..event import AgentEvent, ModelCallEndEvent, TextBlockDeltaEvent, TextBlockEndEvent
from ._base import Handlers, Operator, Relay, relay_op, with_delta

__all__ = ["map_text"]


def _not_str(value: object) -> TypeError:
    return TypeError(f"map_text(): the function returned {type(value).__name__}, expected str")


def _rewritten(fn: Callable[[str], str], text: str) -> str:
    out = fn(text)
    if type(out) is not str:
        raise _not_str(out)
    return out


def map_text(
    fn: Callable[[str], str], across_deltas: bool = False
) -> Operator[AgentEvent, AgentEvent]:
    """Rewrite the text of text blocks with ``fn(text) -> str``.

    By default each ``TextBlockDeltaEvent`` is rewritten on its own, as it streams (a
    delta ``fn`` maps to ``""`` is dropped). With ``across_deltas=True`` a block's
    deltas are held until its ``TextBlockEndEvent`` and ``fn`` gets the whole block's
    text, so a rewrite can span delta boundaries; the block's start event passes at
    once, and one delta with the rewritten text is emitted just before its end event.
    Every other event passes unchanged and in order, so block ids stay valid; in
    ``on_model_call`` the rewritten text is what the context stores.
    """
    if not callable(fn):
        raise TypeError(f"map_text() takes a callable, not {type(fn).__name__}")
    return _across(fn) if across_deltas else _each(fn)


def _each(fn: Callable[[str], str]) -> Operator[AgentEvent, AgentEvent]:
    def start(relay: Relay) -> Callable[[AgentEvent], None]:
        forward = relay.forward

        def on_next(event: AgentEvent) -> None:
            if relay.stopped:
                return
            # Exact types, as the runtime's message builder reads them.
            if type(event) is not TextBlockDeltaEvent:
                forward(event)
                return
            old = event.delta
            try:
                new = fn(old)
                if type(new) is not str:
                    raise _not_str(new)
            except Exception as exc:
                relay.fail(exc)
                return
            if new == old:
                forward(event)
            elif new:
                forward(with_delta(event, new))

        return on_next

    return relay_op("map_text()", start)


class _Held:
    __slots__ = ("first", "parts")

    def __init__(self, first: TextBlockDeltaEvent) -> None:
        self.first = first
        self.parts = [first.delta]


def _across(fn: Callable[[str], str]) -> Operator[AgentEvent, AgentEvent]:
    def start(relay: Relay) -> Handlers:
        forward = relay.forward
        held: dict[tuple[str, str], _Held] = {}

        def release(part: _Held) -> bool:
            try:
                new = _rewritten(fn, "".join(part.parts))
            except Exception as exc:
                held.clear()
                relay.fail(exc)
                return False
            if new:
                forward(with_delta(part.first, new))
            return True

        def on_next(event: Any) -> None:  # exact-type dispatch below
            if relay.stopped:
                return
            kind = type(event)
            if kind is TextBlockDeltaEvent:
                key = (event.reply_id, event.block_id)
                part = held.get(key)
                if part is None:
                    held[key] = _Held(event)
                else:
                    part.parts.append(event.delta)
                return
            if kind is TextBlockEndEvent:
                part = held.pop((event.reply_id, event.block_id), None)
                if part is not None and not release(part):
                    return
            elif held and kind is ModelCallEndEvent:
                # A block left open by the source cannot outlive its model call.
                for key in [k for k in held if k[0] == event.reply_id]:
                    if not release(held.pop(key)):
                        return
            forward(event)

        def on_error(exc: Exception) -> None:
            held.clear()
            relay.on_error(exc)

        def on_completed() -> None:
            if relay.stopped:
                return
            while held:
                if not release(held.pop(next(iter(held)))):
                    return
            relay.on_completed()

        return on_next, on_error, on_completed

    return relay_op("map_text(across_deltas=True)", start)

