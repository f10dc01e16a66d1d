"""The kit itself: which primitives a class gets, where they run, the capabilities it
declares, and the lease record's transitions."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rx_agent import AgentState, Msg
from rx_agent.session import (
    ConcurrentSessionModificationError,
    InMemorySessionStore,
    Lease,
    LeaseRecord,
    SessionBackend,
    SessionChanges,
    SessionKey,
    SqliteSessionStore,
    mark_changed,
)
from rx_agent.session._base import is_durable
from rx_agent.session._delta import take_marks

from .conftest import KEY, state_with, texts


class ReadOnly(SessionBackend):
    def _read(self, key: SessionKey) -> tuple[AgentState | None, int]:
        return None, 0


def test_a_missing_primitive_names_both_forms() -> None:
    store = ReadOnly()
    assert store.load(KEY) is None
    with pytest.raises(NotImplementedError, match=r"ReadOnly implements neither _write nor "
                                                  r"_awrite.*Writing a session backend"):
        store.save(KEY, state_with(1))
    with pytest.raises(NotImplementedError, match="neither _remove nor _aremove"):
        asyncio.run(store.adelete(KEY))
    # Leases: neither their own primitives nor _update_lease.
    with pytest.raises(NotImplementedError, match="neither _try_lease nor _atry_lease"):
        store.acquire_lease(KEY, "me", 1, 0)


class Threads(SessionBackend):
    """Records the thread each sync primitive ran on."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def _read(self, key: SessionKey) -> tuple[AgentState | None, int]:
        self.seen.append(threading.get_ident())
        return None, 0


class InlineThreads(Threads):
    answers_inline = True


async def test_sync_primitives_run_off_the_loop_unless_inline() -> None:
    here = threading.get_ident()
    blocking, inline = Threads(), InlineThreads()
    await blocking.aload(KEY)
    await inline.aload(KEY)
    assert blocking.seen[0] != here and inline.seen == [here]


async def test_sqlite_runs_on_its_own_threads(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    names: list[str] = []
    original = store._read

    def spy(key: SessionKey) -> tuple[AgentState | None, int]:
        names.append(threading.current_thread().name)
        return original(key)

    store._read = spy  # type: ignore[method-assign]
    await store.aload(KEY)
    await store.aclose()
    assert names[0].startswith("rx-sqlite")


def test_the_portal_is_one_thread_per_store_and_reopens_after_close() -> None:
    from ._async_backend import AsyncOnlyStore

    store = AsyncOnlyStore()
    store.save(KEY, state_with(1))
    store.load(KEY)
    assert len(store.storage.threads) == 1  # both calls on the store's one portal thread
    store.close()
    assert texts(store.load(KEY)) == texts(state_with(1))  # a new portal
    assert len(store.storage.threads) == 2
    store.close()


def test_capabilities() -> None:
    class Logging(InMemorySessionStore):
        def save(self, key: SessionKey, state: AgentState) -> None:
            super().save(key, state)

    class Declared(Logging):
        answers_inline = True

    class Untouched(InMemorySessionStore):
        pass

    assert InMemorySessionStore.answers_inline and not InMemorySessionStore.durable
    assert not Logging.answers_inline  # its save may block (or be a coroutine)
    assert Declared.answers_inline and Untouched.answers_inline
    assert not SqliteSessionStore.answers_inline and SqliteSessionStore.durable
    assert not is_durable(InMemorySessionStore()) and not is_durable(Logging())
    assert not is_durable(object())  # no coroutines: not durable whatever it declares


def test_a_failed_write_keeps_the_edit_marks(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    state = state_with(1)
    store.save_if_version(KEY, state, 0)
    mark_changed(state, state.context[0])
    with pytest.raises(ConcurrentSessionModificationError):
        store.save_if_version(KEY, state, 0)  # nothing written: the mark stays
    assert take_marks(state) == {state.context[0].id}
    store.close()


def test_changes_apply_to_the_callers_copy() -> None:
    known = state_with(1)
    newer = AgentState(session_id="chat-1", user_id="alice", context=[Msg("user", "new")])
    assert SessionChanges(0).apply(known) is None
    assert SessionChanges(3).apply(known) is known
    assert SessionChanges(4, newer).apply(known) is newer
    merged = SessionChanges(4, newer, 4).apply(known)
    assert merged is not None and texts(merged) == [*texts(known), "new"]
    with pytest.raises(ValueError, match="start at message 9"):
        SessionChanges(4, newer, 9).apply(known)


def test_version_and_load_since_check_their_arguments() -> None:
    store = InMemorySessionStore()
    with pytest.raises(TypeError, match="version must be an int"):
        store.load_since(KEY, "1", 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="count must be >= 0"):
        store.load_since(KEY, 1, -1)
    with pytest.raises(TypeError, match="SessionKey"):
        store.version("chat-1")  # type: ignore[arg-type]


# -- the lease record -------------------------------------------------------------------------


def test_the_lease_record_first_come_first_served() -> None:
    now = 1000.0
    record, got = LeaseRecord().attempt("t1", "a", 10, False, now)
    assert got.acquired and record is not None and record.owner == "a"
    record, got = record.attempt("t2", "b", 10, True, now + 1)
    assert not got.acquired and (got.holder, got.retry_in) == ("a", 9.0)
    assert record is not None
    record, got = record.attempt("t3", "c", 10, True, now + 2)  # queued behind t2
    assert record is not None
    released, held = record.release(Lease(KEY, "a", "t1", 10), now + 3)
    assert held and released is not None
    record, got = released.attempt("t3", "c", 10, True, now + 3)
    assert not got.acquired and got.holder is None  # free, but t2 came first
    assert record is not None
    record, got = record.attempt("t2", "b", 10, False, now + 3)
    assert got.acquired and record is not None and [t for t, _ in record.queue] == ["t3"]
    assert LeaseRecord.from_json(record.to_json()) == record


def test_the_lease_record_expiry_renewal_and_lapsed_waiters() -> None:
    record, _ = LeaseRecord().attempt("t1", "a", 10, False, 0.0)
    assert record is not None
    assert record.renew(Lease(KEY, "a", "other", 10), 5.0) == (record, False)
    renewed, ok = record.renew(Lease(KEY, "a", "t1", 10), 5.0)
    assert ok and renewed is not None and renewed.expires == 15.0
    assert renewed.renew(Lease(KEY, "a", "t1", 10), 16.0)[1] is False  # expired
    queued, _ = renewed.attempt("t2", "b", 10, True, 6.0)
    assert queued is not None
    # A waiter that stopped polling loses its place; an expired holder is cleared.
    assert queued.leave("t2", 6.0) == renewed
    assert queued.attempt("t3", "c", 10, False, 100.0)[1].acquired
    assert queued.release(Lease(KEY, "a", "t1", 10), 100.0) == (None, False)


def test_the_in_memory_store_wakes_a_waiter_at_once() -> None:
    store = InMemorySessionStore()
    lease = store.acquire_lease(KEY, "a", 30, 0)
    threading.Timer(0.1, store.release_lease, (lease,)).start()
    start = time.monotonic()
    got: Any = store.acquire_lease(KEY, "b", 30, 5)
    assert got.owner == "b" and time.monotonic() - start < 1.0  # no polling
