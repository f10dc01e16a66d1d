"""The agents the Temporal tests' worker processes serve (``rx-agent worker``).

The model is the test's loopback OpenAI-compatible server (``$RX_TEST_MODEL_URL``);
each tool appends the worker's pid to ``$RX_TEST_COUNTS/<tool>.start`` when it is
entered and to ``<tool>.finish`` when it returns, so the test counts what ran where.
``slow`` waits for the file ``release`` in that folder (``slow.cancelled``: it was
cancelled meanwhile).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from rx_agent import ReActAgent, SessionStore, Toolkit
from rx_agent.model.openai import OpenAIChatModel


def _counts() -> Path:
    return Path(os.environ["RX_TEST_COUNTS"])


def _mark(tool: str, what: str) -> None:
    with (_counts() / f"{tool}.{what}").open("a") as f:
        f.write(f"{os.getpid()}\n")


async def quick(x: int) -> str:
    """Answer at once."""
    _mark("quick", "start")
    _mark("quick", "finish")
    return f"quick {x}"


async def slow(x: int) -> str:
    """Answer once released."""
    _mark("slow", "start")
    try:
        while not (_counts() / "release").exists():
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        _mark("slow", "cancelled")
        raise
    _mark("slow", "finish")
    return f"slow {x}"


def deploy(env: str) -> str:
    """Deploy (asks the user first)."""
    _mark("deploy", "start")
    _mark("deploy", "finish")
    return f"deployed to {env}"


def _model() -> OpenAIChatModel:
    return OpenAIChatModel("m", base_url=os.environ["RX_TEST_MODEL_URL"], api_key="k")


def build() -> ReActAgent:
    return ReActAgent(name="crashy", model=_model(), toolkit=Toolkit([quick, slow]))


def build_careful() -> ReActAgent:
    tools = Toolkit()
    tools.register_tool(deploy, permission="ask")  # type: ignore[arg-type]
    return ReActAgent(name="careful", model=_model(), toolkit=tools)


def build_shared(store: SessionStore) -> ReActAgent:
    """``build`` on the store the test's callers share (``rx-agent worker --store``)."""
    return ReActAgent(name="crashy", model=_model(), toolkit=Toolkit([quick, slow]),
                      session_store=store)


def build_careful_shared(store: SessionStore) -> ReActAgent:
    tools = Toolkit()
    tools.register_tool(deploy, permission="ask")  # type: ignore[arg-type]
    return ReActAgent(name="careful", model=_model(), toolkit=tools, session_store=store)
