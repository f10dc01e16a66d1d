"""Fixtures for the server tests: a real uvicorn on a loopback port, test models.

``live`` starts an app on uvicorn in a background thread (its own event loop, as a
deployed server has) and yields its base URL; requests go through a real TCP socket
with httpx. ``redis_url`` is the shared real ``redis-server`` of ``tests/_services.py``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from _live import LiveServer, live
from _services import redis_url

from rx_agent import Msg
from rx_agent.message import ChatUsage
from rx_agent.model import AsyncChatModel, ModelChunk, TextChunk, UsageChunk
from rx_agent.options import GenerateOptions

from .served_agents import EchoModel

__all__ = ["EchoModel", "LiveServer", "SlowModel", "live", "redis_url", "store_url"]


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """`rx-agent serve` run in-process configures logging: undo it for the next test."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def store_url(redis_url: str) -> str:
    """A Redis store URL of its own (a fresh key prefix) on the shared redis-server."""
    return f"{redis_url}?prefix=serve-{uuid.uuid4().hex[:8]}"


class SlowModel(AsyncChatModel):
    """Streams ``chunks`` text deltas, ``delay`` seconds apart (the first call waits for
    ``gate`` after its first chunk, if there is one); records whether its stream was
    closed before the end (``cancelled``) and when it finished (``closed``)."""

    name = "slow"
    provider = "test"

    def __init__(self, chunks: Sequence[str], delay: float,
                 gate: threading.Event | None = None) -> None:
        self.chunks = list(chunks)
        self.delay = delay
        self.gate = gate
        """When given, the first stream waits for it after its first chunk."""
        self.started = threading.Event()
        self.closed = threading.Event()
        self.cancelled = threading.Event()
        self.sent = 0

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        self.started.set()
        gate, self.gate = self.gate, None  # only the first call waits
        try:
            for chunk in self.chunks:
                yield TextChunk(chunk)
                self.sent += 1
                while gate is not None and not gate.is_set():
                    await asyncio.sleep(0.01)
                await asyncio.sleep(self.delay)
            yield UsageChunk(ChatUsage(input_tokens=7, output_tokens=len(self.chunks)))
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        finally:
            self.closed.set()
