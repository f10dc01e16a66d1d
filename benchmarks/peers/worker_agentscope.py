"""The peers-benchmark worker for AgentScope Python; see ``_worker.py`` for the protocol.

Model: a ``ChatModelBase`` whose ``_call_api`` returns an async generator of delta
``ChatResponse`` chunks, built as they are yielded (as AgentScope's provider adapters
do): one ``echo`` ``ToolCallBlock`` until the context holds a tool result, then five text
deltas; a content-free usage chunk ends each stream. With ``latency`` it sleeps before
each text delta and twice before the usage chunk (the seven waits of our scripted
model). Tool: an ``async def echo`` in a ``FunctionTool`` allowed up front. A layer is a
``MiddlewareBase`` re-yielding ``identity(event)`` in ``on_reply``, ``on_reasoning`` and
``on_acting`` and wrapping the chunk stream of ``on_model_call`` the same way. An Agent
holds its conversation, so every call gets its own agent. The stream is
``Agent.reply_stream``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _worker import TEXT_DELTA, refuse_network, serve

refuse_network()
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

import agentscope  # noqa: E402
from agentscope.agent import Agent, ReActConfig  # noqa: E402
from agentscope.credential import CredentialBase  # noqa: E402
from agentscope.event import TextBlockDeltaEvent, ToolResultEndEvent  # noqa: E402
from agentscope.formatter import OpenAIChatFormatter  # noqa: E402
from agentscope.message import Msg, TextBlock, ToolCallBlock, UserMsg  # noqa: E402
from agentscope.middleware import MiddlewareBase  # noqa: E402
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage  # noqa: E402
from agentscope.permission import PermissionBehavior, PermissionDecision  # noqa: E402
from agentscope.tool import FunctionTool, Toolkit  # noqa: E402
from pydantic import BaseModel  # noqa: E402


class NoCredential(CredentialBase):
    """The fake never authenticates."""

    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return FakeModel


class FakeModel(ChatModelBase):
    class Parameters(BaseModel):
        """No tunable parameters."""

    def __init__(self, chunks: int, tools: bool, latency: float) -> None:
        super().__init__(credential=NoCredential(), model="fake", parameters=self.Parameters(),
                         stream=True, max_retries=0, retry_delay=0.0, context_size=10_000_000)
        self.formatter = OpenAIChatFormatter()  # read by the agent for media types only
        self.chunks, self.tools, self.latency = chunks, tools, latency

    async def _call_api(self, model_name: str, messages: list[Msg], tools: Any = None,
                        tool_choice: Any = None, **kwargs: Any) -> AsyncGenerator[ChatResponse]:
        returned = any(msg.get_content_blocks("tool_result") for msg in messages)
        if self.tools and not returned:
            return self._tool_call()
        return self._text()

    async def _tool_call(self) -> AsyncGenerator[ChatResponse]:
        yield ChatResponse(content=[ToolCallBlock(id="c1", name="echo",
                                                  input=json.dumps({"value": 1}))],
                           is_last=False)
        yield _usage(1)

    async def _text(self) -> AsyncGenerator[ChatResponse]:
        for _ in range(self.chunks):
            if self.latency:
                await asyncio.sleep(self.latency)
            yield ChatResponse(content=[TextBlock(text=TEXT_DELTA, id="t1")], is_last=False)
        if self.latency:
            await asyncio.sleep(2 * self.latency)
        yield _usage(self.chunks)


def _usage(tokens: int) -> ChatResponse:
    return ChatResponse(content=[], is_last=False,
                        usage=ChatUsage(input_tokens=16, output_tokens=tokens, time=0.0))


async def echo(value: int) -> str:
    """Echo a number.

    Args:
        value (`int`):
            The number.
    """
    return str(value)


def _identity(item: Any) -> Any:
    return item


async def _mapped(source: AsyncGenerator[Any]) -> AsyncGenerator[Any]:
    async for item in source:
        yield _identity(item)


Next = Callable[..., Any]


class OneOperator(MiddlewareBase):
    """One pass-through operator per onion hook."""

    async def on_reply(self, agent: Agent, input_kwargs: dict[str, Any],
                       next_handler: Next) -> AsyncGenerator[Any]:
        async for event in next_handler():
            yield _identity(event)

    async def on_reasoning(self, agent: Agent, input_kwargs: dict[str, Any],
                           next_handler: Next) -> AsyncGenerator[Any]:
        async for event in next_handler():
            yield _identity(event)

    async def on_acting(self, agent: Agent, input_kwargs: dict[str, Any],
                        next_handler: Next) -> AsyncGenerator[Any]:
        async for chunk in next_handler():
            yield _identity(chunk)

    async def on_model_call(self, agent: Agent, input_kwargs: dict[str, Any],
                            next_handler: Callable[..., Awaitable[Any]]) -> Any:
        result = await next_handler()
        if isinstance(result, ChatResponse):
            return _identity(result)
        return _mapped(result)


def _toolkit() -> Toolkit:
    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="benchmark tool")
    return Toolkit(tools=[FunctionTool(echo, name="echo", permission=allow)])


class AgentScope:
    name = "agentscope"
    version = agentscope.__version__

    def build(self, n: int, *, tools: bool, layers: int, chunks: int,
              latency: float) -> list[Agent]:
        return [Agent(name="bench", system_prompt="You are a benchmark agent.",
                      model=FakeModel(chunks, tools, latency),
                      toolkit=_toolkit() if tools else None,
                      middlewares=[OneOperator() for _ in range(layers)],
                      react_config=ReActConfig(max_iters=5))
                for _ in range(n)]

    async def run(self, agents: list[Agent], i: int) -> tuple[int, int]:
        deltas = results = 0
        async for event in agents[i].reply_stream(UserMsg(name="user", content="go")):
            kind = type(event)
            if kind is TextBlockDeltaEvent:
                deltas += 1
            elif kind is ToolResultEndEvent:
                results += 1
        return deltas, results


if __name__ == "__main__":
    agentscope.setup_logger("WARNING")
    serve(AgentScope)
