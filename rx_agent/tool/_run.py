"""Running one call of one tool: validation, invocation, streaming, failures as results.

:func:`run_direct` runs a call with the tool itself, below the tool's middlewares (see
:mod:`._middleware`). It never raises but for the cancellation of the call itself
and an error of ``starting`` (the agent's check before a tool starts): bad arguments
and any exception of the tool (``SystemExit`` from an ``argparse`` inside it
included) become an ERROR result the model can read, so the loop and the event loop
go on. It knows a tool only by the attributes it reads (:class:`RunnableTool`), so
the module that defines :class:`~rx_agent.Tool` can use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from typing import Any, Protocol

from .._text import scrub
from ..context import RuntimeContext
from ..event import (
    AgentEvent,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)
from ..message import DataBlock, TextBlock, ToolResultBlock, ToolResultState, ToolUseBlock
from ._call import CallOwner, ToolCallHandle, bind, unbind
from ._values import tool_output_text

__all__ = [
    "NOT_STARTED",
    "NOT_STARTED_TEXT",
    "Emit",
    "RunnableTool",
    "Starting",
    "SyncAwaitable",
    "is_stream",
    "resolve",
    "run_direct",
    "tool_error_text",
]

Emit = Callable[[AgentEvent], None]
# Called with the call about to run, right before the tool's function is entered:
# False (or an awaitable of False) means it must not start (the reply was
# interrupted). The agent also stores the arguments that run there.
Starting = Callable[[ToolUseBlock], "bool | Awaitable[bool]"]

NOT_STARTED_TEXT = "Interrupted before it started."
NOT_STARTED = object()  # what a sync tool's thread returns for a call it did not start


class RunnableTool(Protocol):
    """What :func:`run_direct` reads of a tool."""

    name: str
    timeout: float | None

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]: ...

    def invoke(self, kwargs: dict[str, Any], ctx: RuntimeContext | None,
               executor: Executor | None = None) -> Any: ...


def tool_error_text(name: str, exc: BaseException) -> str:
    return f"Error: tool {name!r} raised {type(exc).__name__}: {exc}"


async def run_direct(
    tool: RunnableTool,
    call: ToolUseBlock,
    ctx: RuntimeContext | None,
    emit: Emit,
    source: str | None,
    reply_id: str,
    timeout: float | None = None,
    owner: CallOwner | None = None,
    executor: Executor | None = None,
    starting: Starting | None = None,
) -> ToolResultBlock:
    """Run ``call`` with ``tool``, emitting its result events (``reply_id`` is the
    batch's); return its result. Synchronous tools run on ``executor`` (the runtime's
    tool threads when ``None``), off the event loop.

    A call that runs longer than the tool's ``timeout`` (else ``timeout``, the
    agent's default) is cancelled and answered with an ERROR result; a synchronous
    tool's thread cannot be stopped, so its late result is dropped. ``owner`` (the
    agent call) is what :func:`current_tool_call` tells the tool about its caller."""
    common = {"reply_id": reply_id, "tool_call_id": call.id, "tool_call_name": call.name}
    emit(ToolResultStartEvent.make(source, **common))
    state = ToolResultState.SUCCESS
    output: str | list[Any]
    streamed = False
    kwargs: dict[str, Any] | None = None
    if call.raw_input is not None:
        output = (
            f"Error: the arguments of tool {call.name!r} are not a valid JSON object: "
            f"{call.raw_input[:200]!r}"
        )
        state = ToolResultState.ERROR
    else:
        try:
            kwargs = tool.validate(call.input)
        except ValueError as exc:  # ToolArgumentError: what the model sent is wrong
            output, state = f"Error: {exc}", ToolResultState.ERROR
        except Exception as exc:
            output, state = tool_error_text(call.name, exc), ToolResultState.ERROR
    if kwargs is not None and starting is not None:
        go = starting(call)
        if go is not True and go is not False:
            go = await go
        if not go:
            output, state, kwargs = NOT_STARTED_TEXT, ToolResultState.INTERRUPTED, None
    if kwargs is not None:
        limit = tool.timeout if tool.timeout is not None else timeout
        deadline = asyncio.timeout(limit)
        # Seen by current_tool_call() in the tool (a sync tool's thread gets a copy of
        # this context); the call runs in its own task, so the reset is exact.
        token = bind(ToolCallHandle(emit, source, reply_id, call.id, call.name, owner))
        try:
            async with deadline:
                output, state, streamed = await _invoke(tool, kwargs, ctx, executor, emit,
                                                        source, common)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the call itself is being cancelled (dispose, interrupt)
            # The tool's own inner await was cancelled: a failure of the tool.
            output, state = tool_error_text(call.name, exc), ToolResultState.ERROR
        except TimeoutError as exc:
            if deadline.expired():
                output = (f"Error: tool {call.name!r} did not finish within {limit:g} s and "
                          "was cancelled")
            else:
                output = tool_error_text(call.name, exc)
            state = ToolResultState.ERROR
        except BaseException as exc:
            # SystemExit, KeyboardInterrupt, ...: left alone they would stop the shared
            # event loop; here they are this tool's failure.
            output, state = tool_error_text(call.name, exc), ToolResultState.ERROR
        finally:
            unbind(token)
    if not streamed:
        if isinstance(output, str):
            if not output.isascii():
                output = scrub(output)
            if output:
                emit(ToolResultTextDeltaEvent.make(source, delta=output, **common))
        else:
            for block in output:
                if isinstance(block, TextBlock) and block.text:
                    emit(ToolResultTextDeltaEvent.make(source, delta=block.text, **common))
                elif isinstance(block, DataBlock):
                    emit(ToolResultDataDeltaEvent.make(source, delta=block, **common))
    emit(ToolResultEndEvent.make(source, state=state, **common))
    return ToolResultBlock(id=call.id, name=call.name, output=output, state=state)


async def _invoke(
    tool: RunnableTool,
    kwargs: dict[str, Any],
    ctx: RuntimeContext | None,
    executor: Executor | None,
    emit: Emit,
    source: str | None,
    common: dict[str, Any],
) -> tuple[str | list[Any], ToolResultState, bool]:
    """Invoke and collect one call: its output, state and whether the text was
    streamed already."""
    started = tool.invoke(kwargs, ctx, executor)
    if is_stream(started):
        parts: list[str] = []
        async for chunk in started:
            text = scrub(tool_output_text(chunk))
            if text:
                parts.append(text)
                emit(ToolResultTextDeltaEvent.make(source, delta=text, **common))
        return "".join(parts), ToolResultState.SUCCESS, True
    output, state = _tool_value(await resolve(started))
    return output, state, False


def _tool_value(value: Any) -> tuple[str | list[Any], ToolResultState]:
    if value is NOT_STARTED:
        return NOT_STARTED_TEXT, ToolResultState.INTERRUPTED
    if isinstance(value, ToolResultBlock):
        return value.output, value.state
    if isinstance(value, (TextBlock, DataBlock)):
        return [value], ToolResultState.SUCCESS
    if isinstance(value, list) and value and all(
        isinstance(v, (TextBlock, DataBlock)) for v in value
    ):
        return list(value), ToolResultState.SUCCESS
    return tool_output_text(value), ToolResultState.SUCCESS


class SyncAwaitable:
    """Marks an awaitable returned by a sync callable (awaited on the loop)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


async def resolve(started: Any) -> Any:
    """Await what :meth:`Tool.invoke` started (not for async iterators)."""
    value = await started
    while isinstance(value, SyncAwaitable):
        value = await value.value
    return value


def is_stream(started: Any) -> bool:
    return isinstance(started, AsyncIterator)
