"""The store contract, part three: durable stores, whose sessions other store objects
and other processes share (see :mod:`.store_contract`)."""

from __future__ import annotations

import multiprocessing
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from ..agent import ReActAgent
from ..context import AgentState, RuntimeContext
from ..message import Msg
from ..model import ScriptedModel
from ..session import SessionBusyError, SessionKey
from ..session._base import is_durable
from ._contract_state import KEY, round_msgs, state_with, texts
from ._store_workers import FENCED, lease_and_cas_worker, stale_writer

__all__ = ["SharingContract"]

_SPAWN = multiprocessing.get_context("spawn")


def _picklable(opener: Callable[[], Any]) -> None:
    try:
        pickle.dumps(opener)
    except Exception as exc:
        pytest.fail(f"the opener must be picklable to open the store in other processes "
                    f"(a module-level function or functools.partial): {exc}")


class SharingContract:
    """What durable stores add (a part of :class:`DurableStoreContract`)."""

    processes = 4
    """Worker processes of the cross-process test (half use the coroutines)."""
    sessions = 25
    saves = 4
    """Each worker saves each of ``sessions`` sessions ``saves`` times, under the lease."""

    def test_it_declares_it_is_durable(self, store: Any) -> None:
        assert store.durable is True and is_durable(store)

    def test_loads_are_copies(self, store: Any) -> None:
        state = state_with(1)
        store.save(KEY, state)
        loaded = store.load(KEY)
        assert loaded is not state
        loaded.context.clear()  # editing a loaded copy does not touch what is stored
        assert len(store.load(KEY).context) == 4

    def test_unserialisable_data_names_the_session(self, store: Any) -> None:
        state = state_with(1)
        state.data["handle"] = object()
        with pytest.raises(TypeError, match="'chat-1' is not JSON-serialisable"):
            store.save(KEY, state)
        assert store.load(KEY) is None

    def test_another_store_object_shares_the_sessions(
        self, store: Any, opener: Callable[[], Any]
    ) -> None:
        other = opener()
        try:
            store.save_if_version(KEY, state_with(1), 0)
            state, version = other.load_versioned(KEY)
            assert version == 1 and texts(state) == texts(state_with(1))
            assert other.list_sessions() == [KEY]
            assert state is not None
            state.context.extend(round_msgs(5))
            assert other.save_if_version(KEY, state, 1) == 2
            assert len(store.load(KEY).context) == 8  # no stale cache in the first object
            with pytest.raises(Exception, match="expected version 1"):
                store.save_if_version(KEY, state_with(3), 1)
            assert other.delete(KEY) is True and store.load_versioned(KEY) == (None, 0)
        finally:
            other.close()

    def test_leases_hold_across_store_objects(
        self, store: Any, opener: Callable[[], Any]
    ) -> None:
        other = opener()
        try:
            lease = store.acquire_lease(KEY, "worker-a", 10, 0)
            with pytest.raises(SessionBusyError) as info:
                other.acquire_lease(KEY, "worker-b", 10, 0.1)
            assert info.value.holder == "worker-a"
            assert other.release_lease(lease) is True  # the token is what counts
            got = other.acquire_lease(KEY, "worker-b", 10, 0)
            assert store.renew_lease(got) is True and store.release_lease(got) is True
        finally:
            other.close()

    def test_an_agent_continues_its_session_through_another_store_object(
        self, store: Any, opener: Callable[[], Any]
    ) -> None:
        model = ScriptedModel(["one", "two"])
        ctx = RuntimeContext(session_id="s1", user_id="bob")
        ReActAgent(name="a", model=model, session_store=store).call_sync("first", ctx)
        other = opener()
        try:
            again = ReActAgent(name="a", model=model, session_store=other)
            reply = again.call_sync("second", RuntimeContext(session_id="s1", user_id="bob"))
            assert reply.text == "two"
            assert len(model.calls[1].messages) == 3  # the stored history reached the model
        finally:
            other.close()
        stored = store.load(SessionKey("bob", "s1"))
        assert [m.text for m in stored.context] == ["first", "one", "second", "two"]

    def test_a_cached_session_is_never_served_after_another_store_object_wrote_it(
        self, store: Any, opener: Callable[[], Any]
    ) -> None:
        """The store keeps the sessions its calls served (a kit backend:
        ``session/_cache.py``); a write through another store object between two
        calls is what the next call sees, and so is a delete."""
        model = ScriptedModel(["one", "two", "three", "four"])
        ctx = RuntimeContext(session_id="s1", user_id="bob")
        mine = ReActAgent(name="a", model=model, session_store=store)
        mine.call_sync("first", ctx)
        mine.call_sync("second", RuntimeContext(session_id="s1", user_id="bob"))
        other = opener()
        try:
            key = SessionKey("bob", "s1")
            state, version = other.load_versioned(key)
            state.context.append(Msg("user", "written elsewhere"))
            other.save_if_version(key, state, version)
            mine.call_sync("third", RuntimeContext(session_id="s1", user_id="bob"))
            seen = [m.text for m in model.calls[2].messages if m.role.value != "system"]
            assert seen == ["first", "one", "second", "two", "written elsewhere", "third"]
            assert other.delete(key) is True
            mine.call_sync("fourth", RuntimeContext(session_id="s1", user_id="bob"))
            seen = [m.text for m in model.calls[3].messages if m.role.value != "system"]
            assert seen == ["fourth"]  # deleted: a new conversation, not the cached one
        finally:
            other.close()

    def test_processes_lose_and_duplicate_nothing(
        self, store: Any, opener: Callable[[], Any]
    ) -> None:
        _picklable(opener)
        workers, sessions, saves = self.processes, self.sessions, self.saves
        with _SPAWN.Pool(workers) as pool:
            done = pool.starmap_async(lease_and_cas_worker, [
                (opener, w, sessions, saves, w % 2 == 1) for w in range(workers)]).get(600)
        assert done == [sessions * saves] * workers
        keys = store.list_sessions("load")
        assert keys == sorted(SessionKey("load", f"s{n}") for n in range(sessions))
        for key in keys:
            state, version = store.load_versioned(key)
            assert state is not None
            assert version == workers * saves
            got = [m.text for m in state.context]
            # Every save is there exactly once ...
            assert sorted(got) == sorted(f"w{w}:r{r}" for w in range(workers)
                                         for r in range(saves)), key
            assert len({m.id for m in state.context}) == len(got)
            # ... and each worker's saves in the order it made them.
            for w in range(workers):
                assert [t for t in got if t.startswith(f"w{w}:")] == [
                    f"w{w}:r{r}" for r in range(saves)]

    def test_a_writer_whose_lease_was_taken_is_fenced(
        self, store: Any, opener: Callable[[], Any]
    ) -> None:
        _picklable(opener)
        store.save(FENCED, AgentState(session_id="fenced", user_id="u",
                                      context=[Msg("user", "hi")]))
        loaded, stolen = _SPAWN.Event(), _SPAWN.Event()
        results = _SPAWN.Queue()
        proc = _SPAWN.Process(target=stale_writer, args=(opener, (loaded, stolen), results))
        proc.start()
        try:
            assert loaded.wait(120), "the stale writer did not start"
            # Its 0.3 s lease expires; this process takes over and saves.
            lease = store.acquire_lease(FENCED, "new-owner", 30, 10)
            state, version = store.load_versioned(FENCED)
            assert state is not None
            state.context.append(Msg("user", "from the new owner"))
            store.save_if_version(FENCED, state, version)
            stolen.set()
            outcome: dict[str, Any] = results.get(timeout=120)
            assert outcome == {"conflict": (1, 2), "renewed": False, "released": False}
            # Nothing of the stale writer got in, and the new owner still holds the lease.
            assert [m.text for m in store.load(FENCED).context] == ["hi", "from the new owner"]
            assert store.renew_lease(lease) is True
            assert store.release_lease(lease) is True
        finally:
            proc.join(60)
        assert proc.exitcode == 0
