"""Worker processes for the multi-process tests (imported by ``spawn`` children)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rx_agent import AgentState, Msg
from rx_agent.session import (
    ConcurrentSessionModificationError,
    RedisSessionStore,
    SessionKey,
    SqliteSessionStore,
)


def open_store(kind: str, where: str, prefix: str) -> Any:
    if kind == "sqlite":
        return SqliteSessionStore(where)
    return RedisSessionStore(where, prefix=prefix)


def one_save(store: Any, key: SessionKey, owner: str, text: str) -> None:
    lease = store.acquire_lease(key, owner, 10, 60)
    try:
        state, version = store.load_versioned(key)
        if state is None:
            state = AgentState(session_id=key.session_id, user_id=key.user_id)
        state.context.append(Msg("user", text))
        store.save_if_version(key, state, version)  # under the lease: never conflicts
    finally:
        store.release_lease(lease)


async def one_asave(store: Any, key: SessionKey, owner: str, text: str) -> None:
    lease = await store.aacquire_lease(key, owner, 10, 60)
    try:
        state, version = await store.aload_versioned(key)
        if state is None:
            state = AgentState(session_id=key.session_id, user_id=key.user_id)
        state.context.append(Msg("user", text))
        await store.asave_if_version(key, state, version)
    finally:
        await store.arelease_lease(lease)


def lease_and_cas_worker(kind: str, where: str, prefix: str, worker: int, sessions: int,
                         saves: int, use_async: bool) -> int:
    """``saves`` rounds over ``sessions`` sessions, each save under the lease; returns
    the number of saves done."""
    store = open_store(kind, where, prefix)
    keys = [SessionKey("load", f"s{n}") for n in range(sessions)]
    done = 0
    if use_async:
        async def main() -> int:
            count = 0
            for r in range(saves):
                for key in keys:
                    await one_asave(store, key, f"w{worker}", f"w{worker}:r{r}")
                    count += 1
            await store.aclose()
            return count

        done = asyncio.run(main())
    else:
        for r in range(saves):
            for key in keys:
                one_save(store, key, f"w{worker}", f"w{worker}:r{r}")
                done += 1
    store.close()
    return done


def stale_writer(kind: str, where: str, prefix: str, events: Any, results: Any) -> None:
    """Takes a short lease, loads, then stalls past its expiry (a paused process), and
    tries to save and release after someone else took over."""
    loaded, stolen = events
    store = open_store(kind, where, prefix)
    key = SessionKey("u", "fenced")
    lease = store.acquire_lease(key, "stale", 0.3, 5)
    state, version = store.load_versioned(key)
    assert state is not None
    loaded.set()
    stolen.wait(30)  # the lease expired and the other process saved meanwhile
    state.context.append(Msg("user", "from the stale writer"))
    outcome: dict[str, Any] = {}
    try:
        store.save_if_version(key, state, version)
        outcome["saved"] = True
    except ConcurrentSessionModificationError as exc:
        outcome["conflict"] = (exc.expected_version, exc.actual_version)
    outcome["renewed"] = store.renew_lease(lease)
    outcome["released"] = store.release_lease(lease)
    results.put(outcome)
    store.close()


def wait_until(predicate: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(0.01)
