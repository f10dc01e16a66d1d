"""The store contract, part one: state, versions, compare-and-set, listing, the
coroutine twins, conflict policies and clear errors (see :mod:`.store_contract`)."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from ..context import AgentState, PendingToolCalls
from ..message import Msg, ToolResultBlock, ToolUseBlock
from ..permissions import PermissionRule
from ..session import (
    AsyncSessionStore,
    ConcurrentSessionModificationError,
    ConflictPolicy,
    SessionKey,
    SessionStore,
    VersionedSessionStore,
    asave_with_policy,
    save_with_policy,
)

__all__ = ["KEY", "Opened", "StateContract", "arun", "round_msgs", "state_with", "texts"]

T = TypeVar("T")
KEY = SessionKey("alice", "chat-1")


def round_msgs(i: int) -> list[Msg]:
    """One ReAct round: the question, a tool call, its result, the answer."""
    call = ToolUseBlock(f"call-{i}", "lookup", {"q": f"q{i}"})
    return [
        Msg("user", f"question {i}"),
        Msg("assistant", [call]),
        Msg("tool", [ToolResultBlock(f"call-{i}", "lookup", f"result {i}")]),
        Msg("assistant", f"answer {i}"),
    ]


def state_with(rounds: int, key: SessionKey = KEY) -> AgentState:
    msgs = [m for i in range(rounds) for m in round_msgs(i)]
    return AgentState(session_id=key.session_id, user_id=key.user_id, context=msgs)


def texts(state: AgentState | None) -> list[str]:
    assert state is not None
    return [m.text or ",".join(b.type for b in m.content) for m in state.context]


def arun(store: Any, body: Callable[[], Awaitable[T]]) -> T:
    """``body()`` on a fresh event loop, closing the store's resources of that loop after
    (the contract needs no async test plugin)."""
    async def main() -> T:
        try:
            return await body()
        finally:
            aclose = getattr(store, "aclose", None)
            if aclose is not None:
                await aclose()

    return asyncio.run(main())


def _diverged(store: Any) -> tuple[AgentState, int]:
    """A writer's state at a stale version, after another writer appended."""
    store.save(KEY, state_with(1))
    mine, version = store.load_versioned(KEY)
    theirs, _ = store.load_versioned(KEY)
    if mine is theirs:  # a store of live objects shares them: give each writer a copy
        mine = mine.model_copy(update={"context": list(mine.context)})
    theirs = theirs.model_copy(update={"context": [*theirs.context, Msg("user", "theirs")]})
    store.save(KEY, theirs)
    mine.context.append(Msg("user", "mine"))
    return mine, version


class Opened:
    """The ``opener`` a contract class must be given, and the ``store`` it opens per test."""

    @pytest.fixture
    def opener(self) -> Callable[[], Any]:
        raise NotImplementedError(
            f"{type(self).__name__} needs an `opener` fixture: a zero-argument callable "
            "that opens the store under test (picklable, e.g. functools.partial, for "
            "DurableStoreContract: it also opens the store in other processes)")

    @pytest.fixture
    def store(self, opener: Callable[[], Any]) -> Iterator[Any]:
        made = opener()
        yield made
        close = getattr(made, "close", None)
        if close is not None:
            close()


class StateContract(Opened):
    """What every store does with state (the base of :class:`StoreContract`)."""

    def test_implements_both_protocols(self, store: Any) -> None:
        assert isinstance(store, SessionStore)
        assert isinstance(store, VersionedSessionStore)
        assert isinstance(store, AsyncSessionStore)
        assert isinstance(getattr(store, "durable", True), bool)
        assert isinstance(getattr(store, "answers_inline", False), bool)

    def test_round_trip_keeps_every_field(self, store: Any) -> None:
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

    def test_versions_increase_by_one_per_save(self, store: Any) -> None:
        state = state_with(1)
        assert store.save_if_version(KEY, state, 0) == 1
        store.save(KEY, state)
        assert store.load_versioned(KEY)[1] == 2
        assert store.save_if_version(KEY, state, 2) == 3
        assert store.load_versioned(KEY)[1] == 3

    def test_a_stale_version_raises_and_writes_nothing(self, store: Any) -> None:
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
        assert pickle.loads(pickle.dumps(err)).__dict__ == err.__dict__

    def test_delete(self, store: Any) -> None:
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

    def test_list_sessions_per_user(self, store: Any) -> None:
        keys = [SessionKey("bob", "b2"), SessionKey("alice", "a1"), SessionKey("bob", "b1"),
                SessionKey("__anon__", "x"), SessionKey("we:ird%", "s:1"),
                SessionKey("a+b", "c/d .e")]
        for key in keys:
            store.save(key, state_with(1, key))
        assert store.list_sessions() == sorted(keys)
        assert store.list_sessions("bob") == [SessionKey("bob", "b1"), SessionKey("bob", "b2")]
        assert store.list_sessions("we:ird%") == [SessionKey("we:ird%", "s:1")]
        assert store.list_sessions("nobody") == []
        store.delete(SessionKey("bob", "b1"))
        assert store.list_sessions("bob") == [SessionKey("bob", "b2")]

    def test_keys_with_separators_do_not_collide(self, store: Any) -> None:
        a, b, c = SessionKey("a:b", "c"), SessionKey("a", "b:c"), SessionKey("a+b", "c")
        store.save(a, state_with(1, a))
        store.save(b, state_with(2, b))
        store.save(c, state_with(3, c))
        assert [len(store.load(k).context) for k in (a, b, c)] == [4, 8, 12]

    def test_the_coroutines_match_the_sync_api(self, store: Any) -> None:
        async def body() -> None:
            assert await store.aload(KEY) is None
            assert await store.aload_versioned(KEY) == (None, 0)
            state = state_with(1)
            assert await store.asave_if_version(KEY, state, 0) == 1
            loaded, version = await store.aload_versioned(KEY)
            assert version == 1 and texts(loaded) == texts(state)
            assert loaded is not None
            loaded = loaded.model_copy(update={"context": [*loaded.context, *round_msgs(7)]})
            await store.asave(KEY, loaded)
            with pytest.raises(ConcurrentSessionModificationError):
                await store.asave_if_version(KEY, state, 1)
            assert len((await store.aload(KEY)).context) == 8
            assert await store.alist_sessions() == [KEY]
            assert await store.alist_sessions("alice") == [KEY]
            assert await store.adelete(KEY) is True
            assert await store.aload(KEY) is None

        arun(store, body)

    def test_bad_input_is_refused_clearly(self, store: Any) -> None:
        with pytest.raises(TypeError, match="saves AgentState"):
            store.save(KEY, {"context": []})
        with pytest.raises(TypeError, match="SessionKey"):
            store.save_if_version("chat-1", state_with(1), 0)
        with pytest.raises(ValueError, match="session_id must not be empty"):
            store.save_if_version(SessionKey("u", ""), state_with(1), 0)
        with pytest.raises(TypeError, match="expected_version must be an int"):
            store.save_if_version(KEY, state_with(1), "0")
        with pytest.raises(TypeError, match="expected_version must be an int"):
            store.save_if_version(KEY, state_with(1), False)
        with pytest.raises(ValueError, match="expected_version must be >= 0"):
            store.save_if_version(KEY, state_with(1), -1)  # never "any version"
        with pytest.raises(TypeError, match="user_id must be a str"):
            store.list_sessions(7)
        with pytest.raises(ValueError, match="ttl"):
            store.acquire_lease(KEY, "me", 0, 0)
        with pytest.raises(ValueError, match="owner"):
            store.acquire_lease(KEY, "", 1, 0)
        with pytest.raises(ValueError, match="wait"):
            store.acquire_lease(KEY, "me", 1, -1)
        with pytest.raises(TypeError, match="expected the Lease"):
            store.release_lease("token")
        assert store.load(KEY) is None  # none of that wrote anything

    def test_the_version_peek_and_load_since(self, store: Any) -> None:
        assert store.version(KEY) == 0
        assert store.load_since(KEY, 0, 0).apply(None) is None
        first = state_with(1)
        store.save_if_version(KEY, first, 0)
        assert store.version(KEY) == 1
        mine = store.load(KEY)
        unchanged = store.load_since(KEY, 1, len(mine.context))
        assert (unchanged.version, unchanged.state) == (1, None)
        assert unchanged.apply(mine) is mine
        newer = state_with(2)
        store.save_if_version(KEY, newer, 1)
        changed = store.load_since(KEY, 1, len(mine.context))
        assert changed.version == 2 and store.version(KEY) == 2
        assert texts(changed.apply(mine)) == texts(newer)
        store.delete(KEY)
        gone = store.load_since(KEY, 2, 8)
        assert gone.version == 0 and gone.apply(mine) is None

        async def body() -> None:
            assert await store.aversion(KEY) == 0
            await store.asave(KEY, first)
            assert await store.aversion(KEY) == 1
            assert (await store.aload_since(KEY, 1, 4)).state is None
            assert texts((await store.aload_since(KEY, 0, 0)).apply(None)) == texts(first)

        arun(store, body)

    # -- conflict policies -----------------------------------------------------------

    def test_fail_raises_and_writes_nothing(self, store: Any) -> None:
        mine, version = _diverged(store)
        with pytest.raises(ConcurrentSessionModificationError):
            save_with_policy(store, KEY, mine, version, ConflictPolicy.FAIL, 4)
        assert texts(store.load(KEY))[-1] == "theirs"

    def test_append_merge_appends_after_the_newer_state(self, store: Any) -> None:
        mine, version = _diverged(store)
        outcome = save_with_policy(store, KEY, mine, version, "append_merge", 4)
        assert outcome.version == 3 and outcome.state is not mine
        assert texts(store.load(KEY))[-2:] == ["theirs", "mine"]
        assert outcome.base_len == 5  # this writer's messages start after "theirs"
        # A later checkpoint of the same call merges only what is new since.
        outcome.state.context.append(Msg("user", "mine 2"))
        again = save_with_policy(store, KEY, outcome.state, outcome.version,
                                 ConflictPolicy.APPEND_MERGE, outcome.base_len)
        assert texts(store.load(KEY))[-3:] == ["theirs", "mine", "mine 2"]
        assert again.version == 4

    def test_overwrite_is_last_writer_wins(self, store: Any) -> None:
        mine, version = _diverged(store)
        outcome = save_with_policy(store, KEY, mine, version, ConflictPolicy.OVERWRITE, 4)
        assert outcome.state is mine and outcome.version == 3
        assert texts(store.load(KEY))[-1] == "mine" and "theirs" not in texts(store.load(KEY))

    def test_append_merge_does_not_revive_a_deleted_session(self, store: Any) -> None:
        store.save(KEY, state_with(1))
        mine, version = store.load_versioned(KEY)
        store.delete(KEY)
        with pytest.raises(ConcurrentSessionModificationError):
            save_with_policy(store, KEY, mine, version, ConflictPolicy.APPEND_MERGE, 4)
        assert store.load(KEY) is None

    def test_the_async_policy_helper(self, store: Any) -> None:
        async def body() -> None:
            await store.asave(KEY, state_with(1))
            mine, version = await store.aload_versioned(KEY)
            mine = mine.model_copy(update={"context": list(mine.context)})
            theirs = mine.model_copy(update={"context": [*mine.context, Msg("user", "theirs")]})
            await store.asave(KEY, theirs)
            mine.context.append(Msg("user", "mine"))
            with pytest.raises(ConcurrentSessionModificationError):
                await asave_with_policy(store, KEY, mine, version)
            outcome = await asave_with_policy(store, KEY, mine, version,
                                              ConflictPolicy.APPEND_MERGE, 4)
            assert texts(await store.aload(KEY))[-2:] == ["theirs", "mine"]
            assert outcome.version == 3

        arun(store, body)

    def test_an_unknown_policy_is_refused(self, store: Any) -> None:
        with pytest.raises(ValueError, match=r"unknown conflict policy 'newest'.*APPEND_MERGE"):
            save_with_policy(store, KEY, state_with(1), 0, "newest")
