"""The peers-benchmark worker for rx_agent (ours); see ``_worker.py`` for the protocol.

Model: ``ScriptedModel``, the offline streaming model (five text chunks, usage, finish;
with ``latency`` it waits on a loop timer before each of those seven chunks). Tool: an
``async def echo``. A layer is a middleware with one ``map`` per onion hook
(``on_agent``, ``on_reasoning``, ``on_model_call``, ``on_acting``). The stream is
consumed by one subscription that counts events.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _worker import TEXT_DELTA, refuse_network, serve

refuse_network()

from reactivex import Observable  # noqa: E402
from reactivex import operators as ops  # noqa: E402

from rx_agent import (  # noqa: E402
    AgentEvent,
    MiddlewareBase,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    Toolkit,
    ToolResultEndEvent,
    ToolUseBlock,
    __version__,
)


def _identity(event: AgentEvent) -> AgentEvent:
    return event


Next = Callable[[Any], Observable[AgentEvent]]


class OneOperator(MiddlewareBase):
    """One pass-through operator per onion hook."""

    def on_agent(self, agent: Any, ctx: Any, input: Any, next: Next) -> Observable[AgentEvent]:
        return next(input).pipe(ops.map(_identity))

    def on_reasoning(self, agent: Any, ctx: Any, input: Any, next: Next) -> Observable[AgentEvent]:
        return next(input).pipe(ops.map(_identity))

    def on_model_call(self, agent: Any, ctx: Any, input: Any,
                      next: Next) -> Observable[AgentEvent]:
        return next(input).pipe(ops.map(_identity))

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Next) -> Observable[AgentEvent]:
        return next(input).pipe(ops.map(_identity))


async def echo(value: int) -> str:
    """Echo a number."""
    return str(value)


class RxAgent:
    name = "rx_agent"
    version = __version__

    def build(self, n: int, *, tools: bool, layers: int, chunks: int,
              latency: float) -> tuple[ReActAgent, list[RuntimeContext]]:
        answer = [TEXT_DELTA] * chunks
        script: list[Any] = []
        for i in range(n):
            if tools:
                script.append([ToolUseBlock(id=f"c{i}", name="echo", input={"value": i})])
            script.append(answer)
        agent = ReActAgent(name="bench", model=ScriptedModel(script, delay=latency),
                           toolkit=Toolkit([echo]) if tools else None,
                           middlewares=[OneOperator() for _ in range(layers)])
        # One agent serves every call; each call has its own session.
        return agent, [RuntimeContext(session_id=f"s{i}") for i in range(n)]

    async def run(self, handle: tuple[ReActAgent, list[RuntimeContext]],
                  i: int) -> tuple[int, int]:
        agent, contexts = handle
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        deltas = results = 0

        def on_next(event: AgentEvent) -> None:
            nonlocal deltas, results
            kind = type(event)
            if kind is TextBlockDeltaEvent:
                deltas += 1
            elif kind is ToolResultEndEvent:
                results += 1

        agent.stream("go", contexts[i]).subscribe(on_next, done.set_exception,
                                                  lambda: done.set_result(None))
        await done
        return deltas, results


if __name__ == "__main__":
    serve(RxAgent)
