"""Span names, tree shape and GenAI attributes of OtelTracingMiddleware."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.trace import SpanKind, StatusCode
from reactivex import Observable

from rx_agent import (
    ChatModel,
    ExtensionPoint,
    GenerateOptions,
    MiddlewareBase,
    ModelCallInput,
    Msg,
    OtelTracingMiddleware,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
    tool,
)
from rx_agent.message import ChatUsage
from rx_agent.model.base import FinishChunk, ModelChunk, TextChunk, UsageChunk

from .conftest import Recorder, attrs


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def make_agent(model: ChatModel, mw: OtelTracingMiddleware, **kwargs: Any) -> ReActAgent:
    kwargs.setdefault("toolkit", Toolkit([add, shout]))
    kwargs.setdefault("retry_backoff", (0.0, 0.0))
    return ReActAgent(name="helper", model=model, middlewares=[mw], **kwargs)


async def run(agent: ReActAgent, msgs: Any = "hi", ctx: RuntimeContext | None = None) -> Msg:
    return await asyncio.wait_for(agent.acall(msgs, ctx), 5)


async def test_active_points_are_agent_model_call_and_acting() -> None:
    assert set(OtelTracingMiddleware().active_points()) == {
        ExtensionPoint.ON_AGENT, ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_ACTING,
    }


async def test_one_reply_builds_the_span_tree(recorder: Recorder) -> None:
    model = ScriptedModel([[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "three"], name="m-1")
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider))

    assert (await run(agent, "1+2?", RuntimeContext(session_id="s-9"))).text == "three"

    assert sorted(recorder.tree()) == sorted([
        ("chat m-1", "invoke_agent helper"),
        ("execute_tool add", "invoke_agent helper"),  # the batch
        ("execute_tool add", "execute_tool add"),  # its one call
        ("chat m-1", "invoke_agent helper"),
        ("invoke_agent helper", None),
    ])
    root = recorder.one("invoke_agent")
    assert {s.context.trace_id for s in recorder.spans} == {root.context.trace_id}
    assert all(s.status.status_code is StatusCode.OK for s in recorder.spans)
    recorder.counter.assert_each_ended_once()
    # Children start and end inside the agent span.
    for child in recorder.children(root):
        assert root.start_time <= child.start_time <= child.end_time <= root.end_time
    batch = recorder.batch()
    (call,) = recorder.tool_calls(batch)
    assert batch.start_time <= call.start_time <= call.end_time <= batch.end_time


async def test_agent_span_attributes(recorder: Recorder) -> None:
    model = ScriptedModel(["hello"], name="m-1")
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider))

    await run(agent, "hi", RuntimeContext(session_id="s-1", user_id="u-7", run_id="r-1"))

    span = recorder.one("invoke_agent")
    assert span.name == "invoke_agent helper"
    assert span.kind is SpanKind.INTERNAL
    a = attrs(span)
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "helper"
    assert a["gen_ai.agent.id"] == "helper"
    assert a["gen_ai.conversation.id"] == "s-1"
    assert a["gen_ai.provider.name"] == "scripted"
    assert a["gen_ai.request.model"] == "m-1"
    assert a["user.id"] == "u-7"
    assert a["rx_agent.run_id"] == "r-1"
    assert a["rx_agent.generate_reason"] == "MODEL_STOP"
    assert a["rx_agent.reply_id"]
    # The agent span sums the usage of its model calls.
    chat = attrs(recorder.one("chat"))
    assert a["gen_ai.usage.input_tokens"] == chat["gen_ai.usage.input_tokens"] > 0
    assert a["gen_ai.usage.output_tokens"] == chat["gen_ai.usage.output_tokens"] > 0


async def test_session_defaults_to_the_agent_name(recorder: Recorder) -> None:
    agent = make_agent(ScriptedModel(["ok"]), OtelTracingMiddleware(recorder.provider))
    await run(agent)
    assert attrs(recorder.one("invoke_agent"))["gen_ai.conversation.id"] == "helper"


async def test_chat_span_attributes(recorder: Recorder) -> None:
    model = ScriptedModel([[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "three"], name="m-1")
    options = GenerateOptions(temperature=0.2, max_tokens=256, top_p=0.9, stop=("END",),
                              extra={"seed": 7, "top_k": 40})
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider), generate_options=options)

    await run(agent, "1+2?", RuntimeContext(session_id="s-2"))

    first, second = recorder.named("chat")
    assert first.kind is SpanKind.CLIENT
    a = attrs(first)
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "scripted"
    assert a["gen_ai.request.model"] == "m-1"
    assert a["gen_ai.agent.name"] == "helper"
    assert a["gen_ai.conversation.id"] == "s-2"
    assert a["gen_ai.request.temperature"] == 0.2
    assert a["gen_ai.request.max_tokens"] == 256
    assert a["gen_ai.request.top_p"] == 0.9
    assert a["gen_ai.request.stop_sequences"] == ("END",)
    assert a["gen_ai.request.seed"] == 7
    assert a["gen_ai.request.top_k"] == 40
    assert a["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert a["gen_ai.usage.input_tokens"] > 0
    assert a["gen_ai.usage.output_tokens"] > 0
    assert a["gen_ai.response.time_to_first_chunk"] >= 0
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)
    # No content unless asked for.
    for span in recorder.spans:
        assert not any(k in attrs(span) for k in (
            "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
        )), span.name


class CachingModel(ChatModel):
    """Reports cached and reasoning tokens, like providers with prompt caching do."""

    name = "cache-model"
    provider = "acme"

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        import reactivex

        usage = ChatUsage(input_tokens=120, output_tokens=30, cached_tokens=100,
                          reasoning_tokens=12)
        return reactivex.of(TextChunk("ok"), UsageChunk(usage), FinishChunk("stop"))


async def test_cached_and_reasoning_tokens(recorder: Recorder) -> None:
    agent = make_agent(CachingModel(), OtelTracingMiddleware(recorder.provider))
    await run(agent)
    for span in (recorder.one("chat"), recorder.one("invoke_agent")):
        a = attrs(span)
        assert a["gen_ai.provider.name"] == "acme"
        assert a["gen_ai.usage.input_tokens"] == 120
        assert a["gen_ai.usage.output_tokens"] == 30
        assert a["gen_ai.usage.cache_read.input_tokens"] == 100
        assert a["gen_ai.usage.reasoning.output_tokens"] == 12


async def test_tool_span_attributes(recorder: Recorder) -> None:
    model = ScriptedModel([[ToolUseBlock("call-1", "add", {"a": 1, "b": 2})], "three"])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider))

    await run(agent, "1+2?", RuntimeContext(session_id="s-3"))

    batch = recorder.batch()
    (call,) = recorder.tool_calls(batch)
    for span in (batch, call):
        assert span.name == "execute_tool add"
        assert span.kind is SpanKind.INTERNAL
        assert span.status.status_code is StatusCode.OK
        a = attrs(span)
        assert a["gen_ai.operation.name"] == "execute_tool"
        assert a["gen_ai.agent.name"] == "helper"
        assert a["gen_ai.tool.name"] == "add"
        assert a["gen_ai.tool.call.id"] == "call-1"
        assert a["gen_ai.tool.type"] == "function"
        assert a["gen_ai.tool.description"] == "Add two integers."
        assert a["gen_ai.conversation.id"] == "s-3"
        assert "rx_agent.tool.names" not in a
    assert attrs(batch)["rx_agent.tool.states"] == ("SUCCESS",)
    assert attrs(call)["rx_agent.tool.state"] == "SUCCESS"
    recorder.counter.assert_each_ended_once()


async def test_a_batch_span_names_every_call_and_has_a_span_per_call(
    recorder: Recorder,
) -> None:
    batch_calls = [
        ToolUseBlock("c1", "add", {"a": 1, "b": 2}),
        ToolUseBlock("c2", "shout", {"text": "x"}),
        ToolUseBlock("c3", "add", {"a": 3, "b": 4}),
    ]
    agent = make_agent(ScriptedModel([batch_calls, "done"]),
                       OtelTracingMiddleware(recorder.provider))

    await run(agent)

    batch = recorder.batch()
    assert batch.name == "execute_tool add (+2 more)"
    a = attrs(batch)
    # The conventions type these as strings: every call, comma-joined.
    assert a["gen_ai.tool.name"] == "add,shout,add"
    assert a["gen_ai.tool.call.id"] == "c1,c2,c3"
    assert "gen_ai.tool.description" not in a  # of which call?
    assert a["rx_agent.tool.names"] == ("add", "shout", "add")
    assert a["rx_agent.tool.call.ids"] == ("c1", "c2", "c3")
    assert a["rx_agent.tool.states"] == ("SUCCESS", "SUCCESS", "SUCCESS")

    calls = recorder.tool_calls(batch)
    assert [(s.name, attrs(s)["gen_ai.tool.call.id"]) for s in calls] == [
        ("execute_tool add", "c1"), ("execute_tool shout", "c2"), ("execute_tool add", "c3"),
    ]
    for call in calls:
        assert call.parent is not None and call.parent.span_id == batch.context.span_id
        assert batch.start_time <= call.start_time <= call.end_time <= batch.end_time
        assert attrs(call)["gen_ai.tool.name"] in ("add", "shout")
        assert attrs(call)["gen_ai.tool.description"] in ("Add two integers.",
                                                          "Upper-case a text.")
        assert attrs(call)["rx_agent.tool.state"] == "SUCCESS"
    # Sequential calls: each ends before the next starts.
    for before, after in itertools.pairwise(calls):
        assert before.end_time <= after.start_time
    recorder.counter.assert_each_ended_once()


async def test_a_failing_tool_fails_its_call_span_not_the_batch(recorder: Recorder) -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    batch_calls = [ToolUseBlock("c1", "broken", {}), ToolUseBlock("c2", "add", {"a": 1, "b": 1})]
    model = ScriptedModel([batch_calls, "sorry"])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider),
                       toolkit=Toolkit([broken, add]))

    assert (await run(agent)).text == "sorry"

    batch = recorder.batch()
    # The loop goes on (the model reads the error), so the batch's stream completed.
    assert batch.status.status_code is StatusCode.OK
    assert attrs(batch)["rx_agent.tool.states"] == ("ERROR", "SUCCESS")
    failed, fine = recorder.tool_calls(batch)
    assert failed.name == "execute_tool broken"
    assert failed.status.status_code is StatusCode.ERROR
    assert attrs(failed)["error.type"] == "tool_error"
    assert attrs(failed)["rx_agent.tool.state"] == "ERROR"
    assert "disk on fire" not in str(failed.status.description)  # content stays out
    assert fine.status.status_code is StatusCode.OK


async def test_denied_calls_are_noted_on_their_spans(recorder: Recorder) -> None:
    from rx_agent import ConfirmResult, UserConfirmResultEvent
    from rx_agent.message import GenerateReason

    @tool(permission="ask")
    def wipe(path: str) -> str:
        """Delete a path."""
        return "wiped"

    model = ScriptedModel([[ToolUseBlock("c1", "wipe", {"path": "/"})], "ok, I will not"])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider), toolkit=Toolkit([wipe]))
    ctx = RuntimeContext(session_id="s-deny")
    paused = await run(agent, "wipe it", ctx)
    assert paused.generate_reason is GenerateReason.PERMISSION_ASKING
    answer = UserConfirmResultEvent(
        reply_id=paused.metadata["reply_id"],
        confirm_results=[ConfirmResult(paused.tool_calls[0], False, reason="no")],
    )
    assert (await run(agent, answer, ctx)).text == "ok, I will not"

    batch = recorder.batch()
    (call,) = recorder.tool_calls(batch)
    assert call.name == "execute_tool wipe"
    assert call.status.status_code is StatusCode.OK
    assert attrs(call)["rx_agent.tool.state"] == "DENIED"
    assert attrs(batch)["rx_agent.tool.states"] == ("DENIED",)


async def test_an_interrupted_result_is_noted_not_an_error(recorder: Recorder) -> None:
    @tool
    def gave_up() -> ToolResultBlock:
        """Stops part-way and says so."""
        return ToolResultBlock("c1", "gave_up", "stopped early", ToolResultState.INTERRUPTED)

    model = ScriptedModel([[ToolUseBlock("c1", "gave_up", {})], "fine"])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider),
                       toolkit=Toolkit([gave_up]))
    await run(agent)
    (call,) = recorder.tool_calls()
    assert call.status.status_code is StatusCode.OK
    assert attrs(call)["rx_agent.tool.state"] == "INTERRUPTED"


async def test_on_model_call_accepts_options_none(recorder: Recorder) -> None:
    class NoOptions(MiddlewareBase):
        """Java code may pass null options; the port's records accept None too."""

        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_MODEL_CALL}

        def order(self) -> int:
            return 10  # outside the tracing middleware

        def on_model_call(
            self, agent: Any, ctx: Any, input: ModelCallInput, next: Any
        ) -> Observable[Any]:
            return next(input.with_(options=None))  # type: ignore[arg-type]

    agent = ReActAgent(name="helper", model=ScriptedModel(["ok"]),
                       middlewares=[NoOptions(), OtelTracingMiddleware(recorder.provider)])

    assert (await run(agent)).text == "ok"

    chat = recorder.one("chat")
    assert chat.status.status_code is StatusCode.OK
    assert not any(k.startswith("gen_ai.request.t") for k in attrs(chat))


async def test_content_is_recorded_only_when_asked(recorder: Recorder) -> None:
    model = ScriptedModel([
        ["Let me add.", ToolUseBlock("c1", "add", {"a": 1, "b": 2})],
        "It is 3.",
    ])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider, record_content=True),
                       sys_prompt="You add numbers.")

    await run(agent, "What is 1+2?")

    first, second = recorder.named("chat")
    a = attrs(first)
    assert json.loads(a["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "You add numbers."}
    ]
    assert json.loads(a["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "What is 1+2?"}]}
    ]
    assert json.loads(a["gen_ai.output.messages"]) == [{
        "role": "assistant",
        "parts": [
            {"type": "text", "content": "Let me add."},
            {"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}},
        ],
        "finish_reason": "tool_calls",
    }]
    history = json.loads(attrs(second)["gen_ai.input.messages"])
    assert history[-1] == {
        "role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "3"}],
    }

    batch = recorder.batch()
    (call,) = recorder.tool_calls(batch)
    assert json.loads(attrs(call)["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
    assert attrs(call)["gen_ai.tool.call.result"] == "3"
    # Content is on the calls' spans only, not repeated on the batch.
    assert "gen_ai.tool.call.arguments" not in attrs(batch)
    assert "gen_ai.tool.call.result" not in attrs(batch)

    root = attrs(recorder.one("invoke_agent"))
    assert json.loads(root["gen_ai.input.messages"])[0]["parts"][0]["content"] == "What is 1+2?"
    output = json.loads(root["gen_ai.output.messages"])
    assert output[0]["parts"] == [{"type": "text", "content": "It is 3."}]
    assert output[0]["finish_reason"] == "model_stop"


async def test_content_of_a_batch_is_on_each_call_span(recorder: Recorder) -> None:
    batch = [ToolUseBlock("c1", "add", {"a": 1, "b": 2}),
             ToolUseBlock("c2", "shout", {"text": "x"})]
    agent = make_agent(ScriptedModel([batch, "done"]),
                       OtelTracingMiddleware(recorder.provider, record_content=True))
    await run(agent)
    first, second = (attrs(s) for s in recorder.tool_calls())
    assert json.loads(first["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
    assert first["gen_ai.tool.call.result"] == "3"
    assert json.loads(second["gen_ai.tool.call.arguments"]) == {"text": "x"}
    assert second["gen_ai.tool.call.result"] == "X"


async def test_the_event_stream_is_unchanged(recorder: Recorder) -> None:
    script = [[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], ["thr", "ee"]]
    plain = ReActAgent(name="helper", model=ScriptedModel(script), toolkit=Toolkit([add]))
    traced = make_agent(ScriptedModel(script), OtelTracingMiddleware(recorder.provider,
                                                                     record_content=True))

    def shape(events: list[Any]) -> list[tuple[str, Any]]:
        return [(type(e).__name__, getattr(e, "delta", None)) for e in events]

    expected = shape([e async for e in plain.astream("go")])
    got = shape([e async for e in traced.astream("go")])
    assert got == expected


async def test_summary_call_after_max_iters_is_a_chat_span(recorder: Recorder) -> None:
    model = ScriptedModel([[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "summary"])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider), max_iters=1)

    msg = await run(agent)

    assert msg.text == "summary"
    assert [s.name for s in recorder.named("chat")] == ["chat scripted", "chat scripted"]
    assert attrs(recorder.one("invoke_agent"))["rx_agent.generate_reason"] == "MAX_ITERATIONS"


async def test_sequential_calls_are_separate_traces(recorder: Recorder) -> None:
    agent = make_agent(ScriptedModel(["one", "two"]), OtelTracingMiddleware(recorder.provider))
    await run(agent)
    await run(agent)
    roots = recorder.named("invoke_agent")
    assert len(roots) == 2
    assert roots[0].context.trace_id != roots[1].context.trace_id
    for root in roots:
        (chat,) = recorder.children(root)
        assert chat.context.trace_id == root.context.trace_id
