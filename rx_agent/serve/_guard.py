"""One call per session: a post to a running session is refused (409) or queued.

In one worker the calls of each session take turns on a local lock; the calls running
or waiting there make the session ``running`` (``GET`` says so, ``DELETE`` is 409).
With a durable store (SQLite, Redis) the running call also holds a *serving lease*
beside the agent's own: the lease of the session key ``<session id>/serve`` (``/`` is
never part of a session id, so it cannot collide with one). Any worker that finds it
held answers 409 without waiting (or, queueing, waits for it up to ``session_wait``);
its owner string names the run, so an interrupt posted to another worker can reach it:
that worker takes ``<session id>/interrupt`` with the run id as owner, and the serving
worker polls for it while its call runs.

With ``queue=True`` a post waits its turn instead of getting 409, in this worker and
on the serving lease, and then runs with everything the calls before it added.
``DELETE`` never waits: it takes the session as a call would, or answers 409.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from ..session import AsyncSessionStore, Lease, SessionBusyError, SessionKey, SessionStore
from ..session._base import is_durable
from ._errors import busy

__all__ = ["Hold", "SessionGuard"]

log = logging.getLogger("rx_agent.serve")

INTERRUPT_POLL = 0.25
"""Seconds between a serving worker's checks for an interrupt posted elsewhere."""

# How long a call waits out a probe of holder() that holds its lease for a moment.
_PROBE_WAIT = 1.0
_OWNER = f"{socket.gethostname()}:{os.getpid()}"


def _serve_key(key: SessionKey) -> SessionKey:
    return SessionKey(key.user_id, f"{key.session_id}/serve")


def _interrupt_key(key: SessionKey) -> SessionKey:
    return SessionKey(key.user_id, f"{key.session_id}/interrupt")


@dataclass(eq=False)
class _Turns:
    """The calls of one session in this worker: the lock they take turns on, and how
    many run or wait (the entry goes when the last one leaves)."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    count: int = 0


@dataclass(eq=False)
class Hold:
    """This worker's right to run ``run_id`` on ``key``."""

    key: SessionKey
    run_id: str
    on_interrupt: Callable[[], object]
    turns: _Turns
    lease: Lease | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    left: bool = False


def _nothing() -> None:
    return None


class SessionGuard:
    def __init__(self, store: SessionStore, ttl: float, *, queue: bool,
                 wait: float = 0.0) -> None:
        self.queue = queue
        self.ttl = ttl
        self.wait = wait
        """Seconds a queued post waits for another worker's serving lease."""
        self._store: AsyncSessionStore | None = (
            store if is_durable(store) and isinstance(store, AsyncSessionStore) else None)
        self._turns: dict[SessionKey, _Turns] = {}
        self._local: dict[SessionKey, Hold] = {}  # the call running now, per session

    @property
    def shared(self) -> bool:
        """Whether other processes can serve the same sessions (a durable store)."""
        return self._store is not None

    def local(self, key: SessionKey) -> Hold | None:
        return self._local.get(key)

    async def enter(self, key: SessionKey, run_id: str, on_interrupt: Callable[[], object],
                    *, queue: bool | None = None, watch: bool = True) -> Hold:
        """Hold ``key`` for a call (waiting for the calls before it when queueing), or
        raise the 409. ``watch``: keep the serving lease alive and listen for interrupts
        posted to other workers until it is left."""
        queue = self.queue if queue is None else queue
        turns = self._turns.get(key)
        if turns is not None and not queue:
            raise busy(key.session_id)
        if turns is None:
            turns = self._turns[key] = _Turns()
        turns.count += 1  # before any await: GET, DELETE and the next post see it at once
        try:
            await turns.lock.acquire()
        except BaseException:
            self._forget(key, turns)
            raise
        hold = Hold(key, run_id, on_interrupt, turns)
        if self._store is not None:
            owner = f"serve:{run_id}:{_OWNER}"
            try:
                try:
                    hold.lease = await self._store.aacquire_lease(
                        _serve_key(key), owner, ttl=self.ttl, wait=self.wait if queue else 0)
                except SessionBusyError as exc:
                    if not (exc.holder or "").startswith("probe:"):
                        raise
                    # Another worker's holder() probe (a GET), released at once: not a
                    # call, so wait for it rather than answer 409.
                    hold.lease = await self._store.aacquire_lease(
                        _serve_key(key), owner, ttl=self.ttl,
                        wait=max(self.wait if queue else 0, _PROBE_WAIT))
            except SessionBusyError:
                await self.leave(hold)
                raise busy(key.session_id) from None
            except BaseException:
                await self.leave(hold)
                raise
        # Only now is it this worker's call: until then an interrupt is for another one.
        self._local[key] = hold
        if watch and hold.lease is not None:
            hold.tasks.append(asyncio.create_task(self._renew(hold)))
            hold.tasks.append(asyncio.create_task(self._watch_interrupts(hold)))
        return hold

    async def leave(self, hold: Hold | None) -> None:
        if hold is None:
            return
        for task in hold.tasks:
            task.cancel()
        for task in hold.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        hold.tasks.clear()
        if hold.lease is not None and self._store is not None:
            lease, hold.lease = hold.lease, None
            try:
                await self._store.arelease_lease(lease)
            except Exception:  # it expires after its ttl anyway
                log.warning("releasing the serving lease of %s failed", hold.key, exc_info=True)
        if not hold.left:
            hold.left = True
            if self._local.get(hold.key) is hold:
                del self._local[hold.key]
            hold.turns.lock.release()
            self._forget(hold.key, hold.turns)

    def _forget(self, key: SessionKey, turns: _Turns) -> None:
        turns.count -= 1
        if turns.count == 0 and self._turns.get(key) is turns:
            del self._turns[key]

    @contextlib.asynccontextmanager
    async def exclusive(self, key: SessionKey) -> AsyncIterator[None]:
        """Hold ``key`` without waiting, for a change no call may run under (a delete);
        a running or waiting call makes it the 409."""
        hold = await self.enter(key, "exclusive", _nothing, queue=False, watch=False)
        try:
            yield
        finally:
            await self.leave(hold)

    async def running(self, key: SessionKey) -> bool:
        """Whether a call runs or waits on ``key`` here or (durable store) runs in any
        worker."""
        if key in self._turns:
            return True
        return await self.holder(key) is not None

    async def holder(self, key: SessionKey) -> str | None:
        """The owner of ``key``'s serving lease in another worker, if any."""
        if self._store is None:
            return None
        try:
            probe = await self._store.aacquire_lease(_serve_key(key), f"probe:{_OWNER}",
                                                     ttl=max(1.0, self.ttl), wait=0)
        except SessionBusyError as exc:
            return exc.holder or "another worker"
        await self._store.arelease_lease(probe)
        return None

    async def request_interrupt(self, key: SessionKey) -> bool:
        """Ask the worker serving ``key`` to interrupt it; whether a call was running."""
        holder = await self.holder(key)
        if holder is None or self._store is None or not holder.startswith("serve:"):
            return False
        run_id = holder.split(":")[1]
        with contextlib.suppress(SessionBusyError):  # already asked
            await self._store.aacquire_lease(_interrupt_key(key), f"interrupt:{run_id}",
                                             ttl=max(2.0, 8 * INTERRUPT_POLL), wait=0)
        return True

    async def _renew(self, hold: Hold) -> None:
        assert self._store is not None and hold.lease is not None
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                if not await self._store.arenew_lease(hold.lease):
                    log.warning("the serving lease of %s was lost", hold.key)
                    return
            except Exception:
                log.warning("renewing the serving lease of %s failed", hold.key, exc_info=True)

    async def _watch_interrupts(self, hold: Hold) -> None:
        assert self._store is not None
        wanted = f"interrupt:{hold.run_id}"
        while True:
            await asyncio.sleep(INTERRUPT_POLL)
            try:
                probe = await self._store.aacquire_lease(
                    _interrupt_key(hold.key), f"probe:{_OWNER}", ttl=1.0, wait=0)
            except SessionBusyError as exc:
                if exc.holder == wanted:
                    # Off the loop: with no call left to cut, interrupt() reads the store.
                    await asyncio.to_thread(hold.on_interrupt)
                    return
                continue
            except Exception:
                log.warning("checking for interrupts of %s failed", hold.key, exc_info=True)
                continue
            await self._store.arelease_lease(probe)
