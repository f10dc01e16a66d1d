"""The hooks that are not onion layers: the transformer and the two notifications.

Each hook may answer with a value, an Observable or an awaitable. How one answer is
settled is one function per kind of point (:func:`settle_prompt`,
:func:`settle_awaitable`, :func:`settle_awaited`, named by the point's row in
:mod:`._points`), used by the runtime's loops below and by the test harness, which
passes a :class:`Watch` to see the answer's items on its own clock. :func:`settle` turns
an answer into its items, and :func:`unexpected` is the one error text for an answer
of the wrong kind.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc
from reactivex import operators as ops

from .._rx import await_observable
from ..context import AgentState, RuntimeContext
from ..message import Msg
from ._explain import field_call
from .inputs import AgentFinishOutcome
from .types import Agent

__all__ = [
    "DONE",
    "Watch",
    "notify_finish",
    "notify_state_ready",
    "settle",
    "settle_awaitable",
    "settle_awaited",
    "settle_prompt",
    "system_prompt",
    "unexpected",
]

Hooks = Sequence[tuple[Any, Any]]


@dataclass(frozen=True, slots=True)
class Watch:
    """Who watches an answer being settled (the test harness): ``seen`` gets each item
    as it arrives, and an Observable answer is subscribed with ``scheduler`` (its
    virtual clock). The runtime passes none."""

    scheduler: rxabc.SchedulerBase | None
    seen: Callable[[Any], None]


async def settle(value: Any, watch: Watch | None = None) -> list[Any]:
    """A hook's answer as a list of items: an Observable's items (run to completion),
    an awaitable's result, or the value itself; ``[]`` for ``None``."""
    if value is None:
        return []
    if isinstance(value, Observable):
        if watch is not None:
            value = _watched(value.pipe(ops.do_action(watch.seen)), watch.scheduler)
        items: list[Any] = await await_observable(value.pipe(ops.to_list()), [])
        return items
    if inspect.isawaitable(value):
        value = await value
        if value is None:
            return []
    if watch is not None:
        watch.seen(value)
    return [value]


def _watched(source: Observable[Any], scheduler: rxabc.SchedulerBase | None) -> Observable[Any]:
    """``source`` subscribed with ``scheduler``, whoever subscribes it."""

    def subscribe(observer: rxabc.ObserverBase[Any],
                  _scheduler: rxabc.SchedulerBase | None = None) -> rxabc.DisposableBase:
        return source.subscribe(observer, scheduler=scheduler)

    return Observable(subscribe)


def unexpected(label: str, method: str, what: str, expected: str) -> TypeError:
    return TypeError(f"{label}.{method}() {what}; expected {expected}")


async def system_prompt(
    hooks: Hooks, labels: Sequence[str], agent: Agent, ctx: RuntimeContext, base: str
) -> str:
    """``base.strip()`` through each ``on_system_prompt`` hook, left to right."""
    prompt = base.strip()
    for (_mw, hook), label in zip(hooks, labels, strict=True):
        try:
            value = hook(agent, ctx, prompt)
            if not isinstance(value, str):  # the common case answers a str at once
                value = await settle_prompt(label, "on_system_prompt", value)
        except TypeError as exc:
            better = field_call(exc, f"{label}.on_system_prompt()")
            if better is exc:
                raise
            raise better from exc
        prompt = value
    return prompt


async def settle_prompt(label: str, method: str, value: Any, watch: Watch | None = None) -> str:
    """A transformer's answer (``label``'s hook ``method``): a ``str``, a one-item
    Observable of one or an awaitable of either, settled and checked."""
    what = "returned None"
    if value is not None and not isinstance(value, Observable) and inspect.isawaitable(value):
        value, what = await value, "returned None from its coroutine"
    if value is None:
        raise unexpected(label, method, f"{what} (did it forget `return current_prompt`?)",
                         "a str")
    if isinstance(value, Observable):
        items = await settle(value, watch)
        if len(items) != 1:
            raise unexpected(label, method, f"emitted {len(items)} items", "exactly one str")
        value = items[0]
    elif watch is not None:
        watch.seen(value)
    if not isinstance(value, str):
        raise unexpected(label, method, f"produced {type(value).__name__}", "a str")
    return value


async def settle_awaitable(label: str, method: str, value: Any,
                           watch: Watch | None = None) -> None:
    """A notification's answer: an awaitable is awaited (``async def``), any other
    answer ignored."""
    if value is not None and inspect.isawaitable(value):
        await settle(value, watch)


async def settle_awaited(label: str, method: str, value: Any, watch: Watch | None = None) -> None:
    """An awaited notification's answer: ``None``, or an Observable (run to completion)
    or an awaitable (awaited); anything else is a mistake."""
    if value is None:
        return
    if not isinstance(value, Observable) and not inspect.isawaitable(value):
        raise unexpected(label, method, f"returned {type(value).__name__}",
                         "None, an Observable or an awaitable")
    await settle(value, watch)


def notify_state_ready(
    hooks: Hooks, agent: Agent, ctx: RuntimeContext, state: AgentState, input_messages: list[Msg]
) -> Awaitable[None]:
    """Run ``on_agent_state_ready`` in plan order; an exception propagates unchanged.

    Synchronous hooks run before this returns. The result is awaitable: a no-op when
    every hook was synchronous; when one returned an awaitable (an ``async def`` hook)
    it awaits that and runs the remaining hooks, so it must be awaited.
    """
    for i, (_mw, hook) in enumerate(hooks):
        result = hook(agent, ctx, state, input_messages)
        if result is not None and inspect.isawaitable(result):
            return _state_ready_rest(result, hooks[i + 1:], agent, ctx, state, input_messages)
    return DONE


async def _state_ready_rest(
    pending: Awaitable[Any],
    hooks: Hooks,
    agent: Agent,
    ctx: RuntimeContext,
    state: AgentState,
    input_messages: list[Msg],
) -> None:
    await pending
    for _mw, hook in hooks:
        result = hook(agent, ctx, state, input_messages)
        if result is not None and inspect.isawaitable(result):
            await result


async def notify_finish(
    hooks: Hooks,
    labels: Sequence[str],
    agent: Agent,
    ctx: RuntimeContext,
    result: Msg | None,
    error: BaseException | None,
) -> BaseException | None:
    """Run ``on_agent_finish`` in plan order, each answer settled before the next.

    Returns the call's error: ``error``, or the exception of the first hook that
    failed (later hooks do not run; ``error`` becomes its ``__context__``).
    """
    if not hooks:
        return error
    outcome = AgentFinishOutcome(
        result=result,
        error=error,
        reason=result.generate_reason if result is not None else None,
    )
    for (_mw, hook), label in zip(hooks, labels, strict=True):
        try:
            value = hook(agent, ctx, outcome)
            if value is not None:
                await settle_awaited(label, "on_agent_finish", value)
        except Exception as exc:
            if error is not None and exc is not error:
                exc.__context__ = error
            return field_call(exc, f"{label}.on_agent_finish()")
    return error


class _Done:
    """The awaitable of a state-ready notification that already finished."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # makes this a generator: awaiting it finishes at once


DONE = _Done()
