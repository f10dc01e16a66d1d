"""agent.interrupt(ctx) and disposing a subscription (docs/concepts/hooks.md, docs/porting.md)."""

from __future__ import annotations

import asyncio
import threading
import time

import reactivex.operators as ops
from conftest import (
    add_toolkit,
    assert_no_orphan_tool_calls,
    make_agent,
    of_type,
    run_stream,
    tool_results,
    wait_until,
)

from rx_agent import (
    AgentEndEvent,
    AgentResultEvent,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    ToolResultState,
    ToolUseBlock,
    tool,
)

LONG_ANSWER = [f"w{i} " for i in range(10)]


def _slow_tool_kit(started: threading.Event | asyncio.Event, cancelled: list):  # type: ignore[no-untyped-def]
    @tool
    async def slow() -> str:
        """Takes long."""
        started.set()
        try:
            await asyncio.sleep(3)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "late"

    return add_toolkit(slow)


def _slow_batch() -> list:
    return [ToolUseBlock("c1", "slow", {}), ToolUseBlock("c2", "add", {"a": 1, "b": 2})]


# -- interrupt ---------------------------------------------------------------------------------


async def test_interrupt_during_a_slow_model_stream_ends_with_interrupted() -> None:
    model = ScriptedModel([LONG_ANSWER, "next"], delay=0.03)
    agent = make_agent(model)
    ctx = RuntimeContext(session_id="s")
    task = asyncio.ensure_future(agent.acall("hi", ctx))
    await asyncio.sleep(0.08)
    agent.interrupt(ctx)
    start = time.perf_counter()
    msg = await asyncio.wait_for(task, 3)
    assert time.perf_counter() - start < 0.2
    assert msg.generate_reason is GenerateReason.INTERRUPTED
    assert ctx.agent_state.context[-1].generate_reason is GenerateReason.INTERRUPTED


async def test_interrupted_call_still_streams_a_result_and_end_event() -> None:
    model = ScriptedModel([LONG_ANSWER], delay=0.03)
    agent = make_agent(model)
    ctx = RuntimeContext(session_id="s")
    events: list = []

    async def consume() -> None:
        async for event in agent.astream("hi", ctx):
            events.append(event)

    task = asyncio.ensure_future(consume())
    await asyncio.sleep(0.08)
    agent.interrupt(ctx)
    await asyncio.wait_for(task, 3)
    (result,) = of_type(events, AgentResultEvent)
    assert result.result.generate_reason is GenerateReason.INTERRUPTED
    assert isinstance(events[-1], AgentEndEvent)


async def test_next_call_after_an_interrupted_model_stream_works() -> None:
    model = ScriptedModel([LONG_ANSWER, "next"], delay=0.03)
    agent = make_agent(model)
    ctx = RuntimeContext(session_id="s")
    task = asyncio.ensure_future(agent.acall("hi", ctx))
    await asyncio.sleep(0.08)
    agent.interrupt(ctx)
    await asyncio.wait_for(task, 3)
    msg = await asyncio.wait_for(agent.acall("again", ctx), 3)
    assert msg.text == "next"
    assert msg.generate_reason is GenerateReason.MODEL_STOP


async def test_interrupt_during_a_slow_tool_synthesizes_results_for_pending_calls() -> None:
    started, cancelled = asyncio.Event(), []
    model = ScriptedModel([_slow_batch(), "next"])
    agent = make_agent(model, toolkit=_slow_tool_kit(started, cancelled))
    ctx = RuntimeContext(session_id="s")
    task = asyncio.ensure_future(agent.acall("hi", ctx))
    await asyncio.wait_for(started.wait(), 3)
    agent.interrupt(ctx)
    start = time.perf_counter()
    msg = await asyncio.wait_for(task, 3)
    assert time.perf_counter() - start < 0.5
    assert msg.generate_reason is GenerateReason.INTERRUPTED
    context = ctx.agent_state.context
    assert_no_orphan_tool_calls(context)
    results = {r.id: r for r in tool_results(context)}
    assert set(results) == {"c1", "c2"}
    assert results["c1"].state is not ToolResultState.SUCCESS


async def test_next_call_after_an_interrupted_tool_works_without_orphans() -> None:
    started, cancelled = asyncio.Event(), []
    model = ScriptedModel([_slow_batch(), "next"])
    agent = make_agent(model, toolkit=_slow_tool_kit(started, cancelled))
    ctx = RuntimeContext(session_id="s")
    task = asyncio.ensure_future(agent.acall("hi", ctx))
    await asyncio.wait_for(started.wait(), 3)
    agent.interrupt(ctx)
    await asyncio.wait_for(task, 3)
    msg = await asyncio.wait_for(agent.acall("again", ctx), 3)
    assert msg.text == "next"
    assert_no_orphan_tool_calls(list(model.calls[-1].messages))


def test_interrupt_from_another_thread_ends_call_sync() -> None:
    model = ScriptedModel([LONG_ANSWER], delay=0.03)
    agent = make_agent(model)
    ctx = RuntimeContext(session_id="s", user_id="u")

    def later() -> None:
        time.sleep(0.08)
        agent.interrupt(RuntimeContext(session_id="s", user_id="u"))

    threading.Thread(target=later).start()
    msg = agent.call_sync("hi", ctx)
    assert msg.generate_reason is GenerateReason.INTERRUPTED


def test_interrupt_from_inside_a_middleware() -> None:
    ran: list = []

    class Interrupts(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_ACTING}

        def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            agent.interrupt(ctx)
            return next(input)

    @tool
    def record(x: int) -> int:
        """Record."""
        ran.append(x)
        return x

    model = ScriptedModel([[ToolUseBlock("c1", "record", {"x": 1})], "never"])
    ctx = RuntimeContext(session_id="s")
    events = run_stream(
        make_agent(model, toolkit=add_toolkit(record), middlewares=[Interrupts()]).stream("hi", ctx)
    )
    (result,) = of_type(events, AgentResultEvent)
    assert result.result.generate_reason is GenerateReason.INTERRUPTED
    assert len(model.calls) == 1
    assert_no_orphan_tool_calls(ctx.agent_state.context)


def test_interrupt_only_affects_its_own_session() -> None:
    model = ScriptedModel([LONG_ANSWER, LONG_ANSWER], delay=0.02)
    agent = make_agent(model)
    results: dict = {}

    def run(session: str) -> None:
        results[session] = agent.call_sync("hi", RuntimeContext(session_id=session))

    threads = [threading.Thread(target=run, args=(s,)) for s in ("keep", "stop")]
    for t in threads:
        t.start()
    time.sleep(0.06)
    agent.interrupt(RuntimeContext(session_id="stop"))
    for t in threads:
        t.join(5)
    assert results["stop"].generate_reason is GenerateReason.INTERRUPTED
    assert results["keep"].generate_reason is GenerateReason.MODEL_STOP


# -- dispose -----------------------------------------------------------------------------------


class CountModelEvents(MiddlewareBase):
    def __init__(self) -> None:
        self.events: list = []

    def active_points(self):  # type: ignore[no-untyped-def]
        return {ExtensionPoint.ON_MODEL_CALL}

    def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return next(input).pipe(ops.do_action(on_next=self.events.append))


async def test_dispose_cancels_the_model_stream() -> None:
    counter = CountModelEvents()
    model = ScriptedModel([LONG_ANSWER, "next"], delay=0.02)
    agent = make_agent(model, middlewares=[counter])
    ctx = RuntimeContext(session_id="s")
    before = asyncio.all_tasks()
    got_delta = asyncio.Event()
    subscription = agent.stream("hi", ctx).subscribe(
        lambda e: got_delta.set() if isinstance(e, TextBlockDeltaEvent) else None, lambda e: None
    )
    await asyncio.wait_for(got_delta.wait(), 3)
    subscription.dispose()
    seen = len(counter.events)
    await asyncio.sleep(0.1)
    assert len(counter.events) == seen, "model events kept flowing after dispose"
    leftover = {t for t in asyncio.all_tasks() - before if not t.done()}
    leftover.discard(asyncio.current_task())
    assert leftover == set(), f"tasks still running after dispose: {leftover}"


def test_dispose_from_plain_code_stops_the_model_stream() -> None:
    counter = CountModelEvents()
    model = ScriptedModel([LONG_ANSWER, "next"], delay=0.02)
    agent = make_agent(model, middlewares=[counter])
    got_delta = threading.Event()
    subscription = agent.stream("hi").subscribe(
        lambda e: got_delta.set() if isinstance(e, TextBlockDeltaEvent) else None, lambda e: None
    )
    assert got_delta.wait(3)
    subscription.dispose()
    time.sleep(0.03)
    seen = len(counter.events)
    time.sleep(0.1)
    assert len(counter.events) == seen


async def test_dispose_cancels_a_running_async_tool() -> None:
    started, cancelled = asyncio.Event(), []
    model = ScriptedModel([_slow_batch(), "next"])
    agent = make_agent(model, toolkit=_slow_tool_kit(started, cancelled))
    subscription = agent.stream("hi", RuntimeContext(session_id="s")).subscribe(
        lambda e: None, lambda e: None
    )
    await asyncio.wait_for(started.wait(), 3)
    subscription.dispose()
    await asyncio.sleep(0.05)
    assert cancelled == [True]


def test_dispose_from_plain_code_cancels_a_running_async_tool() -> None:
    started, cancelled = threading.Event(), []
    model = ScriptedModel([_slow_batch(), "next"])
    agent = make_agent(model, toolkit=_slow_tool_kit(started, cancelled))
    subscription = agent.stream("hi").subscribe(lambda e: None, lambda e: None)
    assert started.wait(3)
    subscription.dispose()
    wait_until(lambda: cancelled == [True], 1)


async def test_after_dispose_during_a_tool_the_session_works_again() -> None:
    started, cancelled = asyncio.Event(), []
    model = ScriptedModel([_slow_batch(), "next"])
    agent = make_agent(model, toolkit=_slow_tool_kit(started, cancelled))
    ctx = RuntimeContext(session_id="s")
    subscription = agent.stream("hi", ctx).subscribe(lambda e: None, lambda e: None)
    await asyncio.wait_for(started.wait(), 3)
    subscription.dispose()
    msg = await asyncio.wait_for(agent.acall("again", ctx), 3)
    assert msg.text == "next"


async def test_after_dispose_during_a_tool_the_next_model_input_has_no_orphan_call() -> None:
    started, cancelled = asyncio.Event(), []
    model = ScriptedModel([_slow_batch(), "next"])
    agent = make_agent(model, toolkit=_slow_tool_kit(started, cancelled))
    ctx = RuntimeContext(session_id="s")
    subscription = agent.stream("hi", ctx).subscribe(lambda e: None, lambda e: None)
    await asyncio.wait_for(started.wait(), 3)
    subscription.dispose()
    await asyncio.wait_for(agent.acall("again", ctx), 3)
    assert_no_orphan_tool_calls(list(model.calls[-1].messages))


async def test_no_events_reach_the_observer_after_dispose() -> None:
    model = ScriptedModel([LONG_ANSWER], delay=0.02)
    agent = make_agent(model)
    received: list = []
    got_delta = asyncio.Event()

    def on_next(event) -> None:  # type: ignore[no-untyped-def]
        received.append(event)
        if isinstance(event, TextBlockDeltaEvent):
            got_delta.set()

    subscription = agent.stream("hi").subscribe(
        on_next, received.append, lambda: received.append("completed")
    )
    await asyncio.wait_for(got_delta.wait(), 3)
    subscription.dispose()
    count = len(received)
    await asyncio.sleep(0.1)
    assert len(received) == count


def test_interrupt_issued_during_state_ready_is_honored() -> None:
    class InterruptsEarly(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_AGENT_STATE_READY}

        def on_agent_state_ready(self, agent, ctx, state, input_messages):  # type: ignore[no-untyped-def]
            agent.interrupt(ctx)

    model = ScriptedModel(["never"])
    events = run_stream(make_agent(model, middlewares=[InterruptsEarly()]).stream("hi"))
    (result,) = of_type(events, AgentResultEvent)
    assert result.result.generate_reason is GenerateReason.INTERRUPTED
    assert model.calls == []
