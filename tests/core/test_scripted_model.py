"""ScriptedModel, the offline ChatModel (docs/models.md)."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import time
import weakref

from conftest import make_agent, of_type, stream_error, stream_events

from rx_agent import (
    ChatModel,
    ModelCallInput,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    ThinkingBlock,
    ThinkingBlockDeltaEvent,
    ToolCallStartEvent,
    ToolUseBlock,
)
from rx_agent._rx import subscribe_observer


def test_is_a_chat_model_with_default_name() -> None:
    model = ScriptedModel(["x"])
    assert isinstance(model, ChatModel)
    assert model.name == "scripted"
    assert ScriptedModel(["x"], "custom").name == "custom"


def test_str_entry_is_one_text_delta() -> None:
    events = stream_events(make_agent(ScriptedModel(["whole answer"])))
    assert [e.delta for e in of_type(events, TextBlockDeltaEvent)] == ["whole answer"]


def test_list_entry_items_are_deltas_in_order() -> None:
    script = [[ThinkingBlock("hmm"), "a", "b", ToolUseBlock("c1", "nope", {})], "done"]
    events = stream_events(make_agent(ScriptedModel(script)))
    first_call = events[: events.index(of_type(events, ToolCallStartEvent)[0]) + 1]
    assert [e.delta for e in of_type(first_call, ThinkingBlockDeltaEvent)] == ["hmm"]
    assert [e.delta for e in of_type(first_call, TextBlockDeltaEvent)] == ["a", "b"]
    assert of_type(first_call, ToolCallStartEvent)[0].tool_call_id == "c1"


def test_calls_record_model_call_inputs() -> None:
    model = ScriptedModel(["x"])
    stream_events(make_agent(model), "hello")
    (call,) = model.calls
    assert isinstance(call, ModelCallInput)
    assert call.messages[-1].text == "hello"
    assert call.model is model


def test_bare_exception_fails_the_call_before_any_chunk() -> None:
    model = ScriptedModel([KeyError("nope")])
    events, error = stream_error(make_agent(model, max_retries=1).stream("hi"))
    assert isinstance(error, KeyError)
    assert of_type(events, TextBlockDeltaEvent) == []


def test_exception_item_fails_after_the_items_before_it() -> None:
    model = ScriptedModel([["a", "b", ValueError("late")]])
    events, error = stream_error(make_agent(model, max_retries=1).stream("hi"))
    assert isinstance(error, ValueError)
    assert [e.delta for e in of_type(events, TextBlockDeltaEvent)] == ["a", "b"]


def test_delay_passes_before_each_chunk() -> None:
    agent = make_agent(ScriptedModel([["a", "b", "c"]], delay=0.02))
    start = time.perf_counter()
    stream_events(agent)
    assert time.perf_counter() - start >= 0.06


async def test_delay_does_not_block_the_event_loop() -> None:
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.005)

    task = asyncio.ensure_future(ticker())
    agent = make_agent(ScriptedModel([["a", "b", "c", "d"]], delay=0.02))
    await asyncio.wait_for(agent.acall("hi"), 3)
    task.cancel()
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) >= 8
    assert max(gaps) < 0.02


def test_running_past_the_script_names_the_problem() -> None:
    model = ScriptedModel([])
    _, error = stream_error(make_agent(model, max_retries=1).stream("hi"))
    text = str(error).lower()
    assert "script" in text or "response" in text


async def test_concurrent_delayed_calls_share_one_loop_timer() -> None:
    # Every playback of one delay waits on one ticker: asyncio's timer heap holds one
    # entry for them all instead of one per call in flight.
    loop = asyncio.get_running_loop()
    agent = make_agent(ScriptedModel([["a", "b"]] * 50, delay=0.01))
    calls = asyncio.gather(*(agent.acall("hi", RuntimeContext(session_id=f"s{i}"))
                             for i in range(50)))
    await asyncio.sleep(0.015)
    pending = [h for h in loop._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
    assert len(pending) <= 2
    results = await asyncio.wait_for(calls, 5)
    assert [r.text for r in results] == ["ab"] * 50


async def test_a_delayed_step_runs_in_the_subscribers_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[str] = []
    model = ScriptedModel([["a", "b"], ["c"]], delay=0.005)
    done = [asyncio.get_running_loop().create_future() for _ in range(2)]
    for i, value in enumerate(["first", "second"]):
        var.set(value)
        model.stream([]).subscribe(lambda _, v=value: seen.append(f"{v}:{var.get()}"),
                                   done[i].set_exception, lambda i=i: done[i].set_result(None))
    await asyncio.wait_for(asyncio.gather(*done), 3)
    firsts = [s for s in seen if s.startswith("first")]
    seconds = [s for s in seen if s.startswith("second")]
    assert set(firsts) == {"first:first"} and set(seconds) == {"second:second"}


async def test_a_failing_step_is_reported_and_the_other_playbacks_go_on() -> None:
    loop = asyncio.get_running_loop()
    reported: list[BaseException] = []
    loop.set_exception_handler(lambda _, context: reported.append(context["exception"]))
    model = ScriptedModel([["a", "b", "c"], ["x", "y", "z"]], delay=0.005)
    good: list[str] = []
    done = loop.create_future()

    def bad(_: object) -> None:
        raise RuntimeError("subscriber bug")

    model.stream([]).subscribe(bad, lambda _: None)
    model.stream([]).subscribe(lambda c: good.append(getattr(c, "text", "")),
                               done.set_exception, lambda: done.set_result(None))
    try:
        await asyncio.wait_for(done, 3)
    finally:
        loop.set_exception_handler(None)
    assert "".join(good) == "xyz"
    assert reported and all(str(e) == "subscriber bug" for e in reported)


async def test_a_disposed_playback_emits_nothing_more() -> None:
    model = ScriptedModel([["a", "b", "c", "d"]], delay=0.005)
    got: list[str] = []
    subscription = model.stream([]).subscribe(lambda c: got.append(getattr(c, "text", "")))
    while not got:
        await asyncio.sleep(0.001)
    subscription.dispose()
    seen = len(got)
    await asyncio.sleep(0.05)
    assert len(got) == seen < 4


async def test_a_disposed_playback_lets_its_observer_go_at_once() -> None:
    class Observer:
        def on_next(self, value: object) -> None:
            pass

        def on_error(self, error: Exception) -> None:
            pass

        def on_completed(self) -> None:
            pass

    observer = Observer()
    gone = weakref.ref(observer)
    # The runtime's own observer, as is (the way a call subscribes its model stream).
    subscription = subscribe_observer(ScriptedModel([["a", "b"]], delay=30).stream([]),
                                      observer)
    del observer
    subscription.dispose()  # its chunk is due in 30 s; nothing must hold the call till then
    assert gone() is None
