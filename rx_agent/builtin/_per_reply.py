"""Model input added once per reply: what RAG and long-term memory inject.

The lookup (passages, facts) runs at the reply's first reasoning step and is kept in
the call's ``RuntimeContext`` under the middleware's key, so later rounds of the same
reply reuse it; the message built from it joins the round's model input only (the
session context never stores it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from reactivex import Observable

from ..context import RuntimeContext
from ..event import AgentEvent
from ..message import Msg
from ..middleware import ExtensionPoint, Handler, ReasoningInput
from ..middleware._forms import awaiting

__all__ = ["inject_per_reply"]

T = TypeVar("T")


def inject_per_reply(
    ctx: RuntimeContext,
    key: str,
    query: str,
    lookup: Callable[[], Awaitable[list[T]]],
    message: Callable[[Sequence[T]], Msg],
    input: ReasoningInput,
    next: Handler[ReasoningInput],
    label: str,
) -> Observable[AgentEvent]:
    """``next`` with ``message(found)`` appended to the model input (nothing when
    ``lookup`` finds nothing); ``lookup`` runs once per reply and ``query``."""

    def with_found(found: Sequence[Any]) -> ReasoningInput:
        if not found:
            return input
        return input.with_(messages=(*input.messages, message(found)))

    cached = ctx.get(key)
    if isinstance(cached, tuple) and cached[0] == query:
        return next(with_found(cached[1]))

    async def fetch() -> Observable[AgentEvent]:
        found = await lookup()
        ctx.put(key, (query, found))
        return next(with_found(found))

    return awaiting(fetch, label, ExtensionPoint.ON_REASONING)
