"""What the store contract (``tests/session/test_contract.py``) does not cover: the
in-memory store's live objects, the errors themselves, and the minimal protocol."""

from __future__ import annotations

import pickle

import pytest

from rx_agent import AgentState
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

from .conftest import KEY, state_with


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
