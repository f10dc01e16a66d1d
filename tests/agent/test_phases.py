"""A call's ``Phase`` moves through one transition function, ``Phase.to``, which
refuses a move the lifecycle does not have (issue #25, item 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rx_agent import (
    MiddlewareBase,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    SessionBusyError,
    SqliteSessionStore,
)
from rx_agent.agent._phase import Phase
from rx_agent.session import SessionKey

LEGAL = {
    ("NEW", "STARTED"), ("NEW", "DISPOSED"),
    ("STARTED", "READY"), ("STARTED", "REFUSED"), ("STARTED", "FINISHING"),
    ("STARTED", "DISPOSED"),
    ("READY", "FINISHING"), ("READY", "DISPOSED"),
    ("REFUSED", "FINISHING"), ("REFUSED", "DISPOSED"),
    ("FINISHING", "DONE"), ("FINISHING", "DISPOSED"),
    ("DONE", "DISPOSED"),
}


@pytest.mark.parametrize("start", list(Phase), ids=lambda p: p.name)
@pytest.mark.parametrize("end", list(Phase), ids=lambda p: p.name)
def test_every_move_is_legal_or_refused_by_name(start: Phase, end: Phase) -> None:
    if (start.name, end.name) in LEGAL:
        assert start.to(end) is end
        return
    with pytest.raises(RuntimeError) as info:
        start.to(end)
    assert str(info.value) == f"a call cannot move from phase {start.name} to {end.name}"


def test_nothing_follows_disposed_and_nothing_goes_back() -> None:
    with pytest.raises(RuntimeError, match="from phase DISPOSED to REFUSED"):
        Phase.DISPOSED.to(Phase.REFUSED)
    with pytest.raises(RuntimeError, match="from phase DONE to STARTED"):
        Phase.DONE.to(Phase.STARTED)


@pytest.fixture
def moves(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    original = Phase.to

    def to(self: Phase, phase: Phase) -> Phase:
        seen.append((self.name, phase.name))
        return original(self, phase)

    monkeypatch.setattr(Phase, "to", to)
    return seen


async def test_a_call_walks_its_phases_through_the_transition_function(
    moves: list[tuple[str, str]],
) -> None:
    agent = ReActAgent(name="a", model=ScriptedModel(["hi"]))
    assert (await agent.acall("hello")).text == "hi"
    # A finished call is not disposed (nothing is left to dispose).
    assert moves == [("NEW", "STARTED"), ("STARTED", "READY"), ("READY", "FINISHING"),
                     ("FINISHING", "DONE")]


async def test_a_cancelled_acall_is_disposed(moves: list[tuple[str, str]]) -> None:
    import asyncio

    agent = ReActAgent(name="a", model=ScriptedModel(["slow"], delay=1.0))
    task = asyncio.ensure_future(agent.acall("hello"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert moves[-1] == ("READY", "DISPOSED")


def test_a_refused_call_walks_refused_then_finishing(moves: list[tuple[str, str]]) -> None:
    class Refuse(MiddlewareBase):
        def on_agent_state_ready(self, agent: Any, ctx: Any, state: Any, msgs: Any) -> None:
            raise ValueError("not today")

    agent = ReActAgent(name="a", model=ScriptedModel(["hi"]), middlewares=[Refuse()])
    with pytest.raises(ValueError, match="not today"):
        agent.call_sync("hello")
    assert moves == [("NEW", "STARTED"), ("STARTED", "REFUSED"), ("REFUSED", "FINISHING"),
                     ("FINISHING", "DONE")]


def test_a_busy_session_is_refused_before_the_pipeline(
    tmp_path: Path, moves: list[tuple[str, str]],
) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    lease = store.acquire_lease(SessionKey("__anon__", "s"), "elsewhere", ttl=30, wait=0)
    try:
        agent = ReActAgent(name="a", model=ScriptedModel(["hi"]), session_store=store,
                           session_wait=0)
        with pytest.raises(SessionBusyError):
            agent.call_sync("hello", RuntimeContext(session_id="s"))
    finally:
        store.release_lease(lease)
    assert moves[:2] == [("NEW", "STARTED"), ("STARTED", "REFUSED")]


async def test_a_call_disposed_while_it_waits_for_its_session_stays_disposed(
    moves: list[tuple[str, str]],
) -> None:
    import asyncio

    agent = ReActAgent(name="a", model=ScriptedModel(["first", "second"], delay=0.2))
    ctx = RuntimeContext(session_id="s")
    first = asyncio.ensure_future(agent.acall("one", ctx))
    await asyncio.sleep(0.05)  # the first call holds the session
    waiting = asyncio.ensure_future(agent.acall("two", ctx))
    await asyncio.sleep(0.05)  # the second waits for the slot
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert (await first).text == "first"
    await asyncio.sleep(0.05)
    # The cancelled bind does not make the disposed call "refused".
    assert ("DISPOSED", "REFUSED") not in moves
    assert moves.count(("STARTED", "DISPOSED")) == 1
