"""Shared helpers for the built-in middleware tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import reactivex.operators as ops
from reactivex import Observable

from rx_agent import (
    AgentEvent,
    ChatModel,
    GenerateOptions,
    Msg,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    tool,
)
from rx_agent.message import ChatUsage
from rx_agent.model.base import ModelChunk, UsageChunk

TIMEOUT = 5.0


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_agent(model: ChatModel, *, name: str = "agent", **kwargs: Any) -> ReActAgent:
    kwargs.setdefault("retry_backoff", (0.0, 0.0))
    kwargs.setdefault("toolkit", Toolkit([add]))
    return ReActAgent(name=name, model=model, **kwargs)


async def events_of(agent: ReActAgent, msgs: Any = "hi",
                    ctx: RuntimeContext | None = None) -> list[AgentEvent]:
    async def collect() -> list[AgentEvent]:
        return [e async for e in agent.astream(msgs, ctx)]

    return await asyncio.wait_for(collect(), TIMEOUT)


async def call(agent: ReActAgent, msgs: Any = "hi", ctx: RuntimeContext | None = None) -> Msg:
    return await asyncio.wait_for(agent.acall(msgs, ctx), TIMEOUT)


class FixedUsageModel(ChatModel):
    """A ScriptedModel whose every call reports the same usage (predictable costs)."""

    provider = "scripted"

    def __init__(self, responses: Sequence[Any], usage: ChatUsage, *, name: str = "fixed",
                 delay: float = 0.0) -> None:
        self.inner = ScriptedModel(responses, name=name, delay=delay)
        self.name = name
        self.usage = usage

    @property
    def calls(self) -> list[Any]:
        return self.inner.calls

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        usage = self.usage
        return self.inner.stream(messages, tools, options).pipe(
            ops.map(lambda c: UsageChunk(usage) if isinstance(c, UsageChunk) else c)
        )
