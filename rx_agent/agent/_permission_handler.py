"""The permission handler: a callback that decides "ask" tool calls (Blade's
``permissionHandler``).

Without one, a call whose permission is ``ask`` pauses the reply for a human answer
(``RequireUserConfirmEvent``, then a later call carries the
``UserConfirmResultEvent``). With ``permission_handler(fn)`` on the builder (or
``permission_handler=fn``), the runtime first asks ``fn(call, ctx)`` while the reply is
still running: a UI can show the call, wait for the user's click and answer, and the
reply goes on without ending. ``fn`` may answer:

* ``True`` / ``"allow"``: run the call as the model made it;
* ``False`` / ``"deny"``: a ``DENIED`` result (``"Denied by the permission handler."``);
* ``ConfirmResult(call, confirmed, reason=None, rules=None)``: as the human answer
  would (edited arguments run and are stored; ``reason`` is the denial's text;
  ``rules`` are remembered for the session);
* ``None`` / ``"ask"``: no decision: the call pauses for a human as before.

``fn`` may be ``async def`` (awaited on the call's loop) or a plain function (run in
a worker thread, so it may block, e.g. on ``input()``). An exception in it denies the
call (fails closed, as a failing rule predicate does) and is logged; an answer of
another type is a ``TypeError``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from ..context import AgentState, RuntimeContext
from ..message import ToolUseBlock
from ..permissions import ConfirmResult, Permission, PermissionLike
from ._hitl import apply_edits

__all__ = [
    "DEFAULT_DENIAL",
    "PermissionAnswer",
    "PermissionHandler",
    "check_permission_handler",
    "consult",
]

logger = logging.getLogger("rx_agent.permissions")

PermissionAnswer: TypeAlias = bool | PermissionLike | ConfirmResult | None
"""What a permission handler answers for one call (see the module docstring)."""

PermissionHandler: TypeAlias = Callable[
    [ToolUseBlock, RuntimeContext], PermissionAnswer | Awaitable[PermissionAnswer]
]
"""``fn(call, ctx) -> answer`` (or an awaitable of it), asked about each "ask" call."""

DEFAULT_DENIAL = "Denied by the permission handler."


def check_permission_handler(handler: object) -> None:
    """A ``TypeError`` unless ``handler`` can be called as ``fn(call, ctx)``."""
    if not callable(handler):
        raise TypeError("permission_handler must be callable as fn(call, ctx), "
                        f"got {type(handler).__name__}")
    try:
        inspect.signature(handler).bind(None, None)
    except TypeError:
        name = getattr(handler, "__name__", type(handler).__name__)
        raise TypeError(f"permission_handler is called as fn(call, ctx); {name} does not "
                        "take those two arguments") from None
    except ValueError:  # not introspectable (a builtin): trust it
        pass


def _is_async(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn) or (
        not inspect.isfunction(fn) and inspect.iscoroutinefunction(type(fn).__call__)
    )


async def consult(
    handler: PermissionHandler, call: ToolUseBlock, ctx: RuntimeContext, state: AgentState
) -> ToolUseBlock | str | None:
    """Ask ``handler`` about ``call``: the call to run (edits stored), the reason it is
    denied, or ``None`` when the handler leaves it to a human."""
    try:
        if _is_async(handler):
            answer = await handler(call, ctx)  # type: ignore[misc]
        else:
            answer = await asyncio.to_thread(handler, call, ctx)
            if inspect.isawaitable(answer):
                answer = await answer
    except Exception as exc:
        logger.warning("the permission handler failed on tool call %s (%s); it is denied",
                       call.id, call.name, exc_info=True)
        return f"permission handler failed: {type(exc).__name__}: {exc}"
    return _verdict(answer, call, state)


def _verdict(answer: Any, call: ToolUseBlock, state: AgentState) -> ToolUseBlock | str | None:
    if answer is None:
        return None
    if isinstance(answer, bool):
        return call if answer else DEFAULT_DENIAL
    if isinstance(answer, str):
        try:
            decision = Permission(answer)
        except ValueError:
            raise TypeError(f"the permission handler answered {answer!r} for tool call "
                            f"{call.id!r}; a str answer is 'allow', 'deny' or 'ask'") from None
        if decision is Permission.ASK:
            return None
        return call if decision is Permission.ALLOW else DEFAULT_DENIAL
    if isinstance(answer, ConfirmResult):
        edited = answer.tool_call
        if edited.id != call.id or edited.name != call.name:
            raise ValueError(f"the permission handler answered for tool call {edited.id!r} "
                             f"({edited.name}) when asked about {call.id!r} ({call.name})")
        if answer.rules:
            state.permission_rules.extend(answer.rules)
        if not answer.confirmed:
            return answer.reason or DEFAULT_DENIAL
        if edited.input == call.input:
            return call
        apply_edits(state, {call.id: edited})  # the stored call shows what runs
        return edited.model_copy(update={"input": dict(edited.input), "raw_input": None})
    raise TypeError(f"the permission handler answered {type(answer).__name__} for tool call "
                    f"{call.id!r}; answer True / False, 'allow' / 'deny' / 'ask', None or a "
                    "ConfirmResult")
