"""A call's hold on a durable session: the lease, the loaded version, checkpoints.

With a store that other processes share (SQLite, Redis), one in-process slot is not
enough: a call takes the session's lease (one writer across processes), renews it
at a third of its ttl while it runs, loads the state with its version, and saves with
compare-and-set at every checkpoint. A writer that lost its lease and saves an old
version is fenced (:class:`ConcurrentSessionModificationError` under
``ConflictPolicy.FAIL``), never overwriting newer state; releasing checks the lease's
token, so it never frees the new owner's lease.

A store built on the session kit keeps the state a call saved
(:mod:`rx_agent.session._cache`): the next call on that session, once it holds the
lease, reads the stored version and decodes nothing while it is unchanged. The repair
of open tool calls then scans only the messages that could hold one: those after
``clean``, the prefix the previous call found closed (:func:`closed_prefix`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket

from .._record import new_id
from ..context import AgentState
from ..message import Msg, ToolResultState
from ..session import (
    AsyncSessionStore,
    ConcurrentSessionModificationError,
    ConflictPolicy,
    Lease,
    SessionBusyError,
    SessionKey,
    asave_with_policy,
)
from ..session._base import is_durable
from ..session._cache import Served
from ._hitl import close_pending
from ._journal import recover_journaled
from ._results import close_unanswered, closed_prefix

__all__ = ["RECOVERED_TEXT", "DurableHold", "close_paused_durably", "is_durable"]

logger = logging.getLogger("rx_agent")

RECOVERED_TEXT = "Interrupted: the worker serving this session stopped before the tool finished."

_HOST = socket.gethostname()


class DurableHold:
    """The lease and version of one call on a durable session."""

    __slots__ = (
        "base_len",
        "clean",
        "fenced",
        "keeps",
        "key",
        "lease",
        "merged",
        "owner",
        "policy",
        "prefix",
        "renewer",
        "store",
        "ttl",
        "version",
        "wait",
    )

    def __init__(
        self,
        store: AsyncSessionStore,
        key: SessionKey,
        run_id: str,
        *,
        ttl: float,
        wait: float,
        policy: ConflictPolicy,
    ) -> None:
        self.store = store
        self.key = key
        self.owner = f"{_HOST}:{os.getpid()}:{run_id}"
        self.ttl = ttl
        self.wait = wait
        self.policy = policy
        self.lease: Lease | None = None
        self.renewer: asyncio.Task[None] | None = None
        self.version = 0
        self.base_len = 0  # where this call's messages start (for APPEND_MERGE)
        self.fenced = False  # a newer writer won: this call writes nothing more
        # The session cache (a kit store's): how much of the loaded context is known to
        # hold no open tool call, and those message objects (to tell if they changed).
        self.keeps = all(hasattr(store, n) for n in ("acheckout", "keep", "unchanged_prefix"))
        self.clean = 0
        self.prefix: list[Msg] = []
        self.merged = False  # APPEND_MERGE rewrote the state: not kept

    async def acquire(self) -> AgentState | None:
        """Take the lease (waiting up to ``wait``: else ``SessionBusyError``) and load."""
        self.lease = await self.store.aacquire_lease(self.key, self.owner, self.ttl, self.wait)
        self.renewer = asyncio.get_running_loop().create_task(self._renew(self.lease))
        if self.keeps:
            # Under the lease: no other writer can come between this version check
            # and the call's saves.
            served: Served = await self.store.acheckout(self.key)  # type: ignore[attr-defined]
            state, self.version = served.state, served.version
            self.clean, self.prefix = served.clean, served.prefix
        else:
            state, self.version = await self.store.aload_versioned(self.key)
        if state is not None:
            self.base_len = len(state.context)
        return state

    def recover(self, state: AgentState) -> list[str]:
        """Answer the tool calls a stopped worker left open; their ids, the journaled
        ones first. Only the messages after the known closed prefix are scanned.

        A side-effect call the tool journal knows of (``_journal.py``) gets its
        journaled result, or one that says it may have run: it is never run again.
        Every other open call gets :data:`RECOVERED_TEXT`."""
        if state.pending is not None:  # a paused reply's calls are waiting, not orphans
            return []
        clean = self.clean if self.clean <= len(state.context) else 0
        journaled = recover_journaled(state, start=clean)
        blocks = close_unanswered(state, ToolResultState.INTERRUPTED, RECOVERED_TEXT,
                                  start=clean)
        return [b.id for b in journaled] + [b.id for b in blocks]

    async def checkpoint(self, state: AgentState) -> None:
        """Save ``state`` by compare-and-set on the version this call holds."""
        if self.fenced:
            return
        try:
            outcome = await asave_with_policy(self.store, self.key, state, self.version,
                                              self.policy, self.base_len)
        except ConcurrentSessionModificationError:
            self.fenced = True
            raise
        if outcome.state is not state:  # APPEND_MERGE: go on from the merged state
            self.merged = True
            state.context[:] = outcome.state.context
            state.pending = outcome.state.pending
            state.permission_rules[:] = outcome.state.permission_rules
            state.data = outcome.state.data
        self.version = outcome.version
        self.base_len = outcome.base_len

    async def release(self, state: AgentState | None) -> BaseException | None:
        """The last checkpoint (unless fenced), then the lease goes (only if still ours).

        Returns what kept the state from being saved (a newer writer under
        ``ConflictPolicy.FAIL``, an unreachable store): the call fails with it."""
        renewer, self.renewer = self.renewer, None
        if renewer is not None:
            renewer.cancel()
        try:
            if state is not None and self.lease is not None:
                await self.checkpoint(state)
                if self.keeps and not (self.fenced or self.merged):
                    self._keep(state)
        except Exception as exc:
            logger.warning("session %s: the state was not saved (%s)", self.key, exc)
            return exc
        finally:
            lease, self.lease = self.lease, None
            if lease is not None:
                try:
                    await self.store.arelease_lease(lease)
                except Exception:
                    logger.exception("releasing the lease of session %s failed", self.key)
        return None

    def _keep(self, state: AgentState) -> None:
        """Give the saved state to the store's session cache, with the prefix of it
        that holds no open tool call (scanned from where the known one ends)."""
        try:
            self._keep_clean(state)
        except Exception:  # the state is saved: a cache that failed only costs a load
            logger.exception("session %s: caching the saved state failed", self.key)

    def _keep_clean(self, state: AgentState) -> None:
        context, clean, prefix = state.context, self.clean, self.prefix
        # A call that replaced any message of the known prefix (compaction, a merge)
        # makes it unknown: the scan starts over. The store's delta saves tell when
        # they rewrote nothing of it; else a C-speed identity compare does.
        kept = self.store.unchanged_prefix(self.key)  # type: ignore[attr-defined]
        if clean > len(context) or len(prefix) != clean or (
                kept < clean and context[:clean] != prefix):
            clean = 0
        # A paused reply's open calls are waiting for their answers, not orphans.
        clean = 0 if state.pending is not None else closed_prefix(context, clean)
        # The call's own list is the prefix when all of it is closed (the common
        # case): a later edit of it only makes the next compare fail (a full scan).
        prefix = context if clean == len(context) else context[:clean]
        self.store.keep(self.key, state, self.version,  # type: ignore[attr-defined]
                        clean, prefix)

    async def _renew(self, lease: Lease) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                await asyncio.sleep(lease.ttl / 3)
                try:
                    held = await self.store.arenew_lease(lease)
                except Exception:
                    logger.exception("renewing the lease of session %s failed", self.key)
                    continue
                if not held:
                    # Another worker took over: the next compare-and-set fences this call.
                    logger.warning("session %s: lease lost (expired or taken)", self.key)
                    return


async def close_paused_durably(
    store: AsyncSessionStore, key: SessionKey, msg: Msg | None, ttl: float
) -> bool:
    """Interrupt a paused session like any other write: under its lease, saved by
    compare-and-set on the version loaded (``ConflictPolicy.FAIL``: an interrupt never
    merges into or overwrites newer state). Whether it closed the pending calls.

    The lease is not waited for: whoever holds it is running the session (a worker
    resuming the pause, say), and its own call closes or answers the pending calls;
    writing past it would fence that call out and record a tool that really ran as
    INTERRUPTED.
    """
    hold = DurableHold(store, key, f"interrupt-{new_id()}", ttl=ttl, wait=0,
                       policy=ConflictPolicy.FAIL)
    try:
        state = await hold.acquire()
    except SessionBusyError:
        return False
    except BaseException:
        await hold.release(None)  # the load failed: the lease goes anyway
        raise
    if state is None or state.pending is None:
        await hold.release(None)
        return False
    close_pending(state)
    if msg is not None:
        state.context.append(msg)
    return await hold.release(state) is None
