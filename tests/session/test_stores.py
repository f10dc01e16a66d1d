"""The store contract, for every store: load/save, versions, compare-and-set, delete,
listing, the coroutine twins, and clear errors on bad input."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from rx_agent import AgentState, Msg, PermissionRule, ToolUseBlock
from rx_agent.context import PendingToolCalls
from rx_agent.session import (
    AsyncSessionStore,
    ConcurrentSessionModificationError,
    InMemorySessionStore,
    SessionBusyError,
    SessionCorruptError,
    SessionKey,
    SessionStore,
    VersionedSessionStore,
)

from .conftest import KEY, round_msgs, state_with, texts


def test_every_store_implements_both_protocols(store: Any) -> None:
    assert isinstance(store, SessionStore)
    assert isinstance(store, VersionedSessionStore)
    assert isinstance(store, AsyncSessionStore)


def test_round_trip_keeps_every_field(store: Any) -> None:
    assert store.load(KEY) is None
    assert store.load_versioned(KEY) == (None, 0)
    state = state_with(2)
    call = ToolUseBlock("c9", "rm", {"path": "/tmp/x"})
    state.context.append(Msg("assistant", [call]))
    state.pending = PendingToolCalls(reply_id="r1", kind="confirm", tool_calls=[call],
                                     batch=[call])
    state.permission_rules = [PermissionRule("rm", "allow")]
    state.data = {"plan": {"step": 3, "notes": ["a", "b"]}, "n": 1.5}
    store.save(KEY, state)
    loaded, version = store.load_versioned(KEY)
    assert version == 1
    assert loaded is not None
    assert loaded.model_dump() == state.model_dump()
    assert store.load(KEY).model_dump() == state.model_dump()


def test_versions_increase_by_one_per_save(store: Any) -> None:
    state = state_with(1)
    assert store.save_if_version(KEY, state, 0) == 1
    store.save(KEY, state)
    assert store.load_versioned(KEY)[1] == 2
    assert store.save_if_version(KEY, state, 2) == 3
    assert store.load_versioned(KEY)[1] == 3


def test_stale_version_raises_and_writes_nothing(store: Any) -> None:
    store.save_if_version(KEY, state_with(1), 0)
    newer = state_with(2)
    assert store.save_if_version(KEY, newer, 1) == 2
    stale = state_with(3)
    with pytest.raises(ConcurrentSessionModificationError) as info:
        store.save_if_version(KEY, stale, 1)
    err = info.value
    assert (err.session_id, err.expected_version, err.actual_version) == ("chat-1", 1, 2)
    assert "expected version 1" in str(err) and "nothing was written" in str(err)
    loaded, version = store.load_versioned(KEY)
    assert version == 2
    assert texts(loaded) == texts(newer)
    # Creating requires absence: version 0 against an existing session conflicts too.
    with pytest.raises(ConcurrentSessionModificationError):
        store.save_if_version(KEY, stale, 0)


def test_delete(store: Any) -> None:
    store.save(KEY, state_with(1))
    assert store.delete(KEY) is True
    assert store.load_versioned(KEY) == (None, 0)
    assert store.delete(KEY) is False
    assert store.list_sessions() == []
    # A writer that loaded before the delete cannot resurrect the session.
    with pytest.raises(ConcurrentSessionModificationError) as info:
        store.save_if_version(KEY, state_with(1), 1)
    assert info.value.actual_version == 0 and "was deleted" in str(info.value)
    assert store.save_if_version(KEY, state_with(1), 0) == 1


def test_list_sessions_per_user(store: Any) -> None:
    keys = [SessionKey("bob", "b2"), SessionKey("alice", "a1"), SessionKey("bob", "b1"),
            SessionKey("__anon__", "x"), SessionKey("we:ird%", "s:1")]
    for key in keys:
        store.save(key, state_with(1, key))
    assert store.list_sessions() == sorted(keys)
    assert store.list_sessions("bob") == [SessionKey("bob", "b1"), SessionKey("bob", "b2")]
    assert store.list_sessions("we:ird%") == [SessionKey("we:ird%", "s:1")]
    assert store.list_sessions("nobody") == []
    store.delete(SessionKey("bob", "b1"))
    assert store.list_sessions("bob") == [SessionKey("bob", "b2")]


def test_keys_with_separators_do_not_collide(store: Any) -> None:
    a, b = SessionKey("a:b", "c"), SessionKey("a", "b:c")
    store.save(a, state_with(1, a))
    store.save(b, state_with(2, b))
    assert len(store.load(a).context) == 4
    assert len(store.load(b).context) == 8


async def test_coroutines_match_the_sync_api(astore: Any) -> None:
    assert await astore.aload(KEY) is None
    assert await astore.aload_versioned(KEY) == (None, 0)
    state = state_with(1)
    assert await astore.asave_if_version(KEY, state, 0) == 1
    loaded, version = await astore.aload_versioned(KEY)
    assert version == 1 and texts(loaded) == texts(state)
    assert loaded is not None
    loaded.context.extend(round_msgs(7))
    await astore.asave(KEY, loaded)
    with pytest.raises(ConcurrentSessionModificationError):
        await astore.asave_if_version(KEY, state, 1)
    assert len((await astore.aload(KEY)).context) == 8
    assert await astore.alist_sessions() == [KEY]
    assert await astore.alist_sessions("alice") == [KEY]
    assert await astore.adelete(KEY) is True
    assert await astore.aload(KEY) is None


def test_bad_input_is_refused_clearly(store: Any) -> None:
    with pytest.raises(TypeError, match="saves AgentState"):
        store.save(KEY, {"context": []})
    with pytest.raises(TypeError, match="SessionKey"):
        store.save_if_version("chat-1", state_with(1), 0)
    with pytest.raises(ValueError, match="session_id must not be empty"):
        store.save_if_version(SessionKey("u", ""), state_with(1), 0)
    with pytest.raises(ValueError, match="ttl"):
        store.acquire_lease(KEY, "me", 0, 0)
    with pytest.raises(ValueError, match="owner"):
        store.acquire_lease(KEY, "", 1, 0)
    with pytest.raises(ValueError, match="wait"):
        store.acquire_lease(KEY, "me", 1, -1)


def test_unserialisable_data_names_the_session(durable: Any) -> None:
    state = state_with(1)
    state.data["handle"] = object()
    with pytest.raises(TypeError, match="'chat-1' is not JSON-serialisable"):
        durable.save(KEY, state)
    assert durable.load(KEY) is None


def test_durable_loads_are_copies(durable: Any) -> None:
    state = state_with(1)
    durable.save(KEY, state)
    loaded = durable.load(KEY)
    assert loaded is not state
    loaded.context.clear()  # editing a loaded copy does not touch what is stored
    assert len(durable.load(KEY).context) == 4


def test_in_memory_store_keeps_the_live_object() -> None:
    store = InMemorySessionStore()
    state = state_with(1)
    store.save(KEY, state)
    assert store.load(KEY) is state
    assert store.load_versioned(KEY) == (state, 1)
    assert store.keys() == [KEY] and len(store) == 1


@pytest.mark.parametrize("error", [
    ConcurrentSessionModificationError("s", 3, 5, user_id="u"),
    SessionBusyError("s", user_id="u", holder="worker-1", waited=1.5),
    SessionCorruptError("s", "bad JSON", user_id="u", where="SqliteSessionStore('x.db')"),
])
def test_errors_survive_pickling(error: Exception) -> None:
    # Worker processes hand errors back to their parent through pickle.
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


def test_error_messages_name_the_session() -> None:
    assert "session 's' of user 'u'" in str(SessionBusyError("s", user_id="u"))
    assert "session 's' is busy" in str(SessionBusyError("s", user_id="__anon__"))
    corrupt = SessionCorruptError("s", "not JSON", where="X")
    assert corrupt.problem == "not JSON" and "in X cannot be read: not JSON" in str(corrupt)
    assert isinstance(corrupt, ValueError)
    assert isinstance(ConcurrentSessionModificationError("s", 1, 2), RuntimeError)


def test_agent_state_alone_satisfies_the_legacy_protocol() -> None:
    class LoadSaveOnly:
        def load(self, key: SessionKey) -> AgentState | None:
            return None

        def save(self, key: SessionKey, state: AgentState) -> None:
            return None

    legacy = LoadSaveOnly()
    assert isinstance(legacy, SessionStore)
    assert not isinstance(legacy, AsyncSessionStore)
    assert not isinstance(legacy, VersionedSessionStore)
