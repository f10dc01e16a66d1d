"""RxPY's ``ops.map`` piped onto the runtime's own Observables, without RxPY's wiring
(docs/internals.md, "DirectObservable and the hot path").

A hook that writes ``next(input).pipe(ops.map(f))`` gets, from the runtime's ``pipe``,
a :class:`LeanMap` instead of RxPY's map Observable: the same items, errors and
disposal, but no ``Observable`` with its ``RLock``, no subscribe closure, no per-
subscription observer closure and one slotted sink instead of two lean sinks. Maps
piped onto a ``LeanMap`` (the next layer out mapping what this one mapped) fuse into
it: one sink calls every mapper in turn, as the chain of maps would, each map's
error ending the stream there.

Only RxPY's own ``map`` is recognized, by the closure ``ops.map(f)`` returns (probed
once, at import, against the installed reactivex); anything else, or a layout this
module does not know, is applied as RxPY defines it.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from reactivex import Observable, abc

from . import _direct
from ._direct import (
    _TRAMPOLINE_LOCAL,
    DirectObservable,
    callback_failed,
    lean_subscribe,
    subscribe_observer,
)

__all__ = ["NOT_MAP", "LeanMap", "MapSink", "map_of", "piped"]

NOT_MAP: Any = object()
"""What :func:`map_of` returns for an operator that is not RxPY's ``map``."""

_FUNCTION = types.FunctionType


def _probe() -> tuple[Any, int, int, int, Any, Any] | None:
    """Where ``ops.map(f)`` keeps ``f``: reactivex 5+ curries operators with one
    closure (free variables ``args``, ``fun``, ``kwargs``) whose ``fun`` is ``map_``."""
    try:
        from reactivex import operators as ops
        from reactivex.internal.basic import identity
    except ImportError:  # pragma: no cover - another reactivex layout
        return None

    def probe(value: Any) -> Any:
        return value

    op = ops.map(probe)
    code = getattr(op, "__code__", None)
    cells = getattr(op, "__closure__", None)
    if type(op) is not _FUNCTION or code is None or cells is None:
        return None  # pragma: no cover - reactivex 4's map is a plain closure
    names = code.co_freevars
    if sorted(names) != ["args", "fun", "kwargs"]:
        return None  # pragma: no cover - another layout
    args, fun, kwargs = (names.index(n) for n in ("args", "fun", "kwargs"))
    if cells[args].cell_contents != (probe,) or cells[kwargs].cell_contents:
        return None  # pragma: no cover - another layout
    return code, args, fun, kwargs, cells[fun].cell_contents, identity


_LAYOUT = _probe()


def map_of(op: Callable[[Any], Any]) -> Any:
    """The mapper of ``op`` if it is RxPY's ``ops.map(mapper)`` (``ops.map()``: the
    identity), else :data:`NOT_MAP`."""
    layout = _LAYOUT
    if layout is None or type(op) is not _FUNCTION:
        return NOT_MAP
    code, args_at, fun_at, kwargs_at, map_fn, identity = layout
    if op.__code__ is not code:
        return NOT_MAP
    cells = op.__closure__
    assert cells is not None  # the code has free variables
    if cells[fun_at].cell_contents is not map_fn:
        return NOT_MAP  # another curried operator (filter, take, ...)
    args = cells[args_at].cell_contents
    kwargs = cells[kwargs_at].cell_contents
    if kwargs:
        if len(kwargs) != 1 or "mapper" not in kwargs or args:
            return NOT_MAP  # RxPY would raise: let it
        mapper = kwargs["mapper"]
    elif not args:
        mapper = None
    else:
        try:
            (mapper,) = args
        except ValueError:
            return NOT_MAP  # RxPY would raise: let it
    return mapper or identity  # RxPY's own default


class MapSink:
    """One subscription of a :class:`LeanMap`: the upstream's observer and the
    disposable handed downstream. After a terminal signal or disposal it is silent and
    its upstream disposed, as a lean sink is (see ``LeanSink``)."""

    __slots__ = ("done", "down", "mappers", "next", "upstream")

    def __init__(self, down: abc.ObserverBase[Any], mappers: tuple[Callable[[Any], Any], ...]
                 ) -> None:
        self.down = down
        self.next = down.on_next
        self.mappers = mappers
        self.done = False
        self.upstream: abc.DisposableBase | None = None

    def on_next(self, value: Any) -> None:
        if self.done:
            return
        try:
            for mapper in self.mappers:
                value = mapper(value)
        except Exception as exc:  # the map's error ends the stream (RxPY's map)
            self.on_error(exc)
            return
        self.next(value)  # outside the try: a downstream error is not the map's

    def on_error(self, error: Exception) -> None:
        if self.done:
            return
        self.done = True
        try:
            self.down.on_error(error)
        finally:
            self._release()

    def on_completed(self) -> None:
        if self.done:
            return
        self.done = True
        try:
            self.down.on_completed()
        finally:
            self._release()

    def dispose(self) -> None:
        self.done = True
        self._release()

    def _release(self) -> None:
        up = self.upstream
        if up is not None:
            self.upstream = None
            try:
                up.dispose()
            except Exception as exc:
                callback_failed(exc, None)


abc.ObserverBase.register(MapSink)
abc.DisposableBase.register(MapSink)


class SingleMapSink(MapSink):
    """A :class:`MapSink` of one mapper (the usual case: no loop per item)."""

    __slots__ = ("mapper",)

    def __init__(self, down: abc.ObserverBase[Any], mappers: tuple[Callable[[Any], Any], ...]
                 ) -> None:
        super().__init__(down, mappers)
        self.mapper = mappers[0]

    def on_next(self, value: Any) -> None:
        if self.done:
            return
        try:
            value = self.mapper(value)
        except Exception as exc:
            self.on_error(exc)
            return
        self.next(value)


class LeanMap(DirectObservable[Any]):
    """RxPY's ``ops.map`` piped onto one of the runtime's Observables (``_rx/_map.py``):
    ``upstream`` through ``mappers`` in turn, with one slotted sink a subscription.

    Subscribed outside RxPY's trampoline it runs the thread's trampoline as
    :func:`subscribe_top` does: the upstream may be a user's chain. ``named`` is the
    hook whose output this is (set by its layer): a failing dispose action of an RxPY
    chain upstream is reported naming it."""

    def __init__(self, upstream: Observable[Any],
                 mappers: tuple[Callable[[Any], Any], ...]) -> None:
        self._subscribe = None
        self.upstream = upstream
        self.mappers = mappers
        self.named: object = None

    def direct(
        self, observer: abc.ObserverBase[Any], scheduler: abc.SchedulerBase | None = None
    ) -> abc.DisposableBase:
        mappers = self.mappers
        sink = (SingleMapSink if len(mappers) == 1 else MapSink)(observer, mappers)
        try:
            tramp = _TRAMPOLINE_LOCAL.tramp
            idle = tramp._idle
        except AttributeError:  # pragma: no cover - another reactivex layout
            idle = False
        if not idle:
            self._attach(sink, scheduler)
            return sink  # type: ignore[return-value]  # registered as a DisposableBase
        tramp._idle = False
        try:
            self._attach(sink, scheduler)
            if tramp._queue.items:
                tramp._run()
        finally:
            tramp._idle = True
            if tramp._queue.items:  # left by an item that raised
                tramp._queue.clear()
        return sink  # type: ignore[return-value]  # registered as a DisposableBase

    def _attach(self, sink: MapSink, scheduler: abc.SchedulerBase | None) -> None:
        upstream = self.upstream
        kind = type(upstream)
        if scheduler is not None:  # a subscriber's scheduler (a TestScheduler) goes on up
            try:
                up = upstream.subscribe(sink,  # type: ignore[arg-type]  # registered
                                        scheduler=scheduler)
            except Exception as exc:
                sink.on_error(exc)
                return
        elif kind is Observable and self.named is not None:
            up = lean_subscribe(upstream._subscribe_core, sink.on_next, sink.on_error,
                                sink.on_completed, None, self.named)
        else:
            up = subscribe_observer(upstream, sink)
        # Published before the flag is read, as in lean_subscribe.
        sink.upstream = up
        if sink.done:
            sink.upstream = None
            up.dispose()


def piped(source: Any, op: Callable[[Any], Any]) -> Any:
    """``op(source)`` as a :class:`LeanMap` if ``op`` is RxPY's map (fused into
    ``source`` when that is a ``LeanMap`` already), else ``None``."""
    mapper = map_of(op)
    if mapper is NOT_MAP:
        return None
    if type(source) is LeanMap:  # fused: one sink calls both mappers
        return LeanMap(source.upstream, (*source.mappers, mapper))
    return LeanMap(source, (mapper,))


_direct._map_piped = piped
