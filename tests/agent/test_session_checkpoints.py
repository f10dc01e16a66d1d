"""The run on a durable store: checkpoints, fencing, busy sessions, recovery, settings
(issue #12, items 3-5; the cross-process cases are in test_durable_sessions.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import reactivex.operators as ops
from conftest import assert_no_orphan_tool_calls, make_agent

from rx_agent import (
    ConcurrentSessionModificationError,
    ConflictPolicy,
    InMemorySessionStore,
    Msg,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    SessionBusyError,
    SessionRecoveredEvent,
    SqliteSessionStore,
    Toolkit,
    ToolResultState,
    ToolUseBlock,
    tool,
)
from rx_agent.session import SessionKey

KEY = SessionKey("__anon__", "s")


def _toolkit(on_run: Any = None) -> Toolkit:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        if on_run is not None:
            on_run()
        return a + b

    toolkit = Toolkit()
    toolkit.register_tool(add)
    return toolkit


def _agent(store: Any, script: list[Any], **kwargs: Any) -> ReActAgent:
    return make_agent(ScriptedModel(script), toolkit=kwargs.pop("toolkit", _toolkit()),
                      session_store=store, **kwargs)


@pytest.fixture
def store(tmp_path: Path) -> SqliteSessionStore:
    return SqliteSessionStore(tmp_path / "sessions.db")


def test_a_tool_round_is_saved_at_each_step(store: SqliteSessionStore) -> None:
    versions: list[int] = []
    toolkit = _toolkit(on_run=lambda: versions.append(store.load_versioned(KEY)[1]))
    agent = _agent(store, [[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "three"],
                   toolkit=toolkit)
    msg = agent.call_sync("go", RuntimeContext(session_id="s"))
    assert msg.text == "three"
    # The tool call was stored before the tool ran; then its result; then the end.
    assert versions == [1]
    state, version = store.load_versioned(KEY)
    assert version == 3
    assert state is not None
    assert [m.role.value for m in state.context] == ["user", "assistant", "tool", "assistant"]


def test_the_in_memory_store_keeps_the_fast_path() -> None:
    agent = _agent(InMemorySessionStore(), ["hi"])
    assert agent.config.durable is False
    assert agent.call_sync("go").text == "hi"


def test_a_newer_writer_fences_the_call_under_fail(store: SqliteSessionStore) -> None:
    def meddle() -> None:  # another writer saves while the tool runs
        state, version = store.load_versioned(KEY)
        assert state is not None
        state.context.append(Msg("user", "from elsewhere"))
        store.save_if_version(KEY, state, version)

    agent = _agent(store, [[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "three"],
                   toolkit=_toolkit(on_run=meddle))
    with pytest.raises(ConcurrentSessionModificationError) as info:
        agent.call_sync("go", RuntimeContext(session_id="s"))
    assert info.value.session_id == "s"
    state, _version = store.load_versioned(KEY)
    assert state is not None
    # Nothing of the fenced call after the newer write: the other writer's message is last.
    assert state.context[-1].text == "from elsewhere"
    # The session is not left locked: the next call proceeds.
    assert _agent(store, ["fine"]).call_sync("again", RuntimeContext(session_id="s")).text \
        == "fine"


def test_append_merge_keeps_both_writers(store: SqliteSessionStore) -> None:
    def meddle() -> None:
        state, version = store.load_versioned(KEY)
        assert state is not None
        state.context.append(Msg("user", "from elsewhere"))
        store.save_if_version(KEY, state, version)

    agent = _agent(store, [[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "three"],
                   toolkit=_toolkit(on_run=meddle), conflict_policy=ConflictPolicy.APPEND_MERGE)
    assert agent.call_sync("go", RuntimeContext(session_id="s")).text == "three"
    state, _ = store.load_versioned(KEY)
    assert state is not None
    texts = [m.text for m in state.context]
    assert "from elsewhere" in texts
    assert texts[-1] == "three"
    assert_no_orphan_tool_calls(state.context)


def test_a_busy_session_fails_after_session_wait(store: SqliteSessionStore) -> None:
    lease = store.acquire_lease(KEY, "another-worker", ttl=30, wait=0)
    try:
        agent = _agent(store, ["never"], session_wait=0.3)
        start = time.perf_counter()
        with pytest.raises(SessionBusyError) as info:
            agent.call_sync("go", RuntimeContext(session_id="s"))
        assert time.perf_counter() - start >= 0.3
        assert info.value.session_id == "s"
    finally:
        store.release_lease(lease)
    assert _agent(store, ["now"]).call_sync("go", RuntimeContext(session_id="s")).text == "now"


def test_an_expired_lease_lets_the_next_call_in(store: SqliteSessionStore) -> None:
    store.acquire_lease(KEY, "crashed-worker", ttl=0.3, wait=0)  # never released
    agent = _agent(store, ["after the crash"], session_wait=5)
    assert agent.call_sync("go", RuntimeContext(session_id="s")).text == "after the crash"


def test_a_state_left_mid_acting_is_repaired_with_an_event(store: SqliteSessionStore) -> None:
    first = _agent(store, ["hello"])
    first.call_sync("hi", RuntimeContext(session_id="s"))
    state, version = store.load_versioned(KEY)
    assert state is not None
    state.context.append(Msg("assistant", [ToolUseBlock("dead", "add", {"a": 1, "b": 1})]))
    store.save_if_version(KEY, state, version)  # what a killed worker leaves behind

    agent = _agent(store, ["recovered"])
    events = agent.stream("again", RuntimeContext(session_id="s")).pipe(ops.to_list()).run()
    assert [e.type for e in events[:2]] == ["agent_start", "session_recovered"]
    recovered = events[1]
    assert isinstance(recovered, SessionRecoveredEvent)
    assert recovered.tool_call_ids == ["dead"]
    state, _ = store.load_versioned(KEY)
    assert state is not None
    assert_no_orphan_tool_calls(state.context)
    result = next(b for m in state.context for b in m.tool_results if b.id == "dead")
    assert result.state is ToolResultState.INTERRUPTED


def test_the_lease_is_renewed_while_a_long_call_runs(store: SqliteSessionStore) -> None:
    started = threading.Event()

    @tool
    async def slow() -> str:
        """Longer than the lease's ttl."""
        started.set()
        await asyncio.sleep(1.2)
        return "done"

    toolkit = Toolkit()
    toolkit.register_tool(slow)
    agent = _agent(store, [[ToolUseBlock("c1", "slow", {})], "end"], toolkit=toolkit,
                   session_lease_ttl=0.5)
    box: list[Any] = []
    thread = threading.Thread(
        target=lambda: box.append(agent.call_sync("go", RuntimeContext(session_id="s"))))
    thread.start()
    assert started.wait(3)
    time.sleep(0.7)  # past one ttl: only renewal keeps another owner out
    with pytest.raises(SessionBusyError):
        store.acquire_lease(KEY, "intruder", ttl=1, wait=0)
    thread.join(5)
    assert box and box[0].text == "end"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"session_wait": -1}, ValueError),
        ({"session_wait": "5"}, TypeError),
        ({"session_lease_ttl": 0}, ValueError),
        ({"conflict_policy": "sometimes"}, ValueError),
    ],
)
def test_bad_session_settings_fail_at_construction(kwargs: dict[str, Any],
                                                   error: type[Exception]) -> None:
    with pytest.raises(error):
        make_agent(ScriptedModel(["x"]), **kwargs)


def test_the_builder_takes_the_session_settings(store: SqliteSessionStore) -> None:
    agent = (ReActAgent.builder().name("a").model(ScriptedModel(["x"])).session_store(store)
             .session_wait(2).session_lease_ttl(5).conflict_policy("append_merge").build())
    config = agent.config
    assert (config.session_wait, config.session_lease_ttl) == (2.0, 5.0)
    assert config.conflict_policy is ConflictPolicy.APPEND_MERGE
    assert config.durable is True
    with pytest.raises(ValueError, match="session_lease_ttl"):
        ReActAgent.builder().session_lease_ttl(-3)
