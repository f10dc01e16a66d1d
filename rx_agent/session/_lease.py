"""Leases shared by every store: the waiting loops (sync and async), and
:class:`LeaseRecord`, one session's lease as plain data for a backend without lease
logic of its own (see :mod:`rx_agent.session._backend`).

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
from dataclasses import dataclass
from typing import Any, NamedTuple

from ._base import Lease, SessionBusyError, check_lease_args

__all__ = [
    "POLL_MAX",
    "POLL_MIN",
    "WAITER_TTL",
    "LeaseAttempt",
    "LeaseRecord",
    "await_lease",
    "wait_for_lease",
]

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


# -- one session's lease as plain data -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """One session's lease as plain data, for a backend that can read-modify-write one
    small record atomically (a file under a lock, a row ``SELECT ... FOR UPDATE``, a
    compare-and-set key) but has no lease logic of its own.

    A :class:`~rx_agent.session.SessionBackend` implementing ``_update_lease`` gets
    acquire (first come first served), renew and release from these methods, with the
    semantics of the built-in stores. Times are ``time.time()`` seconds, so every
    process sharing the record needs a roughly synchronised clock. ``to_json`` /
    ``from_json`` give a JSON object to store.
    """

    token: str | None = None
    """The holder's lease token (``None``: nobody holds it)."""
    owner: str | None = None
    expires: float = 0.0
    queue: tuple[tuple[str, float], ...] = ()
    """Waiting tokens in arrival order, each with the time its place lapses."""

    def _held(self, now: float) -> bool:
        return self.token is not None and self.expires > now

    def _tidy(self, now: float) -> LeaseRecord | None:
        """This record without lapsed waiters nor an expired holder (``None``: empty)."""
        queue = tuple(w for w in self.queue if w[1] >= now)
        held = self._held(now)
        if not held and not queue:
            return None
        if queue == self.queue and held:
            return self
        return LeaseRecord(self.token if held else None, self.owner if held else None,
                           self.expires if held else 0.0, queue)

    def attempt(self, token: str, owner: str, ttl: float, join: bool,
                now: float) -> tuple[LeaseRecord | None, LeaseAttempt]:
        """Take the lease for ``token`` if it is free and ``token`` is first in line;
        else (with ``join``) queue it or refresh its place. The new record and the answer."""
        queue = tuple(w for w in self.queue if w[1] >= now)
        if not self._held(now) and (not queue or queue[0][0] == token):
            rest = tuple(w for w in queue if w[0] != token)
            return LeaseRecord(token, owner, now + ttl, rest), LeaseAttempt(True)
        if join:
            place = now + WAITER_TTL
            if any(w[0] == token for w in queue):
                queue = tuple((t, place if t == token else d) for t, d in queue)
            else:
                queue = (*queue, (token, place))
        held = self._held(now)
        record = LeaseRecord(self.token if held else None, self.owner if held else None,
                             self.expires if held else 0.0, queue)
        if not held:
            return record, LeaseAttempt(False)
        return record, LeaseAttempt(False, self.owner, self.expires - now)

    def leave(self, token: str, now: float) -> LeaseRecord | None:
        """``token`` out of the queue (a waiter that gave up)."""
        kept = LeaseRecord(self.token, self.owner, self.expires,
                           tuple(w for w in self.queue if w[0] != token))
        return kept._tidy(now)

    def renew(self, lease: Lease, now: float) -> tuple[LeaseRecord | None, bool]:
        """Extend ``lease`` by its ttl; ``False`` (and no change) once it was lost."""
        if self.token != lease.token or not self._held(now):
            return self._tidy(now), False
        return LeaseRecord(self.token, self.owner, now + lease.ttl, self.queue)._tidy(now), True

    def release(self, lease: Lease, now: float) -> tuple[LeaseRecord | None, bool]:
        """Free ``lease``; ``True`` only if it still held the session (an expired lease
        of this token is cleared too, but answers ``False``)."""
        if self.token != lease.token:
            return self._tidy(now), False
        held = self._held(now)
        return LeaseRecord(None, None, 0.0, self.queue)._tidy(now), held

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "owner": self.owner, "expires": self.expires,
                "queue": [list(w) for w in self.queue]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LeaseRecord:
        return cls(data.get("token"), data.get("owner"), float(data.get("expires", 0.0)),
                   tuple((str(t), float(d)) for t, d in data.get("queue", ())))
