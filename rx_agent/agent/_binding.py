"""A call's hold on its session: the slot, the state loaded into it, saving, release.

Stores may answer synchronously or with awaitables (see :mod:`rx_agent.session`);
:func:`load_state` and :func:`save_state` are the one place that tells them apart. A
durable store (shared by processes) adds a lease, versions and checkpoints
(:mod:`._durable`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Awaitable, Sequence
from typing import Any

from .._rx import runtime_loop
from ..context import AgentState
from ..message import Msg
from ..session import AsyncSessionStore, SessionKey, SessionStore
from ._durable import DurableHold, close_paused_durably
from ._hitl import close_pending
from ._slots import SessionSlots

__all__ = ["SessionBinding", "close_paused", "load_state", "save_state"]

logger = logging.getLogger("rx_agent")


async def load_state(store: SessionStore, key: SessionKey) -> AgentState | None:
    """The stored state (awaited when the store is asynchronous)."""
    loaded = store.load(key)
    if loaded is not None and not isinstance(loaded, AgentState):
        loaded = await loaded
    if loaded is not None and not isinstance(loaded, AgentState):
        raise TypeError(
            f"{type(store).__name__}.load() gave {type(loaded).__name__}, not an AgentState"
        )
    return loaded


def save_state(store: SessionStore, key: SessionKey, state: AgentState) -> Awaitable[Any] | None:
    """Save ``state``; an awaitable when the store is asynchronous."""
    saved = store.save(key, state)
    return saved if saved is not None and inspect.isawaitable(saved) else None


class SessionBinding:
    """One call's session slot and state.

    ``bind()`` waits for the slot (FIFO per session) and loads the state; ``release()``
    saves it and frees the slot, once, whatever ended the call.
    """

    __slots__ = (
        "durable",
        "held",
        "key",
        "owner",
        "recovered",
        "released",
        "slots",
        "state",
        "store",
        "sync",
    )

    def __init__(
        self,
        slots: SessionSlots,
        store: SessionStore,
        key: SessionKey,
        owner: object,
        durable: DurableHold | None = None,
    ) -> None:
        self.slots = slots
        self.store = store
        self.key = key
        self.owner = owner
        self.state: AgentState | None = None
        self.held = False
        self.released = False
        self.durable = durable
        # Tool calls repaired on load (durable stores; a tuple: nothing per call else).
        self.recovered: Sequence[str] = ()
        # A store that answers inline (it declares it: the in-memory one) lets a call
        # finish without a task.
        self.sync = durable is None and getattr(store, "answers_inline", False) is True

    async def bind(self, user_id: str | None) -> AgentState:
        if self.state is not None and self.held:
            return self.state
        if not self.slots.try_acquire(self.key, self.owner):
            await self.slots.acquire(self.key, self.owner)
        self.held = True
        durable = self.durable
        loaded = await (durable.acquire() if durable is not None
                        else load_state(self.store, self.key))
        # A new session's state is built unvalidated from the call's own values, as
        # the runtime builds its messages: every field set (one fields set per class).
        state = loaded if loaded is not None else AgentState._fast({
            "session_id": self.key.session_id, "user_id": user_id, "context": [],
            "pending": None, "permission_rules": [], "data": {},
        })
        if durable is not None and loaded is not None:
            self.recovered = durable.recover(state)
        self.state = state
        return state

    async def checkpoint(self) -> None:
        """Save mid-call (durable stores only): a crash loses at most the step in flight."""
        if self.durable is not None and self.state is not None:
            await self.durable.checkpoint(self.state)

    def save(self) -> Awaitable[Any] | None:
        if self.held and self.state is not None:
            return save_state(self.store, self.key, self.state)
        return None

    async def release(self) -> BaseException | None:
        """Save the state and free the slot (once). Returns what kept the state from
        being saved (the store's error), so the call fails with it; ``None`` once saved."""
        if self.released:
            return None
        self.released = True
        try:
            if self.durable is not None:
                return await self.durable.release(self.state if self.held else None)
            saved = self.save()
            if saved is not None:
                await saved
        except Exception as exc:
            logger.warning("session %s: the state was not saved (%s)", self.key, exc)
            return exc
        finally:
            self._free()
        return None

    def release_now(self) -> BaseException | None:
        """:meth:`release` without waiting (a store that answers inline, or a closed
        loop); what kept the state from being saved, as :meth:`release`."""
        if self.released:
            return None
        self.released = True
        try:
            if self.durable is not None:
                # No loop left to compare-and-set on; the lease expires by itself.
                logger.error("session %s: the event loop has closed; the state was not "
                             "saved", self.key)
                return None
            saved = self.save()
            if saved is not None:
                close = getattr(saved, "close", None)
                if close is not None:
                    close()  # the loop is gone: a coroutine here can never run
                logger.error("session %s: the store is asynchronous and the event loop "
                             "has closed; the state was not saved", self.key)
        except Exception as exc:
            logger.warning("session %s: the state was not saved (%s)", self.key, exc)
            return exc
        finally:
            self._free()
        return None

    def _free(self) -> None:
        if self.held:
            self.held = False
            self.slots.release(self.key, self.owner)


def close_paused(
    slots: SessionSlots,
    store: SessionStore,
    key: SessionKey,
    msg: Msg | None = None,
    *,
    lease_ttl: float | None = None,
) -> bool:
    """Interrupting a paused session (no call running) closes its pending calls with
    INTERRUPTED results, then records ``msg``; whether there was something to close
    (always ``True`` for an asynchronous store, which finishes on the runtime loop).

    A durable store (``lease_ttl`` given) is written under the session's lease and by
    compare-and-set (:func:`close_paused_durably`), on the runtime loop; a caller off
    any event loop waits for the answer (``False`` while another worker holds the
    lease), one on a loop cannot and gets ``True``.
    """
    if lease_ttl is not None:
        assert isinstance(store, AsyncSessionStore)
        done = asyncio.run_coroutine_threadsafe(
            close_paused_durably(store, key, msg, lease_ttl), runtime_loop())
        if _on_a_loop():
            done.add_done_callback(lambda f: _log_failure(f, key))
            return True
        return done.result()
    loaded = store.load(key)
    if loaded is not None and not isinstance(loaded, AgentState):
        asyncio.run_coroutine_threadsafe(_close_paused_async(slots, store, key, loaded, msg),
                                         runtime_loop())
        return True
    state = loaded
    if state is None or state.pending is None:
        return False
    token = object()
    if not slots.try_acquire(key, token):
        return False  # a call took the slot meanwhile; it closes or resumes the pause
    try:
        close_pending(state)
        if msg is not None:
            state.context.append(msg)
        saved = save_state(store, key, state)
        if saved is not None:
            asyncio.run_coroutine_threadsafe(_await(saved), runtime_loop())
    finally:
        slots.release(key, token)
    return True


async def _close_paused_async(
    slots: SessionSlots,
    store: SessionStore,
    key: SessionKey,
    loaded: Awaitable[Any],
    msg: Msg | None,
) -> None:
    token = object()
    await slots.acquire(key, token)
    try:
        state = await loaded
        if state is not None and state.pending is not None:
            close_pending(state)
            if msg is not None:
                state.context.append(msg)
            saved = save_state(store, key, state)
            if saved is not None:
                await saved
    finally:
        slots.release(key, token)


async def _await(awaitable: Awaitable[Any]) -> None:
    await awaitable


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _log_failure(done: concurrent.futures.Future[bool], key: SessionKey) -> None:
    if not done.cancelled() and done.exception() is not None:
        logger.error("interrupting the paused session %s failed", key,
                     exc_info=done.exception())
