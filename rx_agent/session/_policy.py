"""A compare-and-set save that resolves a conflict by a :class:`ConflictPolicy`.

The runtime's checkpoint is::

    outcome = await asave_with_policy(store, key, state, version, policy, base_len)
    version, base_len = outcome.version, outcome.base_len
    if outcome.state is not state:  # APPEND_MERGE merged: continue from the merge
        ...adopt outcome.state's fields into the call's live state...

``base_len`` is the context length the writer loaded (this call's messages start
there); after a merge it becomes the merged context's position where this writer's
messages start, so a later conflict in the same call merges only what is new.
"""

from __future__ import annotations

from typing import NamedTuple

from ..context import AgentState
from ._base import (
    AsyncSessionStore,
    ConcurrentSessionModificationError,
    ConflictPolicy,
    SessionKey,
    VersionedSessionStore,
    merge_append,
)

__all__ = ["SaveOutcome", "asave_with_policy", "save_with_policy"]

ATTEMPTS = 8
"""Conflicts tolerated in a row before OVERWRITE / APPEND_MERGE give up and raise."""


class SaveOutcome(NamedTuple):
    state: AgentState
    """What was stored: ``state`` itself, or the merge (APPEND_MERGE)."""
    version: int
    base_len: int
    """Where this writer's messages start in ``state.context``."""


def _policy(policy: ConflictPolicy | str) -> ConflictPolicy:
    try:
        return ConflictPolicy(policy.upper() if isinstance(policy, str) else policy)
    except ValueError:
        names = ", ".join(p.value for p in ConflictPolicy)
        raise ValueError(f"unknown conflict policy {policy!r} (one of {names})") from None


def _resolve(
    policy: ConflictPolicy,
    conflict: ConcurrentSessionModificationError,
    newer: AgentState | None,
    state: AgentState,
    base_len: int,
) -> tuple[AgentState, int]:
    """The state to try next and its base_len, or re-raise ``conflict``."""
    if policy is ConflictPolicy.FAIL:
        raise conflict
    if policy is ConflictPolicy.OVERWRITE:
        return state, base_len
    if newer is None:  # deleted meanwhile: a merge would revive a fragment
        raise conflict
    return merge_append(newer, base_len, state), len(newer.context)


def save_with_policy(
    store: VersionedSessionStore,
    key: SessionKey,
    state: AgentState,
    expected_version: int,
    policy: ConflictPolicy | str = ConflictPolicy.FAIL,
    base_len: int = 0,
) -> SaveOutcome:
    """``store.save_if_version``, resolving conflicts by ``policy`` (blocking)."""
    rule = _policy(policy)
    mine, start, expected = state, base_len, expected_version
    for _ in range(ATTEMPTS):
        try:
            return SaveOutcome(mine, store.save_if_version(key, mine, expected), start)
        except ConcurrentSessionModificationError as conflict:
            newer, expected = (store.load_versioned(key) if rule is ConflictPolicy.APPEND_MERGE
                               else (None, conflict.actual_version))
            mine, start = _resolve(rule, conflict, newer, state, base_len)
            last = conflict
    raise last


async def asave_with_policy(
    store: AsyncSessionStore,
    key: SessionKey,
    state: AgentState,
    expected_version: int,
    policy: ConflictPolicy | str = ConflictPolicy.FAIL,
    base_len: int = 0,
) -> SaveOutcome:
    """``store.asave_if_version``, resolving conflicts by ``policy``."""
    rule = _policy(policy)
    mine, start, expected = state, base_len, expected_version
    for _ in range(ATTEMPTS):
        try:
            return SaveOutcome(mine, await store.asave_if_version(key, mine, expected), start)
        except ConcurrentSessionModificationError as conflict:
            if rule is ConflictPolicy.APPEND_MERGE:
                newer, expected = await store.aload_versioned(key)
            else:
                newer, expected = None, conflict.actual_version
            mine, start = _resolve(rule, conflict, newer, state, base_len)
            last = conflict
    raise last
