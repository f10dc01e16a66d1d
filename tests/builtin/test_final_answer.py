"""FinalAnswerFilterMiddleware: only the final round's text reaches the caller."""

from __future__ import annotations

import asyncio

import reactivex
import reactivex.operators as ops
from reactivex import Observable

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    FinalAnswerFilterMiddleware,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReasoningInput,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlock,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolUseBlock,
)

from .conftest import call, events_of, make_agent


def texts(events: list[AgentEvent]) -> list[str]:
    return [e.delta for e in events if isinstance(e, TextBlockDeltaEvent)]


def names(events: list[AgentEvent]) -> list[str]:
    return [type(e).__name__ for e in events]


async def test_active_point_is_reasoning_only() -> None:
    assert set(FinalAnswerFilterMiddleware().active_points()) == {ExtensionPoint.ON_REASONING}


async def test_text_of_tool_rounds_is_suppressed() -> None:
    model = ScriptedModel([
        ["Let me add that.", ToolUseBlock("c1", "add", {"a": 1, "b": 2})],
        ["Still checking...", ToolUseBlock("c2", "add", {"a": 3, "b": 0})],
        ["The answer ", "is 3."],
    ])
    agent = make_agent(model, middlewares=[FinalAnswerFilterMiddleware()])

    events = await events_of(agent)

    assert texts(events) == ["The answer ", "is 3."]
    # Tool calls and results still stream.
    assert [e.tool_call_id for e in events if isinstance(e, ToolCallStartEvent)] == ["c1", "c2"]
    assert len([e for e in events if isinstance(e, ToolResultEndEvent)]) == 2
    # Only one text block reaches the caller: the final round's.
    assert len([e for e in events if isinstance(e, TextBlockStartEvent)]) == 1


async def test_final_text_arrives_right_before_model_call_end() -> None:
    model = ScriptedModel([["Hello", " world"]])
    agent = make_agent(model, middlewares=[FinalAnswerFilterMiddleware()])
    events = await events_of(agent)
    end = next(i for i, e in enumerate(events) if isinstance(e, ModelCallEndEvent))
    assert names(events[end - 4:end + 1]) == [
        "TextBlockStartEvent", "TextBlockDeltaEvent", "TextBlockDeltaEvent",
        "TextBlockEndEvent", "ModelCallEndEvent",
    ]


async def test_without_tools_the_stream_is_the_same_apart_from_timing() -> None:
    script = [[ThinkingBlock("hmm"), "Hi", " there"]]
    plain = await events_of(make_agent(ScriptedModel(script)))
    filtered = await events_of(make_agent(ScriptedModel(script),
                                          middlewares=[FinalAnswerFilterMiddleware()]))
    assert sorted(names(filtered)) == sorted(names(plain))
    assert texts(filtered) == texts(plain) == ["Hi", " there"]


async def test_other_events_pass_through_before_the_round_ends() -> None:
    model = ScriptedModel([[ThinkingBlock("plan"), "narration",
                            ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "done"])
    agent = make_agent(model, middlewares=[FinalAnswerFilterMiddleware()])
    events = await events_of(agent)
    first_end = next(i for i, e in enumerate(events) if isinstance(e, ModelCallEndEvent))
    before = names(events[:first_end])
    assert "ThinkingBlockDeltaEvent" in before
    assert "ToolCallStartEvent" in before
    assert "TextBlockDeltaEvent" not in before


async def test_the_context_keeps_the_narration() -> None:
    model = ScriptedModel([["Let me add.", ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "3"])
    agent = make_agent(model, middlewares=[FinalAnswerFilterMiddleware()])
    ctx = RuntimeContext(session_id="narration")
    assert (await call(agent, "1+2?", ctx)).text == "3"
    assert ctx.agent_state is not None
    assert [m.text for m in ctx.agent_state.context if m.role.value == "assistant"] == [
        "Let me add.", "3",
    ]


async def test_the_model_sees_the_narration_next_round() -> None:
    model = ScriptedModel([["Let me add.", ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "3"])
    agent = make_agent(model, middlewares=[FinalAnswerFilterMiddleware()])
    await call(agent)
    assert any(m.text == "Let me add." for m in model.calls[1].messages)


# -- the operator itself, on hand-made streams ------------------------------------------


def run_filter(events: list[AgentEvent], error: Exception | None = None) -> tuple[
    list[AgentEvent], list[Exception]
]:
    mw = FinalAnswerFilterMiddleware()
    source: Observable[AgentEvent] = reactivex.from_iterable(events)
    if error is not None:
        source = reactivex.concat(source, reactivex.throw(error))
    out = mw.on_reasoning(None, RuntimeContext(), ReasoningInput(()), lambda _: source)  # type: ignore[arg-type]
    got: list[AgentEvent] = []
    errors: list[Exception] = []
    out.subscribe(got.append, errors.append)
    return got, errors


def start(r: str = "r") -> ModelCallStartEvent:
    return ModelCallStartEvent(reply_id=r)


def end(r: str = "r") -> ModelCallEndEvent:
    return ModelCallEndEvent(reply_id=r)


def text(delta: str, r: str = "r") -> list[AgentEvent]:
    return [TextBlockStartEvent(reply_id=r, block_id="text"),
            TextBlockDeltaEvent(reply_id=r, block_id="text", delta=delta),
            TextBlockEndEvent(reply_id=r, block_id="text")]


def tool_start(r: str = "r") -> ToolCallStartEvent:
    return ToolCallStartEvent(reply_id=r, tool_call_id="c", tool_call_name="add")


def test_text_after_a_tool_call_in_the_same_call_is_dropped() -> None:
    got, _ = run_filter([start(), tool_start(), *text("late"), end()])
    assert texts(got) == []
    assert names(got) == ["ModelCallStartEvent", "ToolCallStartEvent", "ModelCallEndEvent"]


def test_a_new_model_call_in_the_same_step_is_judged_alone() -> None:
    # A retrying middleware below: the first call made a tool call, the second did not.
    got, _ = run_filter([start("1"), *text("a"), tool_start("1"), end("1"),
                         start("2"), *text("b", "2"), end("2")])
    assert texts(got) == ["b"]


def test_a_step_that_ends_without_model_call_end_flushes_final_text() -> None:
    got, _ = run_filter([*text("short-circuit answer")])
    assert texts(got) == ["short-circuit answer"]


def test_an_error_drops_the_held_text() -> None:
    got, errors = run_filter([start(), *text("partial")], RuntimeError("boom"))
    assert texts(got) == []
    assert [str(e) for e in errors] == ["boom"]


def test_resubscribing_starts_with_an_empty_buffer() -> None:
    mw = FinalAnswerFilterMiddleware()
    source = reactivex.from_iterable([start(), *text("x"), end()])
    out = mw.on_reasoning(None, RuntimeContext(), ReasoningInput(()), lambda _: source)  # type: ignore[arg-type]
    first = out.pipe(ops.to_list()).run()
    second = out.pipe(ops.to_list()).run()
    assert texts(first) == texts(second) == ["x"]


async def test_one_instance_serves_concurrent_calls() -> None:
    mw = FinalAnswerFilterMiddleware()

    async def one(i: int) -> list[str]:
        model = ScriptedModel([[f"narration {i}", ToolUseBlock(f"c{i}", "add", {"a": i, "b": 0})],
                               ["answer ", f"{i}"]], delay=0.002)
        agent = make_agent(model, name=f"agent-{i}", middlewares=[mw])
        return texts(await events_of(agent))

    results = await asyncio.gather(*(one(i) for i in range(10)))
    assert results == [["answer ", f"{i}"] for i in range(10)]
