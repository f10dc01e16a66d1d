"""The four ways to call, cold Observables, threads and loops (docs/getting-started.md,
docs/internals.md "Threading")."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import reactivex.operators as ops
from conftest import (
    add_toolkit,
    astream_events,
    call_add,
    make_agent,
    result_msg,
    role_of,
    run_stream,
    type_names,
)

from rx_agent import (
    AgentEndEvent,
    AgentStartEvent,
    ExtensionPoint,
    MiddlewareBase,
    Msg,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    tool,
)


def test_stream_from_plain_sync_code_with_to_list_run() -> None:
    agent = make_agent(ScriptedModel(["hello"]))
    events = agent.stream("hi").pipe(ops.to_list()).run()
    assert isinstance(events[0], AgentStartEvent)
    assert isinstance(events[-1], AgentEndEvent)
    assert result_msg(events).text == "hello"


def test_call_emits_exactly_one_msg() -> None:
    agent = make_agent(ScriptedModel(["hello"]))
    items = agent.call("hi").pipe(ops.to_list()).run()
    assert len(items) == 1
    assert isinstance(items[0], Msg)
    assert items[0].text == "hello"


def test_call_sync_returns_the_final_msg() -> None:
    msg = make_agent(ScriptedModel(["hello"])).call_sync("hi")
    assert isinstance(msg, Msg)
    assert msg.text == "hello"
    assert role_of(msg) == "assistant"


async def test_acall_returns_the_final_msg() -> None:
    msg = await asyncio.wait_for(make_agent(ScriptedModel(["hello"])).acall("hi"), 3)
    assert msg.text == "hello"


async def test_astream_yields_the_same_events_as_stream() -> None:
    plain = await astream_events(
        make_agent(ScriptedModel([[call_add()], "x"]), toolkit=add_toolkit())
    )
    agent = make_agent(ScriptedModel([[call_add()], "x"]), toolkit=add_toolkit())
    collected = [e async for e in agent.astream("hi")]
    assert type_names(collected) == type_names(plain)


async def test_awaiting_stream_inside_a_loop_works() -> None:
    agent = make_agent(ScriptedModel(["hello"]))
    events = await asyncio.wait_for(_await(agent.stream("hi").pipe(ops.to_list())), 3)
    assert result_msg(events).text == "hello"


async def test_awaiting_call_inside_a_loop_returns_the_msg() -> None:
    agent = make_agent(ScriptedModel(["hello"]))
    msg = await asyncio.wait_for(_await(agent.call("hi")), 3)
    assert msg.text == "hello"


async def _await(observable):  # type: ignore[no-untyped-def]
    return await observable


async def test_astream_early_break_disposes_the_call() -> None:
    model = ScriptedModel([["a", "b", "c", "d", "e", "f", "g", "h"], "next"], delay=0.02)
    seen_by_middleware: list = []

    class Watch(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_MODEL_CALL}

        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.do_action(on_next=seen_by_middleware.append))

    agent = make_agent(model, middlewares=[Watch()])
    ctx = RuntimeContext(session_id="brk")
    async for event in agent.astream("hi", ctx):
        if isinstance(event, TextBlockDeltaEvent):
            break
    count = len(seen_by_middleware)
    await asyncio.sleep(0.15)
    assert len(seen_by_middleware) == count, "the model kept streaming after the break"
    msg = await asyncio.wait_for(agent.acall("again", ctx), 3)
    assert msg.text == "next"


async def test_cancelling_acall_disposes_the_call() -> None:
    model = ScriptedModel([["a", "b", "c", "d", "e", "f", "g", "h"], "next"], delay=0.02)
    agent = make_agent(model)
    ctx = RuntimeContext(session_id="cancel")
    task = asyncio.ensure_future(agent.acall("hi", ctx))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    msg = await asyncio.wait_for(agent.acall("again", ctx), 3)
    assert msg.text == "next"


# -- cold --------------------------------------------------------------------------------------


def test_stream_is_cold_nothing_runs_before_subscribe() -> None:
    model = ScriptedModel(["a"])
    fired: list = []

    class Ready(MiddlewareBase):
        def on_agent_state_ready(self, agent, ctx, state, input_messages):  # type: ignore[no-untyped-def]
            fired.append(1)

    agent = make_agent(model, middlewares=[Ready()])
    agent.stream("hi")
    agent.call("hi")
    time.sleep(0.05)
    assert model.calls == []
    assert fired == []


def test_each_subscription_of_stream_is_one_execution() -> None:
    model = ScriptedModel(["a", "b"])
    observable = make_agent(model).stream("hi")
    first, second = run_stream(observable), run_stream(observable)
    assert (result_msg(first).text, result_msg(second).text) == ("a", "b")
    assert len(model.calls) == 2


def test_each_subscription_of_call_is_one_execution() -> None:
    model = ScriptedModel(["a", "b"])
    observable = make_agent(model).call("hi")
    assert [run_stream(observable)[0].text, run_stream(observable)[0].text] == ["a", "b"]


def test_each_subscription_gets_its_own_call_reply_id() -> None:
    observable = make_agent(ScriptedModel(["a", "b"])).stream("hi")
    first, second = run_stream(observable), run_stream(observable)
    assert first[0].reply_id != second[0].reply_id


# -- input shapes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("msgs", "expected"),
    [
        ("plain text", ["plain text"]),
        (Msg("user", "one msg"), ["one msg"]),
        ([Msg("user", "first"), Msg("user", "second")], ["first", "second"]),
        (None, []),
    ],
    ids=["str", "msg", "list", "none"],
)
def test_accepted_input_shapes(msgs, expected) -> None:  # type: ignore[no-untyped-def]
    model = ScriptedModel(["ok"])
    run_stream(make_agent(model).stream(msgs))
    assert [m.text for m in model.calls[0].messages] == expected


def test_str_input_is_a_user_message() -> None:
    model = ScriptedModel(["ok"])
    run_stream(make_agent(model).stream("hi"))
    assert role_of(model.calls[0].messages[-1]) == "user"


# -- threads -----------------------------------------------------------------------------------


def test_call_sync_from_several_plain_threads() -> None:
    model = ScriptedModel(["ok"] * 4, delay=0.01)
    agent = make_agent(model)
    results: list = []
    errors: list = []

    def worker(n: int) -> None:
        try:
            results.append(agent.call_sync("hi", RuntimeContext(session_id=f"t{n}")).text)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert errors == []
    assert results == ["ok"] * 4


def test_async_tools_and_delayed_models_work_without_a_caller_loop() -> None:
    @tool
    async def slow_echo(text: str) -> str:
        """Echo after a pause."""
        await asyncio.sleep(0.01)
        return text.upper()

    from rx_agent import Toolkit, ToolUseBlock

    toolkit = Toolkit()
    toolkit.register_tool(slow_echo)
    model = ScriptedModel([[ToolUseBlock("c1", "slow_echo", {"text": "hey"})], "done"], delay=0.01)
    msg = make_agent(model, toolkit=toolkit).call_sync("hi")
    assert msg.text == "done"
    assert "HEY" in [
        b.output for m in model.calls[1].messages for b in m.content if hasattr(b, "output")
    ]


def test_stream_subscribed_from_a_thread_with_its_own_running_loop() -> None:
    out: list = []

    def worker() -> None:
        async def main() -> None:
            agent = make_agent(ScriptedModel(["from loop thread"], delay=0.01))
            out.append(await asyncio.wait_for(agent.acall("hi"), 3))

        asyncio.run(main())

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(5)
    assert [m.text for m in out] == ["from loop thread"]


# -- many concurrent calls on one loop ---------------------------------------------------------


async def test_many_concurrent_calls_overlap_without_a_thread_each() -> None:
    delay = 0.03
    single_agent = make_agent(ScriptedModel(["ok"], delay=delay))
    start = time.perf_counter()
    await asyncio.wait_for(single_agent.acall("hi"), 3)
    one_call = time.perf_counter() - start

    n = 200
    agent = make_agent(ScriptedModel(["ok"] * n, delay=delay))
    baseline = threading.active_count()
    peak = [baseline]

    async def sample() -> None:
        while True:
            peak[0] = max(peak[0], threading.active_count())
            await asyncio.sleep(0.005)

    sampler = asyncio.ensure_future(sample())
    start = time.perf_counter()
    msgs = await asyncio.wait_for(
        asyncio.gather(*(agent.acall("hi", RuntimeContext(session_id=f"s{i}")) for i in range(n))),
        10,
    )
    elapsed = time.perf_counter() - start
    sampler.cancel()
    assert [m.text for m in msgs] == ["ok"] * n
    # Run one after another they would take n * one_call (about 18 s); overlapped they take
    # about one call's time. A tenth of the serial time keeps the check meaningful on a
    # loaded machine (speed itself is measured in benchmarks/, not here).
    assert elapsed < n * one_call / 10, (elapsed, one_call)
    assert peak[0] <= baseline + 4, f"threads grew from {baseline} to {peak[0]}"


async def test_astream_raises_the_calls_error() -> None:
    class Down(Exception):
        pass

    agent = make_agent(ScriptedModel([Down("no model")]), max_retries=1)
    with pytest.raises(Down):
        async for _ in agent.astream("hi"):
            pass
