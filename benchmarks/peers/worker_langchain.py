"""The peers-benchmark worker for LangChain; see ``_worker.py`` for the protocol.

Model: a ``BaseChatModel`` with an async ``_astream`` (langchain-core's
``GenericFakeChatModel`` streams only synchronously, in a thread, and has no
``bind_tools``): one ``echo`` tool-call chunk until the history holds a ``ToolMessage``,
then five text chunks, then a last chunk with usage. With ``latency`` it sleeps before
each text chunk and twice before the last (the seven waits of our scripted model).
``bind_tools`` converts the tools to OpenAI schemas, as provider adapters do. Tool: an
``async def echo`` (``create_agent`` makes it a tool). A layer is an ``AgentMiddleware``
passing through its two onion hooks, ``awrap_model_call`` and ``awrap_tool_call``
(``return await handler(request)``; they wrap awaitables, so there is no per-event stream
to put an operator on; the node hooks ``before_*``/``after_*`` are not onion hooks and
are left out). The agent is ``create_agent(model, tools, middleware=...)``, one compiled
graph for every call (no checkpointer: it holds no run state); the stream is
``graph.astream(..., stream_mode="messages")``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _worker import TEXT_DELTA, refuse_network, serve

refuse_network()

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessageChunk, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGenerationChunk, ChatResult  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402


class FakeStreamingChatModel(BaseChatModel):
    chunks: int = 5
    tools: bool = False
    latency: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "fake-streaming"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        raise NotImplementedError("the benchmark always streams")

    async def _astream(self, messages: list[BaseMessage], stop: Any = None,
                       run_manager: Any = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        usage = {"input_tokens": 16, "output_tokens": 1, "total_tokens": 17}
        if self.tools and not any(isinstance(m, ToolMessage) for m in messages):
            call = {"name": "echo", "args": '{"value": 1}', "id": "c1", "index": 0,
                    "type": "tool_call_chunk"}
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[call]))
            yield ChatGenerationChunk(message=AIMessageChunk(
                content="", usage_metadata=usage, chunk_position="last"))
            return
        for _ in range(self.chunks):
            if self.latency:
                await asyncio.sleep(self.latency)
            # langchain-core reports each chunk to the callbacks (the "messages" stream).
            yield ChatGenerationChunk(message=AIMessageChunk(content=TEXT_DELTA))
        if self.latency:
            await asyncio.sleep(2 * self.latency)
        yield ChatGenerationChunk(message=AIMessageChunk(
            content="", usage_metadata=usage, chunk_position="last"))


class PassThrough(AgentMiddleware):
    """One pass-through per onion hook."""

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


async def echo(value: int) -> str:
    """Echo a number."""
    return str(value)


class LangChain:
    name = "langchain"
    version = importlib.metadata.version("langchain")

    def build(self, n: int, *, tools: bool, layers: int, chunks: int, latency: float) -> Any:
        # Middleware instances need distinct names; create_agent refuses duplicates.
        middleware = [type(f"PassThrough{i}", (PassThrough,), {})() for i in range(layers)]
        model = FakeStreamingChatModel(chunks=chunks, tools=tools, latency=latency)
        return create_agent(model, [echo] if tools else None, middleware=middleware)

    async def run(self, graph: Any, i: int) -> tuple[int, int]:
        deltas = results = 0
        async for message, _meta in graph.astream({"messages": [("user", "go")]},
                                                  stream_mode="messages"):
            if isinstance(message, AIMessageChunk):
                deltas += bool(message.content)
            elif isinstance(message, ToolMessage):
                results += 1
        return deltas, results

if __name__ == "__main__":
    serve(LangChain)
