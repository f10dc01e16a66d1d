"""Leases beyond the store contract (``tests/session/test_contract.py``): Redis's keys,
and a client that swallows a cancellation."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from rx_agent.session import SessionBusyError

from .conftest import KEY


def test_redis_lease_keys_use_the_prefix_and_expire(redis_store: Any) -> None:
    lease = redis_store.acquire_lease(KEY, "a", 5, 0)
    with pytest.raises(SessionBusyError):
        redis_store.acquire_lease(KEY, "b", 5, 0.1)
    client, _ = redis_store._client()
    keys = sorted(k.decode() for k in client.keys("*") if k.decode().startswith(
        redis_store.prefix))
    assert keys[0] == f"{redis_store.prefix}:lease:alice:chat-1"
    assert 0 < client.pttl(keys[0]) <= 5000
    redis_store.release_lease(lease)


async def test_a_waiter_stops_when_a_client_swallows_its_cancellation() -> None:
    # redis-py's asyncio client can eat a CancelledError that meets its socket timeout;
    # the pending cancel request must still end the wait (and give back a lease won).
    from rx_agent.session._lease import LeaseAttempt, await_lease

    released: list[Any] = []
    calls = 0

    async def attempt(token: str, beat: bool) -> LeaseAttempt:
        nonlocal calls
        calls += 1
        with contextlib.suppress(asyncio.CancelledError):  # swallowed, as a bad client does
            await asyncio.sleep(0.05)
        return LeaseAttempt(calls > 1)  # won on the retry the swallow would cause

    async def leave(token: str) -> None:
        return None

    async def release(lease: Any) -> None:
        released.append(lease)

    waiting = asyncio.create_task(await_lease(KEY, "w", 10, 10, attempt, leave,
                                              release=release))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert calls == 1 and released == []
