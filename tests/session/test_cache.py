"""The sessions a worker served (session/_cache.py): kept, checked, evicted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rx_agent import ReActAgent, RuntimeContext, ScriptedModel
from rx_agent.session import (
    ConcurrentSessionModificationError,
    SessionKey,
    SqliteSessionStore,
)
from rx_agent.session._cache import Served, SessionCache

from .conftest import KEY, round_msgs, state_with, texts

USER = "u"


def twin(store: Any) -> Any:
    """Another store object on the same sessions (as another process would open)."""
    if isinstance(store, SqliteSessionStore):
        return SqliteSessionStore(store.path)
    from rx_agent.session import RedisSessionStore

    return RedisSessionStore(store.url, prefix=store.prefix)


class Reads:
    """Counts the full loads a store makes (the spy wraps the real primitive)."""

    def __init__(self, store: Any) -> None:
        self.count = 0
        real = store._read

        def counted(key: SessionKey) -> Any:
            self.count += 1
            return real(key)

        store._read = counted


def served(**kw: Any) -> Served:
    return Served(state_with(kw.pop("rounds", 1)), kw.pop("version", 1), **kw)


# -- the cache itself ----------------------------------------------------------------------


def test_take_hands_over_the_entry() -> None:
    cache = SessionCache(100)
    entry = served()
    assert cache.keep("a", entry) is True and len(cache) == 1 and cache.messages == 4
    assert cache.take("a") is entry
    assert cache.take("a") is None and cache.messages == 0


def test_the_least_recently_served_go_first_when_over_the_budget() -> None:
    cache = SessionCache(10)  # messages: a state_with(1) holds 4
    cache.keep("a", served())
    cache.keep("b", served())
    assert cache.messages == 8
    cache.keep("c", served())  # 12 > 10: "a" goes
    assert cache.take("a") is None and cache.messages == 8
    assert cache.take("b") is not None and cache.take("c") is not None


def test_a_session_longer_than_the_budget_is_not_kept() -> None:
    cache = SessionCache(5)
    cache.keep("a", served())
    assert cache.keep("a", served(rounds=2)) is False  # 8 messages; the old entry goes too
    assert len(cache) == 0 and cache.messages == 0
    off = SessionCache(0)
    assert off.keep("a", served()) is False and off.take("a") is None


def test_keeping_again_replaces_the_entry_and_its_size() -> None:
    cache = SessionCache(100)
    cache.keep("a", served())
    cache.keep("a", served(rounds=3, version=2))
    assert cache.messages == 12
    entry = cache.take("a")
    assert entry is not None and entry.version == 2


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_a_bad_budget_is_refused(bad: Any, tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="cache_messages must be an int >= 0"):
        SessionCache(bad)
    with pytest.raises(ValueError, match="cache_messages must be an int >= 0"):
        SqliteSessionStore(tmp_path / "s.db", cache_messages=bad)


def test_the_budget_is_set_on_the_stores_constructor(tmp_path: Any) -> None:
    store = SqliteSessionStore(tmp_path / "s.db", cache_messages=7)
    try:
        assert store.session_cache.max_messages == 7
    finally:
        store.close()


# -- on a store --------------------------------------------------------------------------


def test_an_unchanged_session_is_served_from_the_cache(durable: Any) -> None:
    durable.save(KEY, state_with(2))

    async def main() -> None:
        first = await durable.acheckout(KEY)
        assert first.hit is False and first.state is not None and first.version == 1
        assert durable.keep(KEY, first.state, first.version) is True
        reads = Reads(durable)
        again = await durable.acheckout(KEY)
        assert again.hit is True and reads.count == 0  # one version read, nothing decoded
        assert again.state is not first.state  # the cache kept a copy
        assert texts(again.state) == texts(first.state) and again.version == 1

    asyncio.run(main())


def test_a_session_another_store_object_wrote_is_never_served_stale(durable: Any) -> None:
    other = twin(durable)
    try:
        durable.save(KEY, state_with(1))

        async def main() -> None:
            mine = await durable.acheckout(KEY)
            assert mine.state is not None
            durable.keep(KEY, mine.state, mine.version)
            newer, version = other.load_versioned(KEY)
            newer.context.extend(round_msgs(7))
            other.save_if_version(KEY, newer, version)
            got = await durable.acheckout(KEY)
            assert got.hit is False and got.version == 2
            assert texts(got.state) == texts(newer)
            durable.keep(KEY, got.state, got.version)
            other.delete(KEY)
            gone = await durable.acheckout(KEY)
            assert (gone.state, gone.version) == (None, 0)

        asyncio.run(main())
    finally:
        other.close()


def test_deleting_through_the_store_drops_its_entry(durable: Any) -> None:
    durable.save(KEY, state_with(1))
    state, version = durable.load_versioned(KEY)
    durable.keep(KEY, state, version)
    assert len(durable.session_cache) == 1
    assert durable.delete(KEY) is True
    assert len(durable.session_cache) == 0


def test_sessions_past_the_budget_are_loaded_again(tmp_path: Any) -> None:
    store = SqliteSessionStore(tmp_path / "s.db", cache_messages=6)
    a, b = SessionKey(USER, "a"), SessionKey(USER, "b")
    try:
        for key in (a, b):
            store.save(key, state_with(1))

        async def main() -> None:
            for key in (a, b):
                got = await store.acheckout(key)
                assert got.state is not None
                store.keep(key, got.state, got.version)
            reads = Reads(store)
            assert (await store.acheckout(b)).hit is True  # the most recent stayed
            assert (await store.acheckout(a)).hit is False and reads.count == 1

        asyncio.run(main())
    finally:
        store.close()


# -- through the agent -------------------------------------------------------------------


def ctx(session: str = "s") -> RuntimeContext:
    return RuntimeContext(session_id=session, user_id=USER)


def test_an_agent_decodes_a_session_once_while_nobody_else_writes(durable: Any) -> None:
    agent = ReActAgent(name="a", model=ScriptedModel(["r1", "r2", "r3"]),
                       session_store=durable)
    agent.call_sync("one", ctx())
    reads = Reads(durable)
    agent.call_sync("two", ctx())
    agent.call_sync("three", ctx())
    assert reads.count == 0
    stored = durable.load(SessionKey(USER, "s"))
    assert [m.text for m in stored.context] == ["one", "r1", "two", "r2", "three", "r3"]


def test_an_agent_sees_what_another_store_object_wrote_between_its_calls(
        durable: Any) -> None:
    model = ScriptedModel(["r1", "r2", "r3"])
    mine = ReActAgent(name="a", model=model, session_store=durable)
    other = twin(durable)
    try:
        mine.call_sync("one", ctx())
        ReActAgent(name="a", model=model, session_store=other).call_sync("two", ctx())
        mine.call_sync("three", ctx())
        seen = [m.text for m in model.calls[2].messages if m.role.value != "system"]
        assert seen == ["one", "r1", "two", "r2", "three"]
    finally:
        other.close()


def test_editing_the_state_a_call_exposed_does_not_reach_the_cache(durable: Any) -> None:
    model = ScriptedModel(["r1", "r2"])
    agent = ReActAgent(name="a", model=model, session_store=durable)
    first = ctx()
    agent.call_sync("one", first)
    assert first.agent_state is not None
    first.agent_state.context.clear()  # after the call: not what is stored
    first.agent_state.data["x"] = 1
    agent.call_sync("two", ctx())
    seen = [m.text for m in model.calls[1].messages if m.role.value != "system"]
    assert seen == ["one", "r1", "two"]
    assert durable.load(SessionKey(USER, "s")).data == {}


def test_a_call_whose_save_failed_leaves_nothing_cached(durable: Any) -> None:
    """A lease-less writer saves mid-call: the call is fenced, and the next call runs
    on what that writer stored, not on the fenced call's state."""
    other = twin(durable)
    key = SessionKey(USER, "s")
    try:
        from rx_agent import Toolkit, ToolUseBlock

        def meddle() -> str:
            """Writes the session from elsewhere."""
            state, _ = other.load_versioned(key)
            state.data["by"] = "elsewhere"
            other.save(key, state)
            return "done"

        model = ScriptedModel(["r1", [ToolUseBlock("c1", "meddle", {})], "r2", "r3"])
        agent = ReActAgent(name="a", model=model, session_store=durable,
                           toolkit=Toolkit([meddle]))
        agent.call_sync("one", ctx())
        with pytest.raises(ConcurrentSessionModificationError):
            agent.call_sync("two", ctx())
        assert durable.session_cache.take(key) is None
        agent.call_sync("three", ctx())
        stored = durable.load(key)
        assert stored.data == {"by": "elsewhere"}
        assert [m.text for m in stored.context][:2] == ["one", "r1"]
    finally:
        other.close()


class AppendAware(SqliteSessionStore):
    """A backend whose ``_read_since`` returns only the messages past the caller's
    copy when the stored ids still start with it (what a per-row version would tell)."""

    def _read_since(self, key: SessionKey, version: int, count: int) -> Any:
        from rx_agent.session import SessionChanges

        if version and self._peek_version(key) == version:
            return SessionChanges(version)
        state, now = self._read(key)
        if state is None or not count or len(state.context) < count:
            return SessionChanges(now, state)
        tail = state.model_copy(update={"context": state.context[count - 1:]})
        return SessionChanges(now, tail, count - 1)  # one back: a re-read message


def test_changes_past_the_cached_copy_are_applied_and_repaired(tmp_path: Any) -> None:
    """Another worker appended a tool call and stopped: the cached copy gets only the
    new messages (its own message objects kept, the closed prefix cut to where the
    changes start), and the repair, scanning past that prefix, answers the call."""
    from rx_agent import Msg, ToolUseBlock

    store = AppendAware(tmp_path / "s.db")
    other = SqliteSessionStore(tmp_path / "s.db")
    key = SessionKey(USER, "s")
    try:
        model = ScriptedModel(["r1", "r2"])
        agent = ReActAgent(name="a", model=model, session_store=store)
        agent.call_sync("one", ctx())
        state, version = other.load_versioned(key)
        state.context += [Msg("user", "two"), Msg("assistant", [ToolUseBlock("c9", "w", {})])]
        other.save_if_version(key, state, version)

        async def peek() -> None:  # what the next call will get, put back as it was
            entry = store.session_cache.take(key)
            assert entry is not None and entry.state is not None and entry.clean == 2
            cached = entry.state.context[0]
            store.session_cache.keep(key, entry)
            got = await store.acheckout(key)
            assert got.hit is False and got.clean == 1 and got.version == version + 1
            assert got.state is not None and got.state.context[0] is cached
            assert [m.text for m in got.state.context[:3]] == ["one", "r1", "two"]
            store.session_cache.keep(key, entry)

        asyncio.run(peek())
        agent.call_sync("three", ctx())
        stored = store.load(key)
        assert [r.id for r in stored.context[4].tool_results] == ["c9"]
        seen = [m.text for m in model.calls[1].messages if m.role.value == "user"]
        assert seen == ["one", "two", "three"]
    finally:
        store.close()
        other.close()


def test_a_call_that_rewrote_the_closed_prefix_has_it_scanned_again(durable: Any) -> None:
    """The closed prefix a kept session carries holds only while no save rewrote it:
    a call that put an open tool call deep in the history (a middleware's edit, say)
    has the next call answer it."""
    from rx_agent import Msg, ToolUseBlock
    from rx_agent.agent._durable import DurableHold
    from rx_agent.session import ConflictPolicy

    key = SessionKey(USER, "deep")
    durable.save(key, state_with(3))

    async def call(edit: Any) -> tuple[list[str], Any]:
        hold = DurableHold(durable, key, "run", ttl=10, wait=1, policy=ConflictPolicy.FAIL)
        state = await hold.acquire()
        assert state is not None
        recovered = hold.recover(state)
        edit(state)
        assert await hold.release(state) is None
        entry = durable.session_cache.take(key)
        assert entry is not None
        durable.session_cache.keep(key, entry)
        return recovered, entry

    async def main() -> None:
        recovered, entry = await call(lambda s: s.context.extend(round_msgs(9)))
        assert recovered == [] and entry.clean == 16  # all closed: to the end
        opened = Msg("assistant", [ToolUseBlock("deep-1", "w", {})])
        recovered, entry = await call(lambda s: s.context.insert(4, opened))
        assert recovered == [] and entry.clean == 4  # the open batch starts there
        recovered, entry = await call(lambda s: None)
        assert recovered == ["deep-1"] and entry.clean == 18
        stored = durable.load(key)
        assert [r.id for r in stored.context[5].tool_results] == ["deep-1"]

    asyncio.run(main())
