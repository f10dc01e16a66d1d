"""Conflict policies beyond the store contract (``tests/session/test_contract.py``, where
every store runs FAIL, APPEND_MERGE and OVERWRITE): ``merge_append`` is a pure function,
and the names are Java's."""

from __future__ import annotations

import pytest

from rx_agent import Msg, PermissionRule
from rx_agent.session import (
    ConflictPolicy,
    merge_append,
)

from .conftest import state_with, texts


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
