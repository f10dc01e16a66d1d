"""Worker processes of the store contract's cross-process tests (imported by ``spawn``
children, so module-level functions taking the store's picklable opener)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..context import AgentState
from ..message import Msg
from ..session import ConcurrentSessionModificationError, SessionKey

__all__ = ["FENCED", "lease_and_cas_worker", "stale_writer"]

FENCED = SessionKey("u", "fenced")


def _one_save(store: Any, key: SessionKey, owner: str, text: str) -> None:
    lease = store.acquire_lease(key, owner, 10, 60)
    try:
        state, version = store.load_versioned(key)
        if state is None:
            state = AgentState(session_id=key.session_id, user_id=key.user_id)
        state.context.append(Msg("user", text))
        store.save_if_version(key, state, version)  # under the lease: never conflicts
    finally:
        store.release_lease(lease)


async def _one_asave(store: Any, key: SessionKey, owner: str, text: str) -> None:
    lease = await store.aacquire_lease(key, owner, 10, 60)
    try:
        state, version = await store.aload_versioned(key)
        if state is None:
            state = AgentState(session_id=key.session_id, user_id=key.user_id)
        state.context.append(Msg("user", text))
        await store.asave_if_version(key, state, version)
    finally:
        await store.arelease_lease(lease)


def lease_and_cas_worker(opener: Callable[[], Any], worker: int, sessions: int, saves: int,
                         use_async: bool) -> int:
    """``saves`` rounds over ``sessions`` sessions, each save under the lease; returns
    the number of saves done."""
    store = opener()
    keys = [SessionKey("load", f"s{n}") for n in range(sessions)]
    done = 0
    if use_async:
        async def main() -> int:
            count = 0
            for r in range(saves):
                for key in keys:
                    await _one_asave(store, key, f"w{worker}", f"w{worker}:r{r}")
                    count += 1
            await store.aclose()
            return count

        done = asyncio.run(main())
    else:
        for r in range(saves):
            for key in keys:
                _one_save(store, key, f"w{worker}", f"w{worker}:r{r}")
                done += 1
    store.close()
    return done


def stale_writer(opener: Callable[[], Any], events: Any, results: Any) -> None:
    """Takes a short lease, loads, then stalls past its expiry (a paused process), and
    tries to save and release after someone else took over."""
    loaded, stolen = events
    store = opener()
    lease = store.acquire_lease(FENCED, "stale", 0.3, 5)
    state, version = store.load_versioned(FENCED)
    assert state is not None
    loaded.set()
    stolen.wait(60)  # the lease expired and the other process saved meanwhile
    state.context.append(Msg("user", "from the stale writer"))
    outcome: dict[str, Any] = {}
    try:
        store.save_if_version(FENCED, state, version)
        outcome["saved"] = True
    except ConcurrentSessionModificationError as exc:
        outcome["conflict"] = (exc.expected_version, exc.actual_version)
    outcome["renewed"] = store.renew_lease(lease)
    outcome["released"] = store.release_lease(lease)
    results.put(outcome)
    store.close()
