"""The tool journal of ``@tool(side_effect=True)`` calls in durable sessions (issue #27,
item 4): what it holds, when it is saved, and what recovery does with it.

The store is a real SQLite file; the tools read it themselves, so "saved before the
tool runs" is checked from where it matters: inside the tool. Crashes of real worker
processes are in ``test_durable_sessions.py``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import make_agent, of_type, tool_results

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    Msg,
    Role,
    RuntimeContext,
    ScriptedModel,
    SessionRecoveredEvent,
    Toolkit,
    ToolResultBlock,
    ToolResultEndEvent,
    ToolResultState,
    ToolUseBlock,
    tool,
)
from rx_agent.agent._batch_flags import CUT_TEXT
from rx_agent.agent._durable import RECOVERED_TEXT
from rx_agent.agent._journal import JOURNAL_KEY, MAY_HAVE_RUN_TEXT, recover_journaled
from rx_agent.context import AgentState
from rx_agent.session import InMemorySessionStore, SessionKey, SqliteSessionStore
from rx_agent.testing import assert_no_orphan_tool_calls
from rx_agent.tool import answer

KEY = SessionKey("u", "s")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteSessionStore]:
    opened = SqliteSessionStore(tmp_path / "sessions.db")
    yield opened
    opened.close()


def ctx() -> RuntimeContext:
    return RuntimeContext(session_id="s", user_id="u")


def journal(store: SqliteSessionStore) -> dict[str, Any] | None:
    """The journal of the stored session's latest assistant message that made calls."""
    state = store.load(KEY)
    assert state is not None
    for msg in reversed(state.context):
        if msg.tool_calls:
            return (msg.metadata or {}).get(JOURNAL_KEY)
    return None


def stored_roles(store: SqliteSessionStore) -> list[str]:
    state = store.load(KEY)
    assert state is not None
    return [m.role.value for m in state.context]


class Seen:
    def __init__(self) -> None:
        self.runs: list[str] = []
        self.inside: list[Any] = []  # what the store held while a tool ran


class PassThrough(MiddlewareBase):
    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_ACTING}

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return next(input)


def _pass(tool: Any, ctx: Any, call: Any, next: Any) -> Any:
    return next(call)


def toolkit(store: SqliteSessionStore, seen: Seen, layer: str = "none") -> Toolkit:
    @tool(side_effect=True, middlewares=[_pass] if layer == "tool-middleware" else [])
    def pay(amount: int) -> str:
        """Pay an amount (must not happen twice)."""
        seen.inside.append(("pay", journal(store), stored_roles(store)))
        seen.runs.append(f"pay {amount}")
        return f"paid {amount}"

    @tool
    def lookup(what: str) -> str:
        """Look something up (safe to repeat)."""
        seen.inside.append(("lookup", journal(store), stored_roles(store)))
        seen.runs.append(f"lookup {what}")
        return f"found {what}"

    return Toolkit([pay, lookup])


# -- what is journaled, and when -----------------------------------------------------------


@pytest.mark.parametrize("layer", ["none", "on_acting", "tool-middleware"])
async def test_the_start_is_stored_before_the_tool_runs_and_the_result_before_it_is_published(
        store: SqliteSessionStore, layer: str) -> None:
    seen = Seen()
    model = ScriptedModel([[ToolUseBlock("p1", "pay", {"amount": 5}),
                            ToolUseBlock("l1", "lookup", {"what": "receipt"})], "all done"])
    agent = make_agent(model, toolkit=toolkit(store, seen, layer), session_store=store,
                       middlewares=[PassThrough()] if layer == "on_acting" else [])
    at_end: list[Any] = []

    def on_next(event: AgentEvent) -> None:
        if isinstance(event, ToolResultEndEvent) and event.tool_call_id == "p1":
            at_end.append((journal(store), stored_roles(store)))

    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    agent.stream("pay the bill", ctx()).subscribe(on_next, done.set_exception,
                                                  lambda: done.set_result(None))
    await asyncio.wait_for(done, 5)

    # Inside pay: its start mark is in the store (and nothing else of the batch).
    assert seen.inside[0] == ("pay", {"p1": {"state": "started", "tool": "pay"}},
                              ["user", "assistant"])
    finished = {"state": "finished", "tool": "pay",
                "result": ToolResultBlock(id="p1", name="pay", output="paid 5").model_dump(
                    mode="json")}
    # When its end event reaches the caller, its result is journaled and saved, and
    # not in the context yet (the batch writes the results when it ends).
    assert at_end == [({"p1": finished}, ["user", "assistant"])]
    # The next tool of the batch (no side effect) is not journaled.
    assert seen.inside[1] == ("lookup", {"p1": finished}, ["user", "assistant"])
    # Published: the results are in the context, the journal is gone.
    assert journal(store) is None
    state = store.load(KEY)
    assert state is not None
    assert [m.role.value for m in state.context] == ["user", "assistant", "tool", "tool",
                                                     "assistant"]
    assert all(m.metadata is None for m in state.context)
    assert [(r.id, r.output) for r in tool_results(state.context)] == [("p1", "paid 5"),
                                                                      ("l1", "found receipt")]
    assert seen.runs == ["pay 5", "lookup receipt"]


async def test_concurrent_side_effect_calls_are_each_journaled_before_they_run(
        store: SqliteSessionStore) -> None:
    inside: list[Any] = []

    @tool(side_effect=True, concurrency_safe=True)
    async def send(to: str) -> str:
        """Send a message."""
        inside.append((to, await asyncio.to_thread(journal, store)))
        await asyncio.sleep(0.01)
        return f"sent to {to}"

    model = ScriptedModel([[ToolUseBlock("a", "send", {"to": "ann"}),
                            ToolUseBlock("b", "send", {"to": "bob"})], "sent"])
    agent = make_agent(model, toolkit=Toolkit([send]), session_store=store)
    await agent.acall("tell them", ctx())
    for to, held in inside:
        call_id = "a" if to == "ann" else "b"
        assert held[call_id] == {"state": "started", "tool": "send"}, inside
    assert journal(store) is None
    assert [r.output for r in tool_results(store.load(KEY).context)] == ["sent to ann",
                                                                         "sent to bob"]


async def test_a_session_that_is_not_durable_keeps_no_journal() -> None:
    runs: list[str] = []

    @tool(side_effect=True)
    def pay(amount: int) -> str:
        """Pay."""
        runs.append("pay")
        return "paid"

    memory = InMemorySessionStore()
    model = ScriptedModel([[ToolUseBlock("p1", "pay", {"amount": 1})], "ok"])
    agent = make_agent(model, toolkit=Toolkit([pay]), session_store=memory)
    c = ctx()
    await agent.acall("pay", c)
    assert runs == ["pay"]
    assert all(m.metadata is None for m in c.agent_state.context)


async def test_an_interrupt_that_cancels_a_running_side_effect_says_it_may_have_taken_effect(
        store: SqliteSessionStore) -> None:
    entered = asyncio.Event()

    @tool(side_effect=True)
    async def transfer(amount: int) -> str:
        """Transfer money (slowly)."""
        entered.set()
        await asyncio.sleep(30)
        return "transferred"

    model = ScriptedModel([[ToolUseBlock("t1", "transfer", {"amount": 9})], "never"])
    agent = make_agent(model, toolkit=Toolkit([transfer]), session_store=store)
    c = ctx()
    reply = asyncio.ensure_future(agent.acall("move it", c))
    await asyncio.wait_for(entered.wait(), 5)
    agent.interrupt(c)
    msg = await asyncio.wait_for(reply, 5)
    assert msg.generate_reason is GenerateReason.INTERRUPTED
    (result,) = tool_results(store.load(KEY).context)
    assert (result.state, result.output) == (ToolResultState.INTERRUPTED, CUT_TEXT)
    assert journal(store) is None


# -- recovery ------------------------------------------------------------------------------


def crashed_state() -> AgentState:
    """What a worker that died mid-batch left: three calls, one journaled finished,
    one journaled started, one without an entry (no side effect)."""
    calls = [ToolUseBlock("p1", "pay", {"amount": 5}), ToolUseBlock("p2", "pay", {"amount": 7}),
             ToolUseBlock("l1", "lookup", {"what": "x"})]
    done = ToolResultBlock(id="p1", name="pay", output="paid 5")
    assistant = Msg("assistant", list(calls), metadata={JOURNAL_KEY: {
        "p1": {"state": "finished", "tool": "pay", "result": done.model_dump(mode="json")},
        "p2": {"state": "started", "tool": "pay"},
    }})
    state = AgentState(session_id="s", user_id="u")
    state.context.extend([Msg("user", "pay twice"), assistant])
    return state


async def test_recovery_restores_a_finished_result_and_never_reruns_a_started_side_effect(
        store: SqliteSessionStore) -> None:
    store.save(KEY, crashed_state())
    seen = Seen()
    model = ScriptedModel(["I will check the second payment first."])
    agent = make_agent(model, toolkit=toolkit(store, seen), session_store=store)
    events: list[AgentEvent] = []
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    agent.stream("what happened?", ctx()).subscribe(events.append, done.set_exception,
                                                    lambda: done.set_result(None))
    await asyncio.wait_for(done, 5)
    assert seen.runs == []  # nothing ran again
    (recovered,) = of_type(events, SessionRecoveredEvent)
    assert list(recovered.tool_call_ids) == ["p1", "p2", "l1"]  # the journaled ones first
    (sent,) = model.calls
    results = {r.id: r for m in sent.messages for r in m.tool_results}
    assert (results["p1"].state, results["p1"].output) == (ToolResultState.SUCCESS, "paid 5")
    assert (results["p2"].state, results["p2"].output) == (ToolResultState.INTERRUPTED,
                                                           MAY_HAVE_RUN_TEXT)
    assert (results["l1"].state, results["l1"].output) == (ToolResultState.INTERRUPTED,
                                                           RECOVERED_TEXT)
    state = store.load(KEY)
    assert state is not None
    assert_no_orphan_tool_calls(state.context)
    assert journal(store) is None  # the journal has served
    assert [m.role.value for m in state.context] == ["user", "assistant", "tool", "tool", "tool",
                                                     "user", "assistant"]


def test_recover_journaled_puts_results_after_the_batch_and_before_what_came_next() -> None:
    state = crashed_state()
    answered = ToolResultBlock(id="l1", name="lookup", output="found x")
    state.context.append(Msg.make(Role.TOOL, [answered], "lookup"))
    state.context.append(Msg("user", "later"))
    blocks = recover_journaled(state)
    assert [(b.id, b.state) for b in blocks] == [("p1", ToolResultState.SUCCESS),
                                                ("p2", ToolResultState.INTERRUPTED)]
    shape = [(m.role.value, [b.id for b in m.tool_results]) for m in state.context]
    assert shape == [("user", []), ("assistant", []), ("tool", ["l1"]), ("tool", ["p1"]),
                     ("tool", ["p2"]), ("user", [])]
    assert state.context[1].metadata is None
    assert recover_journaled(state) == []  # once


def test_a_journaled_call_that_has_its_result_only_loses_its_entry() -> None:
    state = crashed_state()
    for call_id in ("p1", "p2"):
        block = ToolResultBlock(id=call_id, name="pay", output="kept")
        state.context.append(Msg.make(Role.TOOL, [block], "pay"))
    assert recover_journaled(state) == []
    assert state.context[1].metadata is None
    assert [r.output for r in tool_results(state.context)] == ["kept", "kept"]


def test_an_unreadable_finished_entry_is_answered_as_may_have_run() -> None:
    state = crashed_state()
    state.context[1].metadata[JOURNAL_KEY]["p1"]["result"] = {"not": "a block"}  # type: ignore[index]
    blocks = recover_journaled(state)
    assert [(b.id, b.output) for b in blocks] == [("p1", MAY_HAVE_RUN_TEXT),
                                                 ("p2", MAY_HAVE_RUN_TEXT)]


async def test_a_side_effect_whose_start_mark_cannot_be_saved_does_not_run(
        tmp_path: Path) -> None:
    """The store refuses the start mark (another connection holds the database's
    write lock past the store's busy timeout): the tool is not entered, and the call
    fails with the store's error."""
    path = tmp_path / "locked.db"
    store = SqliteSessionStore(path, timeout=0.2)
    runs: list[str] = []
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    @tool
    def lock_the_store() -> str:
        """Another writer takes the database (a real SQLite lock)."""
        blocker.execute("BEGIN EXCLUSIVE")
        return "locked"

    @tool(side_effect=True)
    def pay(amount: int) -> str:
        """Pay."""
        runs.append("pay")
        return "paid"

    model = ScriptedModel([[ToolUseBlock("k1", "lock_the_store", {}),
                            ToolUseBlock("p1", "pay", {"amount": 1})], "never"])
    # The lock also keeps the lease from being released: a short ttl frees it.
    agent = make_agent(model, toolkit=Toolkit([lock_the_store, pay]), session_store=store,
                       session_lease_ttl=0.5)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await agent.acall("pay", ctx())
        assert runs == []
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    # The mark never reached the store: the next call answers pay as any unfinished
    # call (it never ran), and nothing runs again.
    model2 = ScriptedModel(["ok"])
    agent2 = make_agent(model2, toolkit=Toolkit([lock_the_store, pay]), session_store=store,
                        session_wait=5)
    await agent2.acall("again?", ctx())
    assert runs == []
    state = store.load(KEY)
    assert state is not None
    assert_no_orphan_tool_calls(state.context)
    store.close()


async def test_an_interrupt_lets_a_journaled_finish_tool_end_and_keeps_its_saved_result(
        store: SqliteSessionStore) -> None:
    entered = asyncio.Event()
    go = asyncio.Event()

    @tool(side_effect=True, interrupt="finish")
    async def book(seat: str) -> str:
        """Book a seat (an interrupt waits for it)."""
        entered.set()
        await go.wait()
        return f"booked {seat}"

    model = ScriptedModel([[ToolUseBlock("b1", "book", {"seat": "12A"})], "never"])
    agent = make_agent(model, toolkit=Toolkit([book]), session_store=store)
    c = ctx()
    reply = asyncio.ensure_future(agent.acall("book it", c))
    await asyncio.wait_for(entered.wait(), 5)
    agent.interrupt(c)
    await asyncio.sleep(0.05)
    assert journal(store) == {"b1": {"state": "started", "tool": "book"}}
    go.set()
    msg = await asyncio.wait_for(reply, 5)
    assert msg.generate_reason is GenerateReason.INTERRUPTED
    (result,) = tool_results(store.load(KEY).context)
    assert (result.state, result.output) == (ToolResultState.SUCCESS, "booked 12A")
    assert journal(store) is None
    assert len(model.calls) == 1


async def test_a_side_effect_call_a_tool_middleware_answers_is_not_journaled(
        store: SqliteSessionStore) -> None:
    runs: list[str] = []

    def cached(tool: Any, ctx: Any, call: Any, next: Any) -> Any:
        return answer(call, "paid already (cached)")

    @tool(side_effect=True, middlewares=[cached])
    def pay(amount: int) -> str:
        """Pay."""
        runs.append("pay")
        return "paid"

    model = ScriptedModel([[ToolUseBlock("p1", "pay", {"amount": 1})], "ok"])
    agent = make_agent(model, toolkit=Toolkit([pay]), session_store=store)
    await agent.acall("pay", ctx())
    assert runs == []
    (result,) = tool_results(store.load(KEY).context)
    assert result.output == "paid already (cached)"
    assert all(m.metadata is None for m in store.load(KEY).context)


async def test_the_start_mark_is_saved_with_the_arguments_a_hook_changed(
        store: SqliteSessionStore) -> None:
    inside: list[Any] = []

    class Cap(MiddlewareBase):
        """Caps every payment at 100 before it runs."""

        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_ACTING}

        def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            calls = [c.model_copy(update={"input": {"amount": min(c.input["amount"], 100)}})
                     for c in input.tool_calls]
            return next(input.with_(tool_calls=calls))

    @tool(side_effect=True)
    def pay(amount: int) -> str:
        """Pay."""
        state = store.load(KEY)
        assert state is not None
        msg = state.context[-1]
        inside.append((msg.tool_calls[0].input, (msg.metadata or {}).get(JOURNAL_KEY)))
        return f"paid {amount}"

    model = ScriptedModel([[ToolUseBlock("p1", "pay", {"amount": 5000})], "ok"])
    agent = make_agent(model, toolkit=Toolkit([pay]), session_store=store, middlewares=[Cap()])
    await agent.acall("pay", ctx())
    assert inside == [({"amount": 100}, {"p1": {"state": "started", "tool": "pay"}})]
