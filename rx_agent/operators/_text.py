"""Rewriting streamed text: ``map_text``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reactivex import Observable, abc
from reactivex.disposable import SingleAssignmentDisposable

from ..event import AgentEvent, ModelCallEndEvent, TextBlockDeltaEvent, TextBlockEndEvent
from ._base import Op, Operator, direct, subscribe_to, with_delta

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
    def operator(source: Observable[AgentEvent]) -> Observable[AgentEvent]:
        def subscribe(
            observer: abc.ObserverBase[AgentEvent], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            forward = observer.on_next
            upstream = SingleAssignmentDisposable()
            stopped = False

            def on_next(event: AgentEvent) -> None:
                nonlocal stopped
                if stopped:
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
                    stopped = True
                    observer.on_error(exc)
                    upstream.dispose()
                    return
                if new == old:
                    forward(event)
                elif new:
                    forward(with_delta(event, new))

            def on_error(exc: Exception) -> None:
                if not stopped:
                    observer.on_error(exc)

            def on_completed() -> None:
                if not stopped:
                    observer.on_completed()

            upstream.disposable = subscribe_to(source, on_next, on_error, on_completed,
                                               scheduler)
            return upstream

        return direct(subscribe)

    return Op("map_text()", operator)


class _Held:
    __slots__ = ("first", "parts")

    def __init__(self, first: TextBlockDeltaEvent) -> None:
        self.first = first
        self.parts = [first.delta]


def _across(fn: Callable[[str], str]) -> Operator[AgentEvent, AgentEvent]:
    def operator(source: Observable[AgentEvent]) -> Observable[AgentEvent]:
        def subscribe(
            observer: abc.ObserverBase[AgentEvent], scheduler: abc.SchedulerBase | None = None
        ) -> abc.DisposableBase:
            forward = observer.on_next
            upstream = SingleAssignmentDisposable()
            held: dict[tuple[str, str], _Held] = {}
            stopped = False

            def release(part: _Held) -> bool:
                nonlocal stopped
                try:
                    new = _rewritten(fn, "".join(part.parts))
                except Exception as exc:
                    stopped = True
                    held.clear()
                    observer.on_error(exc)
                    upstream.dispose()
                    return False
                if new:
                    forward(with_delta(part.first, new))
                return True

            def on_next(event: Any) -> None:  # exact-type dispatch below
                if stopped:
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
                if not stopped:
                    held.clear()
                    observer.on_error(exc)

            def on_completed() -> None:
                if stopped:
                    return
                while held:
                    if not release(held.pop(next(iter(held)))):
                        return
                observer.on_completed()

            upstream.disposable = subscribe_to(source, on_next, on_error, on_completed,
                                               scheduler)
            return upstream

        return direct(subscribe)

    return Op("map_text(across_deltas=True)", operator)

