"""Running one tool call: validation, invocation, streaming, and failures as results.

:func:`execute` is the one way the runtime runs a tool call. It never raises but
for the cancellation of the call itself: a missing tool, bad arguments and any
exception of the tool (``SystemExit`` from an ``argparse`` inside it included)
become an ERROR result the model can read, so the loop and the event loop go on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

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
from .toolkit import Tool, ToolArgumentError, Toolkit, is_stream, resolve

__all__ = ["Emit", "execute", "tool_error_text"]

Emit = Callable[[AgentEvent], None]


def tool_error_text(name: str, exc: BaseException) -> str:
    return f"Error: tool {name!r} raised {type(exc).__name__}: {exc}"


async def execute(
    toolkit: Toolkit,
    call: ToolUseBlock,
    ctx: RuntimeContext | None,
    emit: Emit,
    source: str | None,
    reply_id: str,
    timeout: float | None = None,
    owner: CallOwner | None = None,
) -> ToolResultBlock:
    """Execute ``call`` with the toolkit's tool of that name, emitting its result
    events (``reply_id`` is the batch's); return its result. Synchronous tools run on
    the toolkit's executor, off the event loop.

    A call that runs longer than the tool's ``timeout`` (else ``timeout``, the
    agent's default) is cancelled and answered with an ERROR result; a synchronous
    tool's thread cannot be stopped, so its late result is dropped. ``owner`` (the
    agent call) is what :func:`current_tool_call` tells the tool about its caller."""
    tool = toolkit.get(call.name)
    common = {"reply_id": reply_id, "tool_call_id": call.id, "tool_call_name": call.name}
    emit(ToolResultStartEvent.make(source, **common))
    state = ToolResultState.SUCCESS
    output: str | list[Any]
    streamed = False
    if tool is None:
        names = ", ".join(toolkit.names) or "none"
        output = f"Error: there is no tool named {call.name!r}. Available tools: {names}."
        state = ToolResultState.ERROR
    elif call.raw_input is not None:
        output = (
            f"Error: the arguments of tool {call.name!r} are not a valid JSON object: "
            f"{call.raw_input[:200]!r}"
        )
        state = ToolResultState.ERROR
    else:
        limit = tool.timeout if tool.timeout is not None else timeout
        deadline = asyncio.timeout(limit)
        # Seen by current_tool_call() in the tool (a sync tool's thread gets a copy of
        # this context); execute runs in its own task, so the reset is exact.
        token = bind(ToolCallHandle(emit, source, reply_id, call.id, call.name, owner))
        try:
            async with deadline:
                output, state, streamed = await _run(tool, call, ctx, toolkit, emit, source,
                                                     common)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the call itself is being cancelled (dispose, interrupt)
            # The tool's own inner await was cancelled: a failure of the tool.
            output, state = tool_error_text(call.name, exc), ToolResultState.ERROR
        except ToolArgumentError as exc:
            output, state = f"Error: {exc}", ToolResultState.ERROR
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


async def _run(
    tool: Tool,
    call: ToolUseBlock,
    ctx: RuntimeContext | None,
    toolkit: Toolkit,
    emit: Emit,
    source: str | None,
    common: dict[str, Any],
) -> tuple[str | list[Any], ToolResultState, bool]:
    """Validate, invoke and collect one call: its output, state and whether the text
    was streamed already."""
    kwargs = tool.validate(call.input)
    started = tool.invoke(kwargs, ctx, toolkit.executor)
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
    if isinstance(value, ToolResultBlock):
        return value.output, value.state
    if isinstance(value, (TextBlock, DataBlock)):
        return [value], ToolResultState.SUCCESS
    if isinstance(value, list) and value and all(
        isinstance(v, (TextBlock, DataBlock)) for v in value
    ):
        return list(value), ToolResultState.SUCCESS
    return tool_output_text(value), ToolResultState.SUCCESS
