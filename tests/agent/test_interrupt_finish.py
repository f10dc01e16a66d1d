"""``@tool(interrupt="finish" | "cancel")``: what ``agent.interrupt()`` does to a running
tool call (issue #27, item 4).

"cancel" (the default, every tool's behaviour before the flag) cancels the running call
and answers it INTERRUPTED; "finish" lets it end and keeps its real result. Either
way no other tool starts after the interrupt, every call gets one result and the reply
ends INTERRUPTED without another model call.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest
from conftest import make_agent, of_type, tool_results

from rx_agent import (
    AgentEvent,
    AgentResultEvent,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    RuntimeContext,
    ScriptedModel,
    Tool,
    Toolkit,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultState,
    ToolUseBlock,
    tool,
)
from rx_agent.testing import assert_no_orphan_tool_calls, assert_well_formed


class PassThrough(MiddlewareBase):
    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_ACTING}

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return next(input)


def _pass(tool: Any, ctx: Any, call: Any, next: Any) -> Any:
    return next(call)


class Calls:
    """What the tools did: entered, finished, cancelled; a gate the finish tool waits at."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []
        self.gate = threading.Event()  # set from the test: the finish tool may return

    async def wait_entered(self, tag: str) -> None:
        for _ in range(2000):
            if tag in self.entered:
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"{tag} never entered its tool ({self.entered})")

    async def wait_cancelled(self, tag: str) -> None:
        for _ in range(2000):  # a cancelled task unwinds at the loop's next turn
            if tag in self.cancelled:
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"{tag} was never cancelled ({self.cancelled})")


def _tools(calls: Calls, *, sync: bool, concurrent: bool, layer: str) -> list[Tool]:
    own = [_pass] if layer == "tool-middleware" else []
    if sync:
        @tool(interrupt="finish", concurrency_safe=concurrent, middlewares=own)
        def save(tag: str) -> str:
            """Save a draft (lets an interrupt wait for it)."""
            calls.entered.append(tag)
            assert calls.gate.wait(5)
            calls.finished.append(tag)
            return f"saved {tag}"
    else:
        @tool(interrupt="finish", concurrency_safe=concurrent, middlewares=own)  # type: ignore[no-redef]
        async def save(tag: str) -> str:
            """Save a draft (lets an interrupt wait for it)."""
            calls.entered.append(tag)
            while not calls.gate.is_set():
                await asyncio.sleep(0.002)
            calls.finished.append(tag)
            return f"saved {tag}"

    @tool(concurrency_safe=concurrent, middlewares=own)
    async def search(tag: str) -> str:
        """Search for a long time (an interrupt cancels it)."""
        calls.entered.append(tag)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            calls.cancelled.append(tag)
            raise
        return f"found {tag}"

    return [save, search]


async def _interrupted(agent: Any, ctx: RuntimeContext, calls: Calls, *wait_for: str,
                       after: Any = None) -> tuple[list[AgentEvent], Any]:
    """Run a reply, interrupt it once the calls ``wait_for`` entered their tools, run
    ``after``, then open the gate; the events and the final message."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    events: list[AgentEvent] = []
    agent.stream("go", ctx).subscribe(events.append, done.set_exception,
                                      lambda: done.set_result(None))
    for tag in wait_for:
        await calls.wait_entered(tag)
    assert agent.interrupt(ctx)
    if after is not None:
        await after()
    calls.gate.set()
    await asyncio.wait_for(done, 5)
    (final,) = of_type(events, AgentResultEvent)
    return events, final.result


def _check_well_formed(events: list[AgentEvent], context: list[Any]) -> None:
    assert_well_formed([e for e in events if type(e).__name__.startswith("ToolResult")])
    assert_no_orphan_tool_calls(context)
    results = tool_results(context)
    starts = Counter(e.tool_call_id for e in of_type(events, ToolResultStartEvent))
    ends = Counter(e.tool_call_id for e in of_type(events, ToolResultEndEvent))
    assert starts == ends == Counter(r.id for r in results)
    (final,) = of_type(events, AgentResultEvent)
    last_end = max(i for i, e in enumerate(events) if isinstance(e, ToolResultEndEvent))
    assert events.index(final) > last_end


@pytest.mark.parametrize("layer", ["none", "on_acting", "tool-middleware"])
@pytest.mark.parametrize("sync", [False, True], ids=["async-tool", "sync-tool"])
async def test_an_interrupt_during_a_finish_tool_keeps_its_real_result(
        sync: bool, layer: str) -> None:
    calls = Calls()
    model = ScriptedModel([[ToolUseBlock("s1", "save", {"tag": "s1"}),
                            ToolUseBlock("q1", "search", {"tag": "q1"})], "never said"])
    agent = make_agent(model, toolkit=Toolkit(_tools(calls, sync=sync, concurrent=False,
                                                     layer=layer)),
                       middlewares=[PassThrough()] if layer == "on_acting" else [])
    ctx = RuntimeContext(session_id="s")

    async def still_running() -> None:
        await asyncio.sleep(0.05)  # the interrupt's cut would have happened by now
        assert calls.finished == []

    events, final = await _interrupted(agent, ctx, calls, "s1", after=still_running)
    assert final.generate_reason is GenerateReason.INTERRUPTED
    assert calls.finished == ["s1"]
    assert calls.entered == ["s1"]  # the next call never started
    context = ctx.agent_state.context
    results = {r.id: r for r in tool_results(context)}
    assert (results["s1"].state, results["s1"].output) == (ToolResultState.SUCCESS, "saved s1")
    assert results["q1"].state is ToolResultState.INTERRUPTED
    assert len(model.calls) == 1  # no model call after the interrupt
    _check_well_formed(events, context)


async def test_a_cancel_tool_is_cancelled_by_an_interrupt() -> None:
    calls = Calls()
    model = ScriptedModel([[ToolUseBlock("q1", "search", {"tag": "q1"})], "never said"])
    agent = make_agent(model, toolkit=Toolkit(_tools(calls, sync=False, concurrent=False,
                                                     layer="none")))
    ctx = RuntimeContext(session_id="s")
    events, final = await _interrupted(agent, ctx, calls, "q1")
    assert final.generate_reason is GenerateReason.INTERRUPTED
    await calls.wait_cancelled("q1")
    (result,) = tool_results(ctx.agent_state.context)
    assert (result.state, result.output) == (ToolResultState.INTERRUPTED,
                                            "Interrupted before it finished.")
    _check_well_formed(events, ctx.agent_state.context)


@pytest.mark.parametrize("layer", ["none", "on_acting", "tool-middleware"])
async def test_a_mixed_concurrent_batch_cancels_one_and_lets_the_other_finish(
        layer: str) -> None:
    calls = Calls()
    model = ScriptedModel([[ToolUseBlock("s1", "save", {"tag": "s1"}),
                            ToolUseBlock("q1", "search", {"tag": "q1"}),
                            ToolUseBlock("s2", "save", {"tag": "s2"})], "never said"])
    agent = make_agent(model, toolkit=Toolkit(_tools(calls, sync=False, concurrent=True,
                                                     layer=layer)),
                       middlewares=[PassThrough()] if layer == "on_acting" else [])
    ctx = RuntimeContext(session_id="s")

    async def search_cancelled_at_once() -> None:
        for _ in range(1000):  # before the finish tools are let go
            if calls.cancelled:
                break
            await asyncio.sleep(0.001)
        assert calls.cancelled == ["q1"]
        assert calls.finished == []

    events, final = await _interrupted(agent, ctx, calls, "s1", "q1", "s2",
                                       after=search_cancelled_at_once)
    assert final.generate_reason is GenerateReason.INTERRUPTED
    assert sorted(calls.finished) == ["s1", "s2"]
    context = ctx.agent_state.context
    results = [(r.id, r.state, r.output) for r in tool_results(context)]
    assert results == [("s1", ToolResultState.SUCCESS, "saved s1"),
                       ("q1", ToolResultState.INTERRUPTED, "Interrupted before it finished."),
                       ("s2", ToolResultState.SUCCESS, "saved s2")]  # in call order
    assert len(model.calls) == 1
    _check_well_formed(events, context)


async def test_a_finish_tool_that_has_not_started_does_not_start_after_an_interrupt() -> None:
    calls = Calls()
    model = ScriptedModel([[ToolUseBlock("q1", "search", {"tag": "q1"}),
                            ToolUseBlock("s1", "save", {"tag": "s1"})], "never said"])
    agent = make_agent(model, toolkit=Toolkit(_tools(calls, sync=False, concurrent=False,
                                                     layer="none")))
    ctx = RuntimeContext(session_id="s")
    events, final = await _interrupted(agent, ctx, calls, "q1")
    assert final.generate_reason is GenerateReason.INTERRUPTED
    await calls.wait_cancelled("q1")
    assert calls.entered == ["q1"]
    states = [(r.id, r.state) for r in tool_results(ctx.agent_state.context)]
    assert states == [("q1", ToolResultState.INTERRUPTED), ("s1", ToolResultState.INTERRUPTED)]
    _check_well_formed(events, ctx.agent_state.context)


async def test_after_the_held_interrupt_the_session_takes_the_next_message() -> None:
    calls = Calls()
    model = ScriptedModel([[ToolUseBlock("s1", "save", {"tag": "s1"})], "never said", "hello"])
    agent = make_agent(model, toolkit=Toolkit(_tools(calls, sync=False, concurrent=False,
                                                     layer="none")))
    ctx = RuntimeContext(session_id="s")
    await _interrupted(agent, ctx, calls, "s1")
    reply = await agent.acall("and now?", ctx)
    assert reply.text == "never said"  # the script goes on where the interrupt left it
    seen = [m.role.value for m in model.calls[-1].messages if m.role.value != "system"]
    assert seen == ["user", "assistant", "tool", "assistant", "user"]


# -- declaring the flags -------------------------------------------------------------------


def test_the_flags_default_to_cancel_and_no_side_effect() -> None:
    @tool
    def plain(x: int) -> int:
        """Plain."""
        return x

    assert (plain.interrupt, plain.side_effect) == ("cancel", False)
    flagged = tool(name="flagged", side_effect=True, interrupt="finish")(lambda x: x)
    assert (flagged.interrupt, flagged.side_effect) == ("finish", True)


def test_bad_flag_values_fail_at_decoration_time_naming_the_flag() -> None:
    with pytest.raises(ValueError, match=r"interrupt must be 'cancel' .* or 'finish'.*'stop'"):
        tool(interrupt="stop")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"side_effect must be True or False, got 'yes'"):
        tool(side_effect="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"side_effect must be True or False, got 1"):
        tool(side_effect=1)  # type: ignore[arg-type]

    def fn(x: int) -> int:
        """Fn."""
        return x

    with pytest.raises(ValueError, match=r"tool 'fn': interrupt must be"):
        Tool(fn, interrupt="later")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"interrupt must be"):
        Toolkit().register_tool(fn, interrupt="stop")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"side_effect must be True or False"):
        Toolkit().register_tool(fn, side_effect="no")  # type: ignore[arg-type]


def test_toolkit_registration_sets_or_keeps_the_flags() -> None:
    @tool(side_effect=True, interrupt="finish")
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    def note(text: str) -> str:
        """Note."""
        return text

    kit = Toolkit()
    kept = kit.register_tool(pay)
    assert (kept.side_effect, kept.interrupt) == (True, "finish")
    renamed = kit.register_tool(pay, name="pay2", interrupt="cancel")
    assert (renamed.side_effect, renamed.interrupt) == (True, "cancel")
    plain = kit.register_tool(note, side_effect=True)
    assert (plain.side_effect, plain.interrupt) == (True, "cancel")

    class Shop:
        @tool(side_effect=True)
        def buy(self, item: str) -> str:
            """Buy."""
            return item

    method = Toolkit().register_tool(Shop(), interrupt="finish")
    assert (method.side_effect, method.interrupt) == (True, "finish")


def test_mcp_registration_takes_and_checks_the_flags() -> None:
    from rx_agent import McpToolSource

    source = McpToolSource.stdio("python", ["-c", "pass"])  # nothing connects here
    kit = Toolkit()
    kit.register_mcp(source, side_effect=True, interrupt="finish")
    (bound,) = kit._sources
    assert (bound.side_effect, bound.interrupt) == (True, "finish")
    with pytest.raises(ValueError, match="interrupt must be"):
        kit.register_mcp(source, prefix="x", interrupt="stop")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="side_effect must be True or False"):
        kit.register_mcp(source, prefix="y", side_effect="yes")  # type: ignore[arg-type]
