"""Fixtures for the A2A tests: apps on a real uvicorn at a loopback port, the
``a2a-sdk`` client that talks to them, and models that stream slowly.

The server runs in a thread with its own event loop, as a deployed one does; the
test's client is the SDK's own (``a2a.client``), over a real TCP socket.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import httpx
import pytest
from _live import live  # noqa: F401  (the fixture, for this folder's tests)
from a2a.client import Client, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse

from rx_agent import Msg
from rx_agent.message import ChatUsage
from rx_agent.model import AsyncChatModel, ModelChunk, TextChunk, UsageChunk
from rx_agent.options import GenerateOptions

ALICE, BOB = "alice-token-0001", "bob-token-00002"
TOKENS = {ALICE: "alice", BOB: "bob"}


@pytest.fixture
async def clients() -> AsyncIterator[Callable[..., Any]]:
    """``await clients(url, token=..., streaming=...)``: an SDK client, closed after."""
    opened: list[tuple[Client, httpx.AsyncClient]] = []

    async def make(url: str, token: str | None = None, *, streaming: bool = True,
                   polling: bool = False) -> Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx.AsyncClient(headers=headers, timeout=30)
        client = await create_client(url, ClientConfig(httpx_client=http, streaming=streaming,
                                                       polling=polling))
        opened.append((client, http))
        return client

    yield make
    for client, http in opened:
        await client.close()
        await http.aclose()


def user_message(text: str | None = None, *, data: Any = None, task_id: str = "",
                 context_id: str = "") -> Message:
    parts = []
    if text is not None:
        parts.append(Part(text=text))
    if data is not None:
        from a2a.helpers import new_data_part

        parts.append(new_data_part(data))
    return Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=parts,
                   task_id=task_id, context_id=context_id)


def send(message: Message) -> SendMessageRequest:
    return SendMessageRequest(message=message)


async def collect_stream(client: Client, message: Message) -> list[StreamResponse]:
    return [r async for r in client.send_message(send(message))]


def kinds(responses: Sequence[StreamResponse]) -> list[str]:
    """``task``, ``working``, ``artifact``, ``completed``, ...: the shape of a stream."""
    out = []
    for r in responses:
        which = r.WhichOneof("payload")
        if which == "status_update":
            from a2a.types import TaskState

            out.append(TaskState.Name(r.status_update.status.state)
                       .removeprefix("TASK_STATE_").lower())
        else:
            out.append("artifact" if which == "artifact_update" else str(which))
    return out


class SlowModel(AsyncChatModel):
    """Streams ``chunks`` text deltas ``delay`` seconds apart; ``started`` when its
    stream begins, ``cancelled`` if it was closed before the end."""

    name = "slow"
    provider = "test"

    def __init__(self, chunks: Sequence[str], delay: float) -> None:
        self.chunks = list(chunks)
        self.delay = delay
        self.started = threading.Event()
        self.cancelled = threading.Event()
        self.calls = 0

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        self.calls += 1
        self.started.set()
        try:
            for chunk in self.chunks:
                yield TextChunk(chunk)
                await asyncio.sleep(self.delay)
            yield UsageChunk(ChatUsage(input_tokens=3, output_tokens=len(self.chunks)))
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


class EchoModel(AsyncChatModel):
    """Answers ``echo <n>: <last user text>``, ``n`` the messages it saw (which context
    reached it), in two chunks."""

    name = "echo"
    provider = "test"

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        last = next((m.text for m in reversed(messages) if m.role.value == "user"), "")
        yield TextChunk(f"echo {len(messages)}")
        yield TextChunk(f": {last}")
        yield UsageChunk(ChatUsage(input_tokens=3, output_tokens=2))


async def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the condition")
        await asyncio.sleep(0.02)
