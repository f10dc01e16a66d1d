"""The hooks that are not onion layers: the transformer and the two notifications.

Each hook may answer with a value, an Observable or an awaitable; :func:`settle`
is the one place that turns that answer into a result, and :func:`unexpected` the one
error text for an answer of the wrong kind.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Generator, Sequence
from typing import Any

from reactivex import Observable
from reactivex import operators as ops

from .._rx import await_observable
from ..context import AgentState, RuntimeContext
from ..message import Msg
from ._explain import field_call
from .inputs import AgentFinishOutcome
from .types import Agent

__all__ = ["DONE", "notify_finish", "notify_state_ready", "settle", "system_prompt", "unexpected"]

Hooks = Sequence[tuple[Any, Any]]


async def settle(value: Any) -> list[Any]:
    """A hook's answer as a list of items: an Observable's items (run to completion),
    an awaitable's result, or the value itself; ``[]`` for ``None``."""
    if value is None:
        return []
    if isinstance(value, Observable):
        items: list[Any] = await await_observable(value.pipe(ops.to_list()), [])
        return items
    if inspect.isawaitable(value):
        value = await value
        return [] if value is None else [value]
    return [value]


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
                value = await _prompt(label, value)
        except TypeError as exc:
            better = field_call(exc, f"{label}.on_system_prompt()")
            if better is exc:
                raise
            raise better from exc
        prompt = value
    return prompt


_FORGOT = "(did it forget `return current_prompt`?)"


async def _prompt(label: str, value: Any) -> str:
    """An ``on_system_prompt`` answer that is not a ``str``: settled, and checked."""
    what = "returned None"
    if value is not None and not isinstance(value, Observable) and inspect.isawaitable(value):
        value, what = await value, "returned None from its coroutine"
    if value is None:
        raise unexpected(label, "on_system_prompt", f"{what} {_FORGOT}", "a str")
    if isinstance(value, Observable):
        items = await settle(value)
        if len(items) != 1:
            raise unexpected(label, "on_system_prompt", f"emitted {len(items)} items",
                             "exactly one str")
        value = items[0]
    if not isinstance(value, str):
        raise unexpected(label, "on_system_prompt", f"produced {type(value).__name__}", "a str")
    return value


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
            if value is None:
                continue
            if not isinstance(value, Observable) and not inspect.isawaitable(value):
                raise unexpected(label, "on_agent_finish", f"returned {type(value).__name__}",
                                 "None, an Observable or an awaitable")
            await settle(value)
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
