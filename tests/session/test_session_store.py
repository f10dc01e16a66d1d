"""Session stores: the in-memory default and an asynchronous store."""

from __future__ import annotations

import asyncio

from rx_agent import (
    AgentState,
    InMemorySessionStore,
    Msg,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    SessionKey,
    SessionStore,
)


def test_in_memory_store_round_trip() -> None:
    store = InMemorySessionStore()
    key = SessionKey("u", "s")
    assert store.load(key) is None
    state = AgentState(session_id="s", user_id="u", context=[Msg("user", "hi")])
    store.save(key, state)
    assert store.load(key) is state
    assert store.keys() == [key] and len(store) == 1
    store.delete(key)
    assert store.load(key) is None
    assert isinstance(store, SessionStore)


class JsonAsyncStore:
    """Persists state as JSON text and answers asynchronously."""

    def __init__(self) -> None:
        self.data: dict[SessionKey, str] = {}
        self.saves = 0

    async def load(self, key: SessionKey) -> AgentState | None:
        await asyncio.sleep(0)
        text = self.data.get(key)
        return AgentState.model_validate_json(text) if text else None

    async def save(self, key: SessionKey, state: AgentState) -> None:
        await asyncio.sleep(0)
        self.saves += 1
        self.data[key] = state.model_dump_json()


async def test_async_store_persists_state_across_calls_and_agents() -> None:
    store = JsonAsyncStore()
    model = ScriptedModel(["one", "two"])
    agent = ReActAgent(name="a", model=model, session_store=store)
    ctx = RuntimeContext(session_id="s1", user_id="bob")
    assert (await agent.acall("first", ctx)).text == "one"
    assert store.saves == 1
    key = SessionKey("bob", "s1")
    assert [m.text for m in AgentState.model_validate_json(store.data[key]).context] == [
        "first", "one"]
    # A new agent object over the same store continues the session from JSON.
    agent2 = ReActAgent(name="a", model=model, session_store=store)
    await agent2.acall("second", RuntimeContext(session_id="s1", user_id="bob"))
    texts = [m.text for m in AgentState.model_validate_json(store.data[key]).context]
    assert texts == ["first", "one", "second", "two"]
    assert len(model.calls[1].messages) == 3  # the restored history reached the model


def test_anonymous_and_named_users_have_separate_slots() -> None:
    store = InMemorySessionStore()
    agent = ReActAgent(name="a", model=ScriptedModel(["x", "y"]), session_store=store)
    agent.call_sync("hi", RuntimeContext(session_id="s"))
    agent.call_sync("hi", RuntimeContext(session_id="s", user_id="u"))
    assert sorted(store.keys()) == [SessionKey("__anon__", "s"), SessionKey("u", "s")]


def test_todays_runtime_persists_through_a_durable_store(durable: object) -> None:
    # The run calls load/save (synchronous here) until it adopts the versioned API.
    model = ScriptedModel(["one", "two"])
    ctx = RuntimeContext(session_id="s1", user_id="bob")
    ReActAgent(name="a", model=model, session_store=durable).call_sync("first", ctx)
    again = ReActAgent(name="a", model=model, session_store=durable)
    assert again.call_sync("second", RuntimeContext(session_id="s1", user_id="bob")).text == "two"
    key = SessionKey("bob", "s1")
    stored = durable.load(key)  # type: ignore[attr-defined]
    assert [m.text for m in stored.context] == ["first", "one", "second", "two"]
    assert durable.load_versioned(key)[1] == 2  # type: ignore[attr-defined]
