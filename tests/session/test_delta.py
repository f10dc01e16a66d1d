"""Saving writes what changed: appended messages, a rewrite from the first changed one,
in-place edits near the end, and edits marked with ``mark_changed``."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from rx_agent import GenerateReason, Msg, ToolUseBlock
from rx_agent.session import SqliteSessionStore, mark_changed
from rx_agent.session._delta import compute_delta, snapshot_of, take_marks

from .conftest import KEY, round_msgs, state_with, stored_count, texts


class Writes:
    """Counts what a durable store wrote: SQLite row changes, Redis trims and deletes."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.before = self._now()

    def _now(self) -> tuple[int, int]:
        if isinstance(self.store, SqliteSessionStore):
            return self.store._conn().total_changes, 0
        client, _ = self.store._client()
        stats = client.info("commandstats")
        return (stats.get("cmdstat_ltrim", {}).get("calls", 0),
                stats.get("cmdstat_del", {}).get("calls", 0))

    def delta(self) -> tuple[int, int]:
        now = self._now()
        return now[0] - self.before[0], now[1] - self.before[1]


def _reload(store: Any) -> Any:
    state, version = store.load_versioned(KEY)
    assert state is not None
    return state, version


def test_a_round_appends_only_its_messages(durable: Any) -> None:
    durable.save(KEY, state_with(250))  # 1,000 messages
    state, version = _reload(durable)
    assert stored_count(durable, KEY) == 1000
    state.context.extend(round_msgs(250))
    writes = Writes(durable)
    durable.save_if_version(KEY, state, version)
    assert stored_count(durable, KEY) == 1004
    if isinstance(durable, SqliteSessionStore):
        assert writes.delta()[0] == 4 + 1  # four message rows and the head row
    else:
        assert writes.delta() == (0, 0)  # nothing trimmed, nothing deleted: pushed only
    assert texts(durable.load(KEY)) == texts(state)


def test_appends_also_from_a_fresh_store_object(durable: Any, tmp_path: Any) -> None:
    # A store object that never loaded the session learns what is stored, then appends.
    durable.save(KEY, state_with(10))
    state = durable.load(KEY)
    other = (SqliteSessionStore(durable.path) if isinstance(durable, SqliteSessionStore)
             else type(durable)(durable.url, durable.prefix))
    try:
        state.context.extend(round_msgs(10))
        writes = Writes(durable)
        other.save(KEY, state)
        if isinstance(durable, SqliteSessionStore):
            assert other._conn().total_changes == 5
        else:
            assert writes.delta() == (0, 0)
        assert texts(durable.load(KEY)) == texts(state)
    finally:
        other.close()


def test_a_replaced_context_is_rewritten_from_the_first_difference(durable: Any) -> None:
    durable.save(KEY, state_with(5))
    state, version = _reload(durable)
    # A compaction: keep the first round, replace the rest with a summary.
    state.context[4:] = [Msg("assistant", "summary of rounds 1-4")]
    writes = Writes(durable)
    version = durable.save_if_version(KEY, state, version)
    assert stored_count(durable, KEY) == 5
    assert texts(durable.load(KEY)) == texts(state)
    if isinstance(durable, SqliteSessionStore):
        assert writes.delta()[0] == 16 + 1 + 1  # 16 rows deleted, 1 inserted, the head
    else:
        assert writes.delta()[0] == 1  # trimmed once, then pushed
    # A context that shrank to nothing, then grew again.
    state.context.clear()
    version = durable.save_if_version(KEY, state, version)
    assert stored_count(durable, KEY) == 0 and durable.load(KEY).context == []
    state.context.extend(round_msgs(1))
    durable.save_if_version(KEY, state, version)
    assert texts(durable.load(KEY)) == texts(state)


def test_an_inserted_message_rewrites_from_its_position(durable: Any) -> None:
    durable.save(KEY, state_with(3))
    state, version = _reload(durable)
    state.context.insert(2, Msg("user", "inserted"))
    durable.save_if_version(KEY, state, version)
    assert texts(durable.load(KEY)) == texts(state)
    assert stored_count(durable, KEY) == 13


def test_in_place_edits_of_the_latest_messages_are_saved(durable: Any) -> None:
    state = state_with(3)
    call = ToolUseBlock("c1", "rm", {"path": "/tmp/a"})
    state.context.append(Msg("assistant", [call]))
    for i in range(6):  # a wide tool batch after the assistant message
        state.context.append(Msg("tool", f"result {i}"))
    version = durable.save_if_version(KEY, state, 0)
    state, version = _reload(durable)
    # The runtime edits the latest assistant message's arguments (HITL) ...
    edited = state.context[12].content[0]
    assert isinstance(edited, ToolUseBlock)
    edited.input["path"] = "/tmp/b"
    # ... and sets generate_reason on a message it appended.
    state.context[-1].generate_reason = GenerateReason.MODEL_STOP
    durable.save_if_version(KEY, state, version)
    again = durable.load(KEY)
    block = again.context[12].content[0]
    assert isinstance(block, ToolUseBlock) and block.input == {"path": "/tmp/b"}
    assert again.context[-1].generate_reason == GenerateReason.MODEL_STOP


def test_an_old_in_place_edit_needs_mark_changed(durable: Any) -> None:
    durable.save(KEY, state_with(10))
    state, version = _reload(durable)
    state.context[1].content = [ToolUseBlock("fixed", "lookup", {"q": "edited"})]
    version = durable.save_if_version(KEY, state, version)
    # Too old for the tail check: the documented hazard ...
    assert durable.load(KEY).context[1].content[0].id == "call-0"
    # ... that mark_changed covers.
    mark_changed(state, state.context[1])
    durable.save_if_version(KEY, state, version)
    assert durable.load(KEY).context[1].content[0].id == "fixed"
    assert take_marks(state) == frozenset()  # consumed by the save


def test_marks_survive_a_failed_save(durable: Any) -> None:
    durable.save(KEY, state_with(10))
    state, version = _reload(durable)
    durable.save(KEY, state)  # someone else saved: version is stale now
    state.context[0].content = [ToolUseBlock("x", "lookup", {})]
    mark_changed(state, state.context[0].id)
    with pytest.raises(Exception, match="modified concurrently"):
        durable.save_if_version(KEY, state, version)
    durable.save_if_version(KEY, state, version + 1)
    assert durable.load(KEY).context[0].content[0].id == "x"


def test_mark_changed_refuses_what_is_not_a_message() -> None:
    with pytest.raises(TypeError, match="AgentState"):
        mark_changed({}, "id")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Msg objects or message ids"):
        mark_changed(state_with(1), 3)  # type: ignore[arg-type]


def test_marks_are_forgotten_with_their_state() -> None:
    from rx_agent.session import _delta

    state = state_with(1)
    mark_changed(state, state.context[0])
    ident = id(state)
    assert ident in _delta._marks
    del state
    gc.collect()
    assert ident not in _delta._marks


def test_delta_unit_cases() -> None:
    ctx = [m for i in range(3) for m in round_msgs(i)]
    bodies = [m.model_dump_json() for m in ctx]
    snap = snapshot_of(1, [m.id for m in ctx], bodies, [m.role for m in ctx], ctx)
    # Unchanged: nothing to write.
    same = compute_delta(snap, list(ctx), frozenset())
    assert (same.start, same.bodies) == (12, [])
    # Equal copies (a reload) are not rewritten either: ids and content match.
    copies = [Msg.model_validate_json(b) for b in bodies]
    assert compute_delta(snap, copies, frozenset()).start == 12
    # Truncated: rewrite from the cut, nothing to add.
    cut = compute_delta(snap, ctx[:5], frozenset())
    assert (cut.start, cut.bodies) == (5, [])
    # Unknown stored state: everything.
    assert compute_delta(None, ctx, frozenset()).start == 0
    # The snapshot of what the delta wrote matches a snapshot made from rows.
    extended = [*ctx, *round_msgs(3)]
    delta = compute_delta(snap, extended, frozenset())
    fresh = snapshot_of(2, [m.id for m in extended],
                        [m.model_dump_json() for m in extended], [m.role for m in extended],
                        extended)
    assert delta.snapshot(2) == fresh


def test_the_cache_lets_go_of_messages_of_dead_states(sqlite_store: SqliteSessionStore) -> None:
    state = state_with(2)
    sqlite_store.save(KEY, state)
    assert sqlite_store._cache.get(KEY).objs is not None
    del state
    gc.collect()
    snap = sqlite_store._cache.get(KEY)
    assert snap is not None and snap.objs is None and len(snap.ids) == 8
