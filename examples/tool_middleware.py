"""Tool middleware: an onion around one tool's execution, wherever the tool runs.

Three of them, on three tools: a cache that answers repeated calls itself, a timeout
with a fallback answer (the slow tool is cancelled), and argument validation that
refuses a bad call and rounds a good one (the rounded arguments are what run and what
the session stores). They are attached to the tools (``@tool(middlewares=[...])``,
``tool.with_middleware(...)``), so they run inside the agent, below its ``on_acting``
chain, and when a tool is called directly with ``await tool.execute(...)``.

Run: python examples/tool_middleware.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from reactivex import Observable
from reactivex import operators as ops
from reactivex.scheduler.eventloop import AsyncIOScheduler

from rx_agent import (
    AgentEvent,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultEndEvent,
    ToolResultState,
    ToolResultTextDeltaEvent,
    ToolUseBlock,
    tool,
)
from rx_agent.tool import Tool, ToolNext, answer


# --8<-- [start:cache]
class Cache:
    """Answers a call it has seen (same tool, same arguments) without running the tool."""

    def __init__(self) -> None:
        self.results: dict[str, str] = {}
        self.hits = 0

    def __call__(self, tool: Tool, ctx: RuntimeContext | None, call: ToolUseBlock,
                 next: ToolNext) -> Observable[AgentEvent]:
        key = f"{tool.name}:{json.dumps(call.input, sort_keys=True)}"
        if key in self.results:
            self.hits += 1
            return answer(call, self.results[key])  # short-circuit: the tool never runs
        parts: list[str] = []  # per call: this call of the middleware is this tool call

        def remember(event: AgentEvent) -> None:
            if isinstance(event, ToolResultTextDeltaEvent):
                parts.append(event.delta)
            elif isinstance(event, ToolResultEndEvent) and event.state is ToolResultState.SUCCESS:
                self.results[key] = "".join(parts)

        return next(call).pipe(ops.do_action(remember))
# --8<-- [end:cache]


# --8<-- [start:timeout]
def timeout(seconds: float, fallback: str) -> Any:
    """Answers with ``fallback`` when the tool is silent for ``seconds``: the tool is
    cancelled, since its result could no longer be used."""

    def middleware(tool: Tool, ctx: RuntimeContext | None, call: ToolUseBlock,
                   next: ToolNext) -> Observable[AgentEvent]:
        on_loop = AsyncIOScheduler(asyncio.get_running_loop())  # middlewares run on it
        return next(call).pipe(ops.timeout(seconds, other=answer(call, fallback),
                                           scheduler=on_loop))

    return middleware
# --8<-- [end:timeout]


# --8<-- [start:validate]
def positive(name: str) -> Any:
    """Refuses a call whose ``name`` is not a positive number; rounds it to cents."""

    def middleware(tool: Tool, ctx: RuntimeContext | None, call: ToolUseBlock,
                   next: ToolNext) -> Observable[AgentEvent]:
        value = call.input.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            return answer(call, f"Error: {name} must be a positive number, got {value!r}",
                          ToolResultState.ERROR)
        return next(call.model_copy(update={"input": {**call.input, name: round(value, 2)}}))

    return middleware
# --8<-- [end:validate]


# --8<-- [start:tools]
cache = Cache()
ran: list[str] = []


@tool(middlewares=[cache])
def weather(city: str) -> str:
    """Today's weather in a city."""
    ran.append(city)
    return f"{city}: sunny, 24 C"


@tool(middlewares=[timeout(0.2, "rates are unavailable right now")])
async def exchange_rate(currency: str) -> str:
    """The exchange rate of EUR to a currency."""
    await asyncio.sleep(5)  # a slow upstream
    return "1.08"


@tool
def convert(amount: float) -> str:
    """EUR to USD."""
    return f"{amount} EUR = {amount * 1.08:.2f} USD"


convert = convert.with_middleware(positive("amount"))
# --8<-- [end:tools]


def main() -> None:
    model = ScriptedModel([
        [ToolUseBlock("c1", "weather", {"city": "Paris"})],
        [ToolUseBlock("c2", "weather", {"city": "Paris"}),
         ToolUseBlock("c3", "exchange_rate", {"currency": "USD"})],
        [ToolUseBlock("c4", "convert", {"amount": -5}),
         ToolUseBlock("c5", "convert", {"amount": 10.567})],
        "Sunny in Paris; 10.57 EUR is 11.42 USD.",
    ])
    agent = ReActAgent(name="assistant", model=model,
                       toolkit=Toolkit([weather, exchange_rate, convert]))
    ctx = RuntimeContext(session_id="trip")
    agent.call_sync("Weather in Paris, and 10.567 EUR in USD?", ctx)
    assert ctx.agent_state is not None
    calls = {c.id: c for m in ctx.agent_state.context for c in m.tool_calls}
    for msg in ctx.agent_state.context:
        for result in msg.tool_results:  # the calls as stored: the arguments that ran
            print(f"{result.name} {calls[result.id].input} -> {result.state.value}: "
                  f"{result.text}")
    print(f"weather ran {len(ran)} time(s); cache hits: {cache.hits}")
    direct = asyncio.run(weather.execute({"city": "Paris"}))  # outside any agent
    print(f"direct: {direct.text} (cache hits: {cache.hits})")


if __name__ == "__main__":
    main()
