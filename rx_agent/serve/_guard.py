"""One call per session: a post to a running session is refused (409) or queued.

In one worker a dict of running sessions answers at once. With a durable store
(SQLite, Redis) the guard also holds a *serving lease* beside the agent's own: the
lease of the session key ``<session id>/serve`` (``/`` is never part of a session id,
so it cannot collide with one). Any worker that finds it held answers 409 without
waiting; its owner string names the run, so an interrupt posted to another worker can
reach it: that worker takes ``<session id>/interrupt`` with the run id as owner, and
the serving worker polls for it while its call runs.

With ``queue=True`` nothing is refused: calls wait their turn in the agent's
in-process queue and on its session lease (``session_wait``), as library calls do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from ..session import (
    AsyncSessionStore,
    InMemorySessionStore,
    Lease,
    SessionBusyError,
    SessionKey,
    SessionStore,
)
from ._errors import busy

__all__ = ["Hold", "SessionGuard"]

log = logging.getLogger("rx_agent.serve")

INTERRUPT_POLL = 0.25
"""Seconds between a serving worker's checks for an interrupt posted elsewhere."""

_OWNER = f"{socket.gethostname()}:{os.getpid()}"


def _serve_key(key: SessionKey) -> SessionKey:
    return SessionKey(key.user_id, f"{key.session_id}/serve")


def _interrupt_key(key: SessionKey) -> SessionKey:
    return SessionKey(key.user_id, f"{key.session_id}/interrupt")


@dataclass(eq=False)
class Hold:
    """This worker's right to run ``run_id`` on ``key``."""

    key: SessionKey
    run_id: str
    on_interrupt: Callable[[], object]
    lease: Lease | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class SessionGuard:
    def __init__(self, store: SessionStore, ttl: float, *, queue: bool) -> None:
        self.queue = queue
        self.ttl = ttl
        self._store: AsyncSessionStore | None = (
            store if isinstance(store, AsyncSessionStore)
            and not isinstance(store, InMemorySessionStore) else None
        )
        self._local: dict[SessionKey, Hold] = {}

    @property
    def shared(self) -> bool:
        """Whether other processes can serve the same sessions (a durable store)."""
        return self._store is not None

    def local(self, key: SessionKey) -> Hold | None:
        return self._local.get(key)

    async def enter(self, key: SessionKey, run_id: str,
                    on_interrupt: Callable[[], object]) -> Hold | None:
        """Hold ``key`` for a call, or raise the 409; ``None`` when queueing."""
        if self.queue:
            return None
        if key in self._local:
            raise busy(key.session_id)
        hold = Hold(key, run_id, on_interrupt)
        self._local[key] = hold  # before any await: a second post sees it at once
        if self._store is None:
            return hold
        try:
            hold.lease = await self._store.aacquire_lease(
                _serve_key(key), f"serve:{run_id}:{_OWNER}", ttl=self.ttl, wait=0)
        except SessionBusyError:
            del self._local[key]
            raise busy(key.session_id) from None
        except BaseException:
            del self._local[key]
            raise
        hold.tasks.append(asyncio.create_task(self._renew(hold)))
        hold.tasks.append(asyncio.create_task(self._watch_interrupts(hold)))
        return hold

    async def leave(self, hold: Hold | None) -> None:
        if hold is None:
            return
        if self._local.get(hold.key) is hold:
            del self._local[hold.key]
        for task in hold.tasks:
            task.cancel()
        for task in hold.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if hold.lease is not None and self._store is not None:
            try:
                await self._store.arelease_lease(hold.lease)
            except Exception:  # it expires after its ttl anyway
                log.warning("releasing the serving lease of %s failed", hold.key, exc_info=True)

    async def running(self, key: SessionKey) -> bool:
        """Whether a call runs on ``key`` here or (durable store) in any worker."""
        if key in self._local:
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
