"""Running one tool call of a toolkit: the runtime's one way to run a tool.

:func:`execute` finds the call's tool and runs it through the tool's middlewares
(:mod:`._middleware`; the tool alone, :mod:`._run`, when it has none). It never
raises but for the cancellation of the call itself (and a broken tool-middleware
contract, or an error of the agent's ``starting`` check): a missing tool, bad
arguments and any exception of the tool become an ERROR result the model can read,
so the loop and the event loop go on.
"""

from __future__ import annotations

from ..context import RuntimeContext
from ..event import ToolResultEndEvent, ToolResultStartEvent, ToolResultTextDeltaEvent
from ..message import ToolResultBlock, ToolResultState, ToolUseBlock
from ._call import CallOwner
from ._middleware import run_call
from ._run import Emit, Starting, run_direct, tool_error_text
from .toolkit import Toolkit

__all__ = ["Emit", "execute", "tool_error_text"]


async def execute(
    toolkit: Toolkit,
    call: ToolUseBlock,
    ctx: RuntimeContext | None,
    emit: Emit,
    source: str | None,
    reply_id: str,
    timeout: float | None = None,
    owner: CallOwner | None = None,
    starting: Starting | None = None,
) -> ToolResultBlock:
    """Execute ``call`` with the toolkit's tool of that name, emitting its result
    events (``reply_id`` is the batch's); return its result. Synchronous tools run on
    the toolkit's executor, off the event loop.

    A call that runs longer than the tool's ``timeout`` (else ``timeout``, the
    agent's default) is cancelled and answered with an ERROR result. ``owner`` (the
    agent call) is what :func:`current_tool_call` tells the tool about its caller;
    ``starting`` is called right before the tool's function is entered (see
    :data:`~rx_agent.tool._run.Starting`)."""
    tool = toolkit.get(call.name)
    if tool is None:
        names = ", ".join(toolkit.names) or "none"
        common = {"reply_id": reply_id, "tool_call_id": call.id, "tool_call_name": call.name}
        text = f"Error: there is no tool named {call.name!r}. Available tools: {names}."
        emit(ToolResultStartEvent.make(source, **common))
        emit(ToolResultTextDeltaEvent.make(source, delta=text, **common))
        emit(ToolResultEndEvent.make(source, state=ToolResultState.ERROR, **common))
        return ToolResultBlock(id=call.id, name=call.name, output=text,
                               state=ToolResultState.ERROR)
    if not tool.middlewares:  # the common case: no coroutine in between
        return await run_direct(tool, call, ctx, emit, source, reply_id, timeout, owner,
                                toolkit.executor, starting)
    return await run_call(tool, call, ctx, emit, source, reply_id, timeout, owner,
                          toolkit.executor, starting)
