"""Type-checked (not run) by ``nox -s lint``: the session store API as documented, and
every built-in store statically satisfying both store protocols."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rx_agent import AgentState, Msg
from rx_agent.session import (
    AsyncSessionStore,
    ConcurrentSessionModificationError,
    ConflictPolicy,
    InMemorySessionStore,
    Lease,
    LeaseAttempt,
    LeaseRecord,
    RedisSessionStore,
    SaveOutcome,
    SessionBackend,
    SessionChanges,
    SessionKey,
    SessionStore,
    SqliteSessionStore,
    VersionedSessionStore,
    asave_with_policy,
    mark_changed,
    merge_append,
    register_store_scheme,
    save_with_policy,
    session_store_from_url,
)

T = TypeVar("T")


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
    kit: list[SessionBackend] = [InMemorySessionStore(), SqliteSessionStore("s.db"),
                                 RedisSessionStore(), chosen]
    print(kit, chosen.version(SessionKey("u", "s")))


class DictBackend(SessionBackend):
    """A backend as docs/internals.md shows one: the primitives, typed."""

    def __init__(self) -> None:
        self.rows: dict[SessionKey, tuple[int, AgentState]] = {}
        self.leases: dict[SessionKey, LeaseRecord] = {}

    def _read(self, key: SessionKey) -> tuple[AgentState | None, int]:
        version, state = self.rows.get(key, (0, None))
        return state, version

    def _write(self, key: SessionKey, state: AgentState, expected: int | None,
               marked: frozenset[str]) -> int:
        version = self.rows.get(key, (0, state))[0] + 1
        self.rows[key] = (version, state)
        return version

    def _remove(self, key: SessionKey) -> bool:
        return self.rows.pop(key, None) is not None

    def _list_keys(self, user_id: str | None) -> list[SessionKey]:
        return sorted(k for k in self.rows if user_id is None or k.user_id == user_id)

    def _update_lease(self, key: SessionKey,
                      change: Callable[[LeaseRecord | None], tuple[LeaseRecord | None, T]]) -> T:
        new, answer = change(self.leases.get(key))
        if new is not None:
            self.leases[key] = new
        return answer


def registering() -> None:
    register_store_scheme("dict", lambda url: DictBackend(), forms=("dict://",))
    changes: SessionChanges = DictBackend().load_since(SessionKey("u", "s"), 0, 0)
    state: AgentState | None = changes.apply(None)
    attempt: LeaseAttempt = LeaseAttempt(True)
    print(state, attempt)
