"""Interrupts requested at any step boundary stop every tool that has not started
(issue #10, items 1 and 2)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import reactivex.operators as ops
from conftest import assert_no_orphan_tool_calls, make_agent, of_type, tool_results

from rx_agent import (
    AgentEvent,
    AgentResultEvent,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    ModelCallEndEvent,
    Msg,
    ReActAgent,
    Role,
    RuntimeContext,
    ScriptedModel,
    SqliteSessionStore,
    Toolkit,
    ToolResultEndEvent,
    ToolResultState,
    ToolUseBlock,
    tool,
)
from rx_agent.session import SessionKey


def _counting_toolkit(ran: list[str], *, safe: bool = False) -> Toolkit:
    @tool
    def effect(tag: str) -> str:
        """A tool with a side effect."""
        ran.append(tag)
        return f"did {tag}"

    toolkit = Toolkit()
    toolkit.register_tool(effect)
    if safe:
        toolkit.get("effect").concurrency_safe = True  # type: ignore[union-attr]
    return toolkit


def _tool_round(*tags: str) -> list[Any]:
    return [ToolUseBlock(f"c{i}", "effect", {"tag": t}) for i, t in enumerate(tags)]


class InterruptAt(MiddlewareBase):
    """Calls ``agent.interrupt(ctx)`` when the ``index``-th event (or the first event of
    ``kind``) of the model call's stream passes its ``on_model_call`` layer."""

    def __init__(
        self, *, index: int | None = None, kind: type | None = None, from_thread: bool = False
    ) -> None:
        self.index = index
        self.kind = kind
        self.from_thread = from_thread
        self.fired = 0

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL}

    def on_model_call(self, agent: Any, ctx: RuntimeContext, input: Any, next: Any) -> Any:
        seen = [0]

        def check(event: AgentEvent) -> None:
            hit = (self.index is not None and seen[0] == self.index) or (
                self.kind is not None and isinstance(event, self.kind)
            )
            seen[0] += 1
            if hit and not self.fired:
                self.fired += 1
                if self.from_thread:
                    # interrupt() returns before the next event of the stream is handled.
                    t = threading.Thread(target=agent.interrupt, args=(ctx,))
                    t.start()
                    t.join()
                else:
                    agent.interrupt(ctx)

        return next(input).pipe(ops.do_action(check))


def _agent(model: ScriptedModel, toolkit: Toolkit, *mws: MiddlewareBase) -> ReActAgent:
    return make_agent(model, toolkit=toolkit, middlewares=list(mws))


def _check_interrupted(msg: Msg, state_context: list[Msg]) -> None:
    assert msg.generate_reason is GenerateReason.INTERRUPTED
    assert_no_orphan_tool_calls(state_context)
    assert state_context[-1].generate_reason is GenerateReason.INTERRUPTED


@pytest.mark.parametrize("from_thread", [False, True])
async def test_interrupt_at_model_call_end_runs_no_tool(from_thread: bool) -> None:
    ran: list[str] = []
    model = ScriptedModel([_tool_round("a", "b"), "done"])
    agent = _agent(model, _counting_toolkit(ran),
                   InterruptAt(kind=ModelCallEndEvent, from_thread=from_thread))
    ctx = RuntimeContext(session_id="s")
    msg = await asyncio.wait_for(agent.acall("go", ctx), 3)
    assert ran == []
    _check_interrupted(msg, ctx.agent_state.context)
    results = tool_results(ctx.agent_state.context)
    assert [r.id for r in results] == ["c0", "c1"]
    assert all(r.state in (ToolResultState.INTERRUPTED, ToolResultState.ERROR) for r in results)


async def test_interrupt_at_any_event_of_the_model_stream_runs_no_tool() -> None:
    # How many events the tool round's model call emits (start, tool-call events, end).
    seen: list[AgentEvent] = []
    counter = make_agent(ScriptedModel([_tool_round("a", "b"), "done"]),
                         toolkit=_counting_toolkit([]))
    async for e in counter.astream("go"):
        seen.append(e)
        if isinstance(e, ModelCallEndEvent):
            break
    count = len(seen) - 1  # minus AgentStartEvent
    assert count >= 6
    for index in range(count):
        ran: list[str] = []
        model = ScriptedModel([_tool_round("a", "b"), "done"])
        mw = InterruptAt(index=index)
        agent = _agent(model, _counting_toolkit(ran), mw)
        ctx = RuntimeContext(session_id="s")
        msg = await asyncio.wait_for(agent.acall("go", ctx), 3)
        assert mw.fired, index
        assert ran == [], index
        _check_interrupted(msg, ctx.agent_state.context)


async def test_interrupt_at_the_end_of_a_text_answer_ends_interrupted_not_model_stop() -> None:
    model = ScriptedModel([["Hello ", "there"]])
    agent = _agent(model, Toolkit(), InterruptAt(kind=ModelCallEndEvent))
    ctx = RuntimeContext(session_id="s")
    msg = await asyncio.wait_for(agent.acall("go", ctx), 3)
    assert msg.generate_reason is GenerateReason.INTERRUPTED


def test_interrupt_from_a_plain_thread_caller_runs_no_tool() -> None:
    ran: list[str] = []
    model = ScriptedModel([_tool_round("a"), "done"])
    agent = _agent(model, _counting_toolkit(ran),
                   InterruptAt(kind=ModelCallEndEvent, from_thread=True))
    ctx = RuntimeContext(session_id="s")
    msg = agent.call_sync("go", ctx)
    assert ran == []
    _check_interrupted(msg, ctx.agent_state.context)


async def test_a_tool_that_interrupts_stops_the_tools_after_it_in_a_sequential_batch() -> None:
    ran: list[str] = []
    holder: dict[str, ReActAgent] = {}

    @tool
    def effect(tag: str, ctx: RuntimeContext) -> str:
        """A tool with a side effect; 'stop' interrupts the reply."""
        ran.append(tag)
        if tag == "stop":
            holder["agent"].interrupt(ctx)
        return f"did {tag}"

    toolkit = Toolkit()
    toolkit.register_tool(effect)
    model = ScriptedModel([_tool_round("a", "stop", "c", "d"), "done"])
    agent = _agent(model, toolkit)
    holder["agent"] = agent
    ctx = RuntimeContext(session_id="s")
    msg = await asyncio.wait_for(agent.acall("go", ctx), 3)
    assert ran == ["a", "stop"]
    _check_interrupted(msg, ctx.agent_state.context)
    results = tool_results(ctx.agent_state.context)
    assert [r.id for r in results] == ["c0", "c1", "c2", "c3"]
    assert results[0].state is ToolResultState.SUCCESS
    # The tool that asked may finish (SUCCESS) or be cut with the step (INTERRUPTED).
    assert results[1].state in (ToolResultState.SUCCESS, ToolResultState.INTERRUPTED)
    assert all(r.state is ToolResultState.INTERRUPTED for r in results[2:])
    assert model.calls and len(model.calls) == 1  # no further round


async def test_interrupting_a_concurrent_batch_gives_each_call_one_result_before_the_end() -> None:
    release = asyncio.Event()
    started: list[str] = []
    holder: dict[str, Any] = {}

    @tool
    async def slow(tag: str) -> str:
        """Slow, cancel-resistant for a moment (finishes late)."""
        started.append(tag)
        if tag == "first":
            return "quick"
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            # Finish late despite the cancellation: the result must not be recorded.
            await asyncio.sleep(0.05)
            return "late"
        return "never"

    toolkit = Toolkit()
    toolkit.register_tool(slow)
    toolkit.get("slow").concurrency_safe = True  # type: ignore[union-attr]
    calls = [ToolUseBlock("k0", "slow", {"tag": "first"}),
             ToolUseBlock("k1", "slow", {"tag": "second"}),
             ToolUseBlock("k2", "slow", {"tag": "third"})]
    model = ScriptedModel([calls, "done"])
    agent = make_agent(model, toolkit=toolkit)
    holder["agent"] = agent
    ctx = RuntimeContext(session_id="s")
    events: list[AgentEvent] = []

    async def consume() -> None:
        async for e in agent.astream("go", ctx):
            events.append(e)
            if isinstance(e, ToolResultEndEvent) and e.tool_call_id == "k0":
                agent.interrupt(ctx)

    await asyncio.wait_for(consume(), 3)
    await asyncio.sleep(0.15)  # give late finishers time to (wrongly) append
    release.set()
    context = ctx.agent_state.context
    results = tool_results(context)
    assert sorted(r.id for r in results) == ["k0", "k1", "k2"]
    assert [r.id for r in results] == ["k0", "k1", "k2"]  # call order
    assert context[-1].generate_reason is GenerateReason.INTERRUPTED
    final = of_type(events, AgentResultEvent)[0].result
    assert final.generate_reason is GenerateReason.INTERRUPTED
    # Every result event precedes the final message, one end event per call.
    ends = [e.tool_call_id for e in of_type(events, ToolResultEndEvent)]
    assert sorted(ends) == ["k0", "k1", "k2"]
    assert events.index(of_type(events, AgentResultEvent)[0]) > max(
        i for i, e in enumerate(events) if isinstance(e, ToolResultEndEvent))
    assert [m.role for m in context].count(Role.TOOL) == 3


class _InterruptingStore(SqliteSessionStore):
    """A durable store whose ``save_at``-th checkpoint interrupts the call while it is
    being saved (an interrupt that lands during a checkpoint's await)."""

    def __init__(self, path: Any, save_at: int) -> None:
        super().__init__(path)
        self.agent: ReActAgent | None = None
        self.save_at = save_at
        self.saves = 0

    async def asave_if_version(self, key: Any, state: Any, expected: Any) -> Any:
        self.saves += 1
        if self.saves == self.save_at and self.agent is not None:
            self.agent.interrupt(RuntimeContext(session_id="s"))
        return await super().asave_if_version(key, state, expected)


class _Compacting(MiddlewareBase):
    """Replaces the context with a copy of its messages (a change the store saves)."""

    def on_compress_context(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        kept = [Msg(role=m.role, content=m.content) for m in input.messages]
        return next(input.with_(messages=tuple(kept)))


def test_an_interrupt_during_the_checkpoint_of_a_compressed_context_starts_no_model_call(
    tmp_path: Any,
) -> None:
    # The checkpoint after compression is a step boundary like any other: the round's
    # model call does not start once interrupt() returned.
    store = _InterruptingStore(tmp_path / "s.db", save_at=1)
    model = ScriptedModel(["never streamed"])
    agent = make_agent(model, session_store=store, middlewares=[_Compacting()])
    store.agent = agent
    events = agent.stream("hi", RuntimeContext(session_id="s")).pipe(ops.to_list()).run()
    assert "model_call_start" not in [e.type for e in events]
    assert not model.calls
    result = of_type(events, AgentResultEvent)[0].result
    assert result.generate_reason is GenerateReason.INTERRUPTED


def test_an_interrupt_during_the_last_rounds_checkpoint_starts_no_summary(
    tmp_path: Any,
) -> None:
    # At the round limit, the results' checkpoint is the last boundary before the
    # summary call: an interrupt there ends the reply without it.
    ran: list[str] = []
    store = _InterruptingStore(tmp_path / "s.db", save_at=2)  # 1: the calls; 2: results
    model = ScriptedModel([_tool_round("a"), "never streamed"])
    agent = make_agent(model, toolkit=_counting_toolkit(ran), session_store=store,
                       max_iters=1)
    store.agent = agent
    events = agent.stream("hi", RuntimeContext(session_id="s")).pipe(ops.to_list()).run()
    assert ran == ["a"]
    assert len(model.calls) == 1  # the round's call, no summary call
    result = of_type(events, AgentResultEvent)[0].result
    assert result.generate_reason is GenerateReason.INTERRUPTED
    state, _ = store.load_versioned(SessionKey("__anon__", "s"))
    assert state is not None
    _check_interrupted(result, state.context)
