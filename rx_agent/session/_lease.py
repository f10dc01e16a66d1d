"""The waiting half of lease acquisition, shared by every store (sync and async).

A store supplies one *attempt* (``attempt(token, heartbeat) -> LeaseAttempt``): take
the lease if it is free (or expired) and this token is first in the session's
waiting queue, else report who holds it. With ``heartbeat`` the attempt also puts
the token in the queue, or refreshes its place there: a waiter that stops polling
for :data:`WAITER_TTL` seconds (a crashed process) drops out of the queue, so it
cannot block the next one. ``leave(token)`` takes a waiter that gave up out of it.

The loops below poll with a growing, jittered pause (:data:`POLL_MIN` doubling to
:data:`POLL_MAX`), never past the holder's expiry nor past the caller's ``wait``,
and make one last attempt when ``wait`` runs out, so :class:`SessionBusyError` comes
only after the whole wait.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from ._base import Lease, SessionBusyError, check_lease_args

__all__ = ["POLL_MAX", "POLL_MIN", "WAITER_TTL", "LeaseAttempt", "await_lease", "wait_for_lease"]

logger = logging.getLogger("rx_agent.session")

POLL_MIN = 0.002
POLL_MAX = 0.025
WAITER_TTL = 2.0
"""Seconds a queued waiter keeps its place without polling."""
HEARTBEAT_EVERY = WAITER_TTL / 4


class LeaseAttempt(NamedTuple):
    acquired: bool
    holder: str | None = None
    """The owner holding the lease, when the attempt failed and it is known."""
    retry_in: float | None = None
    """Seconds until the holder's lease expires, when known."""


def new_token() -> str:
    return secrets.token_hex(16)


def _pause(delay: float, left: float, retry_in: float | None) -> float:
    pause = delay * random.uniform(0.8, 1.2) if delay < math.inf else math.inf
    if retry_in is not None and retry_in >= 0:
        pause = min(pause, retry_in + 0.001)
    return max(0.0, min(pause, left))


def wait_for_lease(
    key: object,
    owner: object,
    ttl: object,
    wait: object,
    attempt: Callable[[str, bool], LeaseAttempt],
    leave: Callable[[str], object],
    pause: Callable[[float], object] = time.sleep,
    poll: tuple[float, float] = (POLL_MIN, POLL_MAX),
) -> Lease:
    """Acquire a lease through ``attempt``, blocking the calling thread while it waits."""
    k, who, secs, patience = check_lease_args(key, owner, ttl, wait)
    token = new_token()
    start = time.monotonic()
    deadline = start + patience
    delay, last_beat, queued = poll[0], -math.inf, False
    try:
        while True:
            now = time.monotonic()
            beat = now < deadline and now - last_beat >= HEARTBEAT_EVERY
            got = attempt(token, beat)
            if got.acquired:
                queued = False
                return Lease(k, who, token, secs)
            if beat:
                queued, last_beat = True, now
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionBusyError(k.session_id, user_id=k.user_id, holder=got.holder,
                                       waited=time.monotonic() - start)
            pause(_pause(delay, left, got.retry_in))
            delay = min(delay * 2, poll[1])
    finally:
        if queued:
            try:
                leave(token)
            except Exception:  # the queue entry expires on its own
                logger.warning("leaving the lease queue of %s failed", k, exc_info=True)


async def await_lease(
    key: object,
    owner: object,
    ttl: object,
    wait: object,
    attempt: Callable[[str, bool], Awaitable[LeaseAttempt]],
    leave: Callable[[str], Awaitable[object]],
    pause: Callable[[float], Awaitable[object]] = asyncio.sleep,
    poll: tuple[float, float] = (POLL_MIN, POLL_MAX),
    release: Callable[[Lease], Awaitable[object]] | None = None,
) -> Lease:
    """:func:`wait_for_lease` for coroutines: waits without blocking the loop.

    A cancelled waiter stops waiting even when a client library swallowed the
    ``CancelledError`` (redis-py's asyncio client can, when a cancel meets its socket
    timeout): the task's pending cancel request is checked after every attempt, and a
    lease won meanwhile is given back (``release``)."""
    k, who, secs, patience = check_lease_args(key, owner, ttl, wait)
    token = new_token()
    start = time.monotonic()
    deadline = start + patience
    delay, last_beat, queued = poll[0], -math.inf, False
    try:
        while True:
            now = time.monotonic()
            beat = now < deadline and now - last_beat >= HEARTBEAT_EVERY
            got = await attempt(token, beat)
            if _cancel_requested():
                if got.acquired and release is not None:
                    await release(Lease(k, who, token, secs))
                raise asyncio.CancelledError
            if got.acquired:
                queued = False
                return Lease(k, who, token, secs)
            if beat:
                queued, last_beat = True, now
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionBusyError(k.session_id, user_id=k.user_id, holder=got.holder,
                                       waited=time.monotonic() - start)
            await pause(_pause(delay, left, got.retry_in))
            if _cancel_requested():
                raise asyncio.CancelledError
            delay = min(delay * 2, poll[1])
    finally:
        if queued:
            try:
                await leave(token)
            except Exception:
                logger.warning("leaving the lease queue of %s failed", k, exc_info=True)


def _cancel_requested() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
