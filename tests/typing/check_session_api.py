"""Type-checked (not run) by ``nox -s lint``: the session store API as documented, and
every built-in store statically satisfying both store protocols."""

from __future__ import annotations

from rx_agent import AgentState, Msg
from rx_agent.session import (
    AsyncSessionStore,
    ConcurrentSessionModificationError,
    ConflictPolicy,
    InMemorySessionStore,
    Lease,
    RedisSessionStore,
    SaveOutcome,
    SessionKey,
    SessionStore,
    SqliteSessionStore,
    VersionedSessionStore,
    asave_with_policy,
    mark_changed,
    merge_append,
    save_with_policy,
    session_store_from_url,
)


def blocking(store: VersionedSessionStore) -> int:
    key = SessionKey("u", "s")
    lease: Lease = store.acquire_lease(key, "worker-1", 30.0, 30.0)
    try:
        state, version = store.load_versioned(key)
        if state is None:
            state = AgentState(session_id=key.session_id)
        state.context.append(Msg("user", "hi"))
        mark_changed(state, state.context[0])
        try:
            version = store.save_if_version(key, state, version)
        except ConcurrentSessionModificationError as exc:
            print(exc.session_id, exc.expected_version, exc.actual_version)
        outcome: SaveOutcome = save_with_policy(store, key, state, version,
                                                ConflictPolicy.APPEND_MERGE, 0)
        merged: AgentState = merge_append(outcome.state, outcome.base_len, state)
        print(merged.context, store.list_sessions("u"), store.delete(key))
    finally:
        renewed: bool = store.renew_lease(lease)
        released: bool = store.release_lease(lease)
        print(renewed, released)
    return version


async def non_blocking(store: AsyncSessionStore) -> int:
    key = SessionKey("u", "s")
    lease = await store.aacquire_lease(key, "worker-1", 30.0, 30.0)
    state, version = await store.aload_versioned(key)
    assert state is not None
    outcome = await asave_with_policy(store, key, state, version, "FAIL")
    await store.arelease_lease(lease)
    return outcome.version


def every_store_fits_both() -> None:
    stores: list[VersionedSessionStore] = [
        InMemorySessionStore(), SqliteSessionStore("s.db"), RedisSessionStore()]
    coroutine_stores: list[AsyncSessionStore] = [
        InMemorySessionStore(), SqliteSessionStore("s.db"), RedisSessionStore()]
    legacy: list[SessionStore] = [InMemorySessionStore(), SqliteSessionStore("s.db")]
    chosen = session_store_from_url("sqlite:///s.db")
    print(stores, coroutine_stores, legacy, chosen.list_sessions())
