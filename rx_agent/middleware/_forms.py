"""How the plan calls a hook: the signature forms it accepts, and ``async def`` hooks.

A hook may be written with the pinned signature (``(agent, ctx, input, next)``) or,
as some Java examples write it, without ``ctx``; the form is read once per function at
build time and only the ctx-less form pays for an adapter. An ``async def`` onion
hook is awaited per subscription before its Observable is subscribed (an async
generator hook is :mod:`._generators`'). The parameters of each hook are its point's
row in :mod:`._points`.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import Callable
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from .._rx import (
    DirectObservable,
    LeanMap,
    LeanObservable,
    on_loop,
    running_loop,
    runtime_loop,
    subscribe_direct,
)
from ..errors import RxAgentError
from ..event import AgentEvent
from ._explain import field_call
from ._points import SPECS, ExtensionPoint

__all__ = [
    "FULL",
    "OWN_INPUT",
    "AsyncHook",
    "BoundNext",
    "PlanError",
    "awaiting",
    "form",
    "without_ctx",
]


class PlanError(RxAgentError, TypeError):
    """A middleware declares something the plan cannot use."""


# The full form is the parameters of the point's row; Java's guide also writes some
# hooks without ``ctx`` (``onModelCall(agent, input, next)``), which the plan adapts.
FULL, _NO_CTX = 0, 1
# Signature form per point and hook function, so that building many agents inspects
# each once.
_forms: dict[ExtensionPoint, weakref.WeakKeyDictionary[Any, int | str]] = {}


def _accepts(sig: inspect.Signature, count: int) -> bool:
    try:
        sig.bind(*range(count))
    except TypeError:
        return False
    return True


def form(label: str, point: ExtensionPoint, hook: Callable[..., Any]) -> int:
    """Which calling form ``hook`` accepts: the full one, or Java's ctx-less one."""
    func = getattr(hook, "__func__", None)
    cacheable = inspect.isfunction(func)
    seen = _forms.get(point)
    if seen is None:
        seen = _forms[point] = weakref.WeakKeyDictionary()
    known = seen.get(func) if cacheable else None
    if known is None:
        known = _inspect_form(point, hook)
        if cacheable:
            seen[func] = known
    if isinstance(known, str):
        raise PlanError(f"{label}.{point.value}{known}")
    return known


def _inspect_form(point: ExtensionPoint, hook: Callable[..., Any]) -> int | str:
    try:
        sig = inspect.signature(hook)
    except (TypeError, ValueError):  # not introspectable (a builtin): assume the full form
        return FULL
    params = SPECS[point].params
    if _accepts(sig, len(params)):
        return FULL
    if _accepts(sig, len(params) - 1):
        return _NO_CTX
    full = ", ".join(("self", *params))
    short = ", ".join(("self", *(p for p in params if p != "ctx")))
    return (
        f"{sig} cannot be called: the hook must be `def {point.value}({full})` "
        f"(or, as some Java examples write it, `def {point.value}({short})`)"
    )


def without_ctx(hook: Callable[..., Any]) -> Callable[..., Any]:
    """Adapt a ctx-less hook to the plan's calling convention (only that form pays)."""

    def call(agent: Any, ctx: Any, *rest: Any) -> Any:
        return hook(agent, *rest)

    return call


OWN_INPUT: Any = object()
"""The default of ``next``'s argument: ``next()`` passes the hook's own input on."""


class BoundNext:
    """``next`` for a hook that runs after the layer called it (an ``async def``
    hook): the layer inside, plus the input the hook was called with, so that
    ``next()`` (AgentScope Python's ``next_handler()``) passes it on."""

    __slots__ = ("_inner", "_input")

    def __init__(self, inner: Callable[[Any], Observable[AgentEvent]], inp: Any) -> None:
        self._inner = inner
        self._input = inp

    def __call__(self, inp: Any = OWN_INPUT) -> Observable[AgentEvent]:
        return self._inner(self._input if inp is OWN_INPUT else inp)

    apply = __call__  # Java's ``next.apply(input)``


class AsyncHook:
    """An ``async def`` onion hook as a plain one: it returns an Observable that, per
    subscription, awaits the hook and then subscribes the Observable it returned."""

    __slots__ = ("_hook", "_label", "_point")

    def __init__(self, hook: Callable[..., Any], label: str, point: ExtensionPoint) -> None:
        self._hook = hook
        self._label = label
        self._point = point

    def __call__(self, agent: Any, ctx: Any, inp: Any, inner: Any) -> Observable[AgentEvent]:
        def start() -> Any:
            return self._hook(agent, ctx, inp, BoundNext(inner, inp))

        return awaiting(start, self._label, self._point)


def awaiting(
    start: Callable[[], Any], label: str, point: ExtensionPoint
) -> Observable[AgentEvent]:
    """A cold Observable: each subscription awaits ``start()`` on an event loop (the
    subscriber's, else the runtime's), then subscribes the Observable it produced.
    Disposing before the awaitable finishes cancels it."""
    called_on = running_loop()

    def subscribe(
        observer: rxabc.ObserverBase[AgentEvent], scheduler: rxabc.SchedulerBase | None = None
    ) -> rxabc.DisposableBase:
        inner = SingleAssignmentDisposable()
        disposed = False

        async def run() -> None:
            try:
                out = start()
                if not isinstance(out, Observable) and inspect.isawaitable(out):
                    out = await out
            except BaseException as exc:
                if disposed:
                    return
                if not isinstance(exc, Exception):  # e.g. an inner await was cancelled
                    exc = RuntimeError(f"{label}.{point.value}() raised {exc!r}")
                observer.on_error(field_call(exc, f"{label}.{point.value}()"))
                return
            if disposed:
                return
            if not isinstance(out, Observable):
                observer.on_error(
                    TypeError(
                        f"{label}.{point.value}() returned {type(out).__name__} from its "
                        "coroutine, expected an Observable (did it forget to "
                        "`return next(input)`?)"
                    )
                )
                return
            if scheduler is None:
                if type(out) is Observable:  # named in a report of a failing dispose action
                    out = LeanObservable(out, f"{label}.{point.value}()")
                elif type(out) is LeanMap and out.named is None:
                    out.named = f"{label}.{point.value}()"
                inner.disposable = subscribe_direct(
                    out, observer.on_next, observer.on_error, observer.on_completed
                )
            else:  # a subscriber's scheduler (a TestScheduler, say) reaches the hook's stream
                inner.disposable = out.subscribe(observer.on_next, observer.on_error,
                                                 observer.on_completed, scheduler=scheduler)

        task = asyncio.get_running_loop().create_task(run())

        def dispose() -> None:
            nonlocal disposed
            disposed = True
            if not task.done():
                task.cancel()
            inner.dispose()

        return Disposable(dispose)

    def subscribe_on_a_loop(
        observer: rxabc.ObserverBase[AgentEvent], scheduler: rxabc.SchedulerBase | None = None
    ) -> rxabc.DisposableBase:
        loop = running_loop() or called_on or runtime_loop()
        return on_loop(loop, subscribe)(observer, scheduler)

    return DirectObservable(subscribe_on_a_loop)
