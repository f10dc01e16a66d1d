"""Closing an agent: what its tools hold open (MCP connections) is closed.

The agent owns no connection itself: each MCP source registered in its toolkit
(the user's, or the copy merged with plugin and built-in tools) opened one on first
use. Closing is idempotent, and a closed source opens again if it is used again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .._rx import running_loop
from ..tool.toolkit import Toolkit

__all__ = ["aclose_toolkit", "close_toolkit"]


def _sources(toolkit: Toolkit) -> list[Any]:
    found: dict[int, Any] = {}
    for bound in toolkit._sources:
        found.setdefault(id(bound.source), bound.source)
    return list(found.values())


async def aclose_toolkit(toolkit: Toolkit) -> None:
    """Close every source of ``toolkit`` (concurrently); the first failure is raised
    after all were tried."""
    sources = _sources(toolkit)
    if not sources:
        return
    outcomes = await asyncio.gather(*(s.aclose() for s in sources), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


def close_toolkit(toolkit: Toolkit, what: str) -> None:
    """:func:`aclose_toolkit` for a thread without a running loop (it waits)."""
    sources = _sources(toolkit)
    if not sources:
        return
    if running_loop() is not None:
        raise RuntimeError(f"{what}.close() would block the running event loop; use "
                           f"`await {what}.aclose()` or `async with {what}:`")
    failures: list[BaseException] = []
    for source in sources:
        try:
            source.close()
        except Exception as exc:  # the others are still closed
            failures.append(exc)
    if failures:
        raise failures[0]
