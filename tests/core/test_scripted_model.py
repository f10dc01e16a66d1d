"""SEMANTICS.md section 1: the pinned ScriptedModel (offline ChatModel)."""

from __future__ import annotations

import asyncio
import itertools
import time

from conftest import make_agent, of_type, stream_error, stream_events

from rx_agent import (
    ChatModel,
    ModelCallInput,
    ScriptedModel,
    TextBlockDeltaEvent,
    ThinkingBlock,
    ThinkingBlockDeltaEvent,
    ToolCallStartEvent,
    ToolUseBlock,
)


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
