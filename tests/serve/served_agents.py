"""Agents the server tests serve, importable by worker processes as
``serve.served_agents:ATTR`` (run from ``tests/``); nothing here imports pytest."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

from rx_agent import Msg, ReActAgent, SessionStore
from rx_agent.message import ChatUsage
from rx_agent.model import AsyncChatModel, ModelChunk, TextChunk, UsageChunk
from rx_agent.options import GenerateOptions

__all__ = ["EchoModel", "build_echo"]


class EchoModel(AsyncChatModel):
    """Answers ``echo <n>: <last user text>`` where ``n`` is how many messages it saw:
    a reply that proves which context reached the model. With ``pid=True`` the reply
    names the process (``echo 3 @1234: hi``). A user text starting with ``slow`` streams
    100 words 0.1 s apart first (interrupt it)."""

    name = "echo"
    provider = "test"

    def __init__(self, delay: float = 0.0, pid: bool = False) -> None:
        self.delay = delay
        self.pid = pid

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        if self.delay:
            await asyncio.sleep(self.delay)
        last = next((m.text for m in reversed(messages) if m.role.value == "user"), "")
        if last.startswith("slow"):
            for i in range(100):
                yield TextChunk(f"w{i} ")
                await asyncio.sleep(0.1)
        where = f" @{os.getpid()}" if self.pid else ""
        yield TextChunk(f"echo {len(messages)}{where}: {last}")
        yield UsageChunk(ChatUsage(input_tokens=3, output_tokens=2))


def build_echo(store: SessionStore) -> ReActAgent:
    """The factory ``rx-agent serve serve.served_agents:build_echo --store URL`` loads."""
    return ReActAgent(name="echo", model=EchoModel(pid=True), session_store=store,
                      session_wait=0.5)


class FailingModel(AsyncChatModel):
    """Fails every call with an error whose message quotes credentials (as an HTTP
    client's error can): the bearer token the server runs with, the API key in
    ``$OPENAI_API_KEY`` and a ``Bearer``/``sk-`` pair the server never heard of."""

    name = "failing"
    provider = "test"

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        last = next((m.text for m in reversed(messages) if m.role.value == "user"), "")
        if last.startswith("late"):
            yield TextChunk("partial ")
        raise RuntimeError(
            f"upstream refused: token={os.environ.get('RX_AGENT_TOKEN', '')} "
            f"key {os.environ.get('OPENAI_API_KEY', '')} "
            "headers {'Authorization': 'Bearer unseen-bearer-42', 'x': 'sk-unseenkey123456'}")


def build_failing(store: SessionStore) -> ReActAgent:
    """``rx-agent serve serve.served_agents:build_failing``: every call fails."""
    return ReActAgent(name="failing", model=FailingModel(), session_store=store,
                      max_retries=1)


def build_echo_queued(store: SessionStore) -> ReActAgent:
    """``build_echo`` for ``--queue``: a queued post waits up to 20 s for its turn."""
    return ReActAgent(name="echo", model=EchoModel(pid=True), session_store=store,
                      session_wait=20)


class StreamModel(AsyncChatModel):
    """Streams ``w0 w1 ... w<n-1>`` for a user text ``stream <n>`` (``delay`` seconds
    apart), then ``done @<pid>``: a reply long enough to drop in the middle of."""

    name = "stream"
    provider = "test"

    def __init__(self, delay: float = 0.03) -> None:
        self.delay = delay

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        last = next((m.text for m in reversed(messages) if m.role.value == "user"), "")
        words = int(last.split()[1]) if last.startswith("stream ") else 3
        for i in range(words):
            yield TextChunk(f"w{i} ")
            await asyncio.sleep(self.delay)
        yield TextChunk(f"done @{os.getpid()}")
        yield UsageChunk(ChatUsage(input_tokens=5, output_tokens=words))


def build_stream(store: SessionStore) -> ReActAgent:
    """``rx-agent serve serve.served_agents:build_stream``: long streamed replies."""
    return ReActAgent(name="stream", model=StreamModel(), session_store=store,
                      session_wait=0.5)
