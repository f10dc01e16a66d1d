"""The peers-benchmark worker for pydantic-ai; see ``_worker.py`` for the protocol.

Model: ``FunctionModel(stream_function=...)``: the function streams one ``echo`` tool call
(``DeltaToolCall``) until the history holds a tool return, then five text deltas. With
``latency`` it sleeps before each text delta and twice at the end (the seven waits of our
scripted model). Tool: an ``async def echo`` registered with ``Agent(tools=[...])``. A
layer is a capability (``AbstractCapability``, pydantic-ai's middleware) that passes
through each of its onion hooks: ``wrap_run``, ``wrap_node_run``, ``wrap_model_request``,
``wrap_tool_execute`` (each ``return await handler(...)``; they wrap awaitables, so there
is no per-event stream to put an operator on). The stream is
``Agent.run_stream_events``; one agent serves every call (an Agent holds no run state).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _worker import TEXT_DELTA, refuse_network, serve

refuse_network()

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.capabilities import AbstractCapability  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel  # noqa: E402


class PassThrough(AbstractCapability[Any]):
    """One pass-through per onion hook."""

    async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
        return await handler()

    async def wrap_node_run(self, ctx: Any, *, node: Any, handler: Any) -> Any:
        return await handler(node)

    async def wrap_model_request(self, ctx: Any, *, request_context: Any, handler: Any) -> Any:
        return await handler(request_context)

    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any,
                                handler: Any) -> Any:
        return await handler(args)


async def echo(value: int) -> str:
    """Echo a number."""
    return str(value)


def _returned(messages: list[ModelMessage]) -> bool:
    return any(isinstance(part, ToolReturnPart) for msg in messages
               if isinstance(msg, ModelRequest) for part in msg.parts)


def stream_function(chunks: int, tools: bool, latency: float) -> Any:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if tools and not _returned(messages):
            yield {0: DeltaToolCall(name="echo", json_args='{"value": 1}', tool_call_id="c1")}
            return
        for _ in range(chunks):
            if latency:
                await asyncio.sleep(latency)
            yield TEXT_DELTA
        if latency:
            await asyncio.sleep(2 * latency)

    return stream


class PydanticAI:
    name = "pydantic_ai"
    version = importlib.metadata.version("pydantic-ai-slim")

    def build(self, n: int, *, tools: bool, layers: int, chunks: int, latency: float) -> Agent:
        return Agent(FunctionModel(stream_function=stream_function(chunks, tools, latency)),
                     tools=[echo] if tools else (),
                     capabilities=[PassThrough() for _ in range(layers)] or None)

    async def run(self, agent: Agent, i: int) -> tuple[int, int]:
        deltas = results = 0
        async with agent.run_stream_events("go") as events:
            async for event in events:
                kind = type(event)
                if kind is PartDeltaEvent:
                    deltas += isinstance(event.delta, TextPartDelta)
                elif kind is PartStartEvent:
                    deltas += isinstance(event.part, TextPart)
                elif kind is FunctionToolResultEvent:
                    results += 1
        return deltas, results


if __name__ == "__main__":
    serve(PydanticAI)
