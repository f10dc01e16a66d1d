"""One error policy for a failed final save, whatever the store: the caller gets the
store's error after ``on_agent_finish``, and the session's slot is free again."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from conftest import make_agent

from rx_agent import (
    AgentState,
    ExtensionPoint,
    InMemorySessionStore,
    MiddlewareBase,
    RuntimeContext,
    ScriptedModel,
    SessionKey,
)
from rx_agent.agent._binding import SessionBinding
from rx_agent.agent._slots import SessionSlots


class DiskFull(OSError):
    pass


class PlainStore:
    """``load`` / ``save`` only (the minimal protocol); saving fails while ``broken``."""

    def __init__(self) -> None:
        self.states: dict[SessionKey, AgentState] = {}
        self.broken = True

    def load(self, key: SessionKey) -> AgentState | None:
        return self.states.get(key)

    def save(self, key: SessionKey, state: AgentState) -> None:
        if self.broken:
            raise DiskFull("disk full")
        self.states[key] = state


class AsyncPlainStore(PlainStore):
    async def load(self, key: SessionKey) -> AgentState | None:  # type: ignore[override]
        await asyncio.sleep(0)
        return self.states.get(key)

    async def save(self, key: SessionKey, state: AgentState) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        super().save(key, state)


class InlineStore(InMemorySessionStore):
    """The in-memory store (finishing without a task) whose save fails while ``broken``."""

    answers_inline = True  # declared again: this save answers at once too
    broken = True

    def save(self, key: SessionKey, state: AgentState) -> None:
        if self.broken:
            raise DiskFull("disk full")
        super().save(key, state)


class FinishLog(MiddlewareBase):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_AGENT_FINISH}

    def on_agent_finish(self, agent: Any, ctx: Any, outcome: Any) -> None:
        self.log.append("finish: " + ("ok" if outcome.error is None else "error"))


@pytest.mark.parametrize("kind", ["plain", "async", "inline"])
@pytest.mark.parametrize("hooks", [False, True])
def test_a_failed_save_reaches_the_caller_and_frees_the_slot(kind: str, hooks: bool) -> None:
    store: Any = {"plain": PlainStore, "async": AsyncPlainStore, "inline": InlineStore}[kind]()
    log: list[str] = []
    model = ScriptedModel(["one", "two"])
    agent = make_agent(model, session_store=store,
                       middlewares=[FinishLog(log)] if hooks else [])
    ctx = RuntimeContext(session_id="s", user_id="u")
    with pytest.raises(DiskFull, match="disk full"):
        agent.call_sync("first", ctx)
    if hooks:
        assert log == ["finish: ok"]  # the hooks ran first, on the call's own outcome
    store.broken = False
    # The slot is free: the next call runs at once, on a session that was never saved.
    assert agent.call_sync("second", RuntimeContext(session_id="s", user_id="u")).text == "two"
    assert [m.text for m in model.calls[1].messages] == ["second"]
    key = SessionKey("u", "s")
    saved = store.states[key] if isinstance(store, PlainStore) else store.load(key)
    assert [m.text for m in saved.context] == ["second", "two"]


def test_the_inline_fast_path_is_the_one_taken() -> None:
    # The failure above goes through release_now (no task) for the inline store.
    slots = SessionSlots()
    assert SessionBinding(slots, InlineStore(), SessionKey("u", "s"), object()).sync
    assert SessionBinding(slots, InMemorySessionStore(), SessionKey("u", "s"), object()).sync
    assert not SessionBinding(slots, PlainStore(), SessionKey("u", "s"), object()).sync


async def test_async_callers_get_the_error_too() -> None:
    agent = make_agent(ScriptedModel(["one"]), session_store=AsyncPlainStore())
    with pytest.raises(DiskFull):
        await agent.acall("first", RuntimeContext(session_id="s"))


def test_the_calls_own_error_wins_and_the_save_failure_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class ModelDown(RuntimeError):
        pass

    agent = make_agent(ScriptedModel([ModelDown("model down")]), session_store=PlainStore(),
                       max_retries=1)
    with caplog.at_level(logging.ERROR, logger="rx_agent"), pytest.raises(ModelDown):
        agent.call_sync("first", RuntimeContext(session_id="s"))
    dropped = [r for r in caplog.records if "not saved after the call failed" in r.message]
    assert len(dropped) == 1 and isinstance(dropped[0].exc_info[1], DiskFull)  # type: ignore[index]


async def test_a_disposed_calls_save_failure_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    agent = make_agent(ScriptedModel(["slow"], delay=5), session_store=PlainStore())
    started = asyncio.Event()
    with caplog.at_level(logging.ERROR, logger="rx_agent"):
        sub = agent.stream("hi", RuntimeContext(session_id="s")).subscribe(
            lambda e: started.set())
        await asyncio.wait_for(started.wait(), 5)
        sub.dispose()
        for _ in range(100):
            if any("disposed call was not saved" in r.message for r in caplog.records):
                break
            await asyncio.sleep(0.01)
    assert any("disposed call was not saved" in r.message for r in caplog.records)
