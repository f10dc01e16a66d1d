"""Fixtures for the model tests: a live OpenAI-compatible server and a model bound to it."""

from __future__ import annotations

import gc
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from rx_agent.model.openai import OpenAIChatModel

from .openai_server import OpenAIServer

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # An unclosed socket or transport shows up as a ResourceWarning when it is
    # collected; in this directory that is a test failure (see _collect_garbage).
    for item in items:
        if _HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.filterwarnings("error::ResourceWarning"))


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    yield
    # Collect now so that a leaked socket is reported against the test that leaked it.
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        gc.collect()


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A running :class:`OpenAIServer`; its thread is gone after the test."""
    server = OpenAIServer().start()
    thread = server._thread
    try:
        yield server
    finally:
        server.stop()
        assert thread is not None and not thread.is_alive(), "the test server thread leaked"


@pytest.fixture
async def model(openai_server: OpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    """An ``OpenAIChatModel`` talking to ``openai_server``; closed after the test."""
    chat = OpenAIChatModel("test-model", base_url=openai_server.url, api_key="sk-test")
    try:
        yield chat
    finally:
        await chat.aclose()
