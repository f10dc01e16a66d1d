"""Conflict policies: FAIL writes nothing, APPEND_MERGE appends after the newer state,
OVERWRITE is last-writer-wins; ``merge_append`` is a pure function."""

from __future__ import annotations

from typing import Any

import pytest

from rx_agent import AgentState, Msg, PermissionRule
from rx_agent.session import (
    ConcurrentSessionModificationError,
    ConflictPolicy,
    asave_with_policy,
    merge_append,
    save_with_policy,
)

from .conftest import KEY, state_with, texts


def _diverged(store: Any) -> tuple[AgentState, int]:
    """A writer's state at a stale version, after another writer appended."""
    store.save(KEY, state_with(1))
    mine, version = store.load_versioned(KEY)
    theirs, _ = store.load_versioned(KEY)
    if mine is theirs:  # the in-memory store shares the object: give each a copy
        mine = mine.model_copy(update={"context": list(mine.context)})
    theirs = theirs.model_copy(update={"context": [*theirs.context, Msg("user", "theirs")]})
    store.save(KEY, theirs)
    mine.context.append(Msg("user", "mine"))
    return mine, version


def test_fail_raises_and_writes_nothing(store: Any) -> None:
    mine, version = _diverged(store)
    with pytest.raises(ConcurrentSessionModificationError):
        save_with_policy(store, KEY, mine, version, ConflictPolicy.FAIL, 4)
    assert texts(store.load(KEY))[-1] == "theirs"


def test_append_merge_appends_after_the_newer_state(store: Any) -> None:
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


def test_overwrite_is_last_writer_wins(store: Any) -> None:
    mine, version = _diverged(store)
    outcome = save_with_policy(store, KEY, mine, version, ConflictPolicy.OVERWRITE, 4)
    assert outcome.state is mine and outcome.version == 3
    assert texts(store.load(KEY))[-1] == "mine" and "theirs" not in texts(store.load(KEY))


def test_append_merge_does_not_revive_a_deleted_session(store: Any) -> None:
    store.save(KEY, state_with(1))
    mine, version = store.load_versioned(KEY)
    store.delete(KEY)
    with pytest.raises(ConcurrentSessionModificationError):
        save_with_policy(store, KEY, mine, version, ConflictPolicy.APPEND_MERGE, 4)
    assert store.load(KEY) is None


async def test_the_async_helper(astore: Any) -> None:
    await astore.asave(KEY, state_with(1))
    mine, version = await astore.aload_versioned(KEY)
    mine = mine.model_copy(update={"context": list(mine.context)})
    theirs = mine.model_copy(update={"context": [*mine.context, Msg("user", "theirs")]})
    await astore.asave(KEY, theirs)
    mine.context.append(Msg("user", "mine"))
    with pytest.raises(ConcurrentSessionModificationError):
        await asave_with_policy(astore, KEY, mine, version)
    outcome = await asave_with_policy(astore, KEY, mine, version, ConflictPolicy.APPEND_MERGE, 4)
    assert texts(await astore.aload(KEY))[-2:] == ["theirs", "mine"]
    assert outcome.version == 3


def test_an_unknown_policy_is_refused(store: Any) -> None:
    with pytest.raises(ValueError, match=r"unknown conflict policy 'newest'.*APPEND_MERGE"):
        save_with_policy(store, KEY, state_with(1), 0, "newest")


def test_merge_append_is_pure_and_skips_what_newer_holds() -> None:
    base = state_with(1)
    checkpointed = Msg("assistant", "saved by my earlier checkpoint")
    newer = base.model_copy(update={
        "context": [*base.context, checkpointed, Msg("user", "other writer")],
        "data": {"shared": "newer", "theirs": 1},
        "permission_rules": [PermissionRule("a", "allow")]})
    mine = base.model_copy(update={
        "context": [*base.context, checkpointed, Msg("user", "mine")],
        "data": {"shared": "mine", "mine": 2},
        "permission_rules": [PermissionRule("a", "allow"), PermissionRule("b", "deny")]})
    before = (newer.model_dump(), mine.model_dump())
    merged = merge_append(newer, 4, mine)
    assert texts(merged)[-3:] == ["saved by my earlier checkpoint", "other writer", "mine"]
    assert merged.data == {"shared": "newer", "theirs": 1, "mine": 2}
    assert [r.pattern for r in merged.permission_rules] == ["a", "b"]
    assert (newer.model_dump(), mine.model_dump()) == before
    with pytest.raises(ValueError, match="base_len"):
        merge_append(newer, -1, mine)


def test_conflict_policy_names_match_java() -> None:
    assert [p.name for p in ConflictPolicy] == ["OVERWRITE", "FAIL", "APPEND_MERGE"]
    assert ConflictPolicy("FAIL") is ConflictPolicy.FAIL
