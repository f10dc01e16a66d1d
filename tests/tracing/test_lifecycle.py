"""Span status and end: OK on completion, ERROR on error, ERROR "cancelled" on dispose."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import reactivex
import reactivex.operators as ops
from opentelemetry.trace import StatusCode
from reactivex import Observable

from rx_agent import (
    ActingInput,
    AgentEvent,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    OtelTracingMiddleware,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    Toolkit,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolUseBlock,
    tool,
)
from rx_agent.message import GenerateReason

from .conftest import Recorder, attrs


@tool
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "slept"


def make_agent(model: ScriptedModel, *mws: MiddlewareBase, **kwargs: Any) -> ReActAgent:
    kwargs.setdefault("toolkit", Toolkit([slow]))
    kwargs.setdefault("retry_backoff", (0.0, 0.0))
    return ReActAgent(name="helper", model=model, middlewares=list(mws), **kwargs)


async def wait_for_spans(recorder: Recorder, count: int) -> None:
    for _ in range(200):
        if len(recorder.spans) >= count:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"expected {count} spans, got {[s.name for s in recorder.spans]}")


async def test_a_failing_model_call_fails_chat_and_agent_spans(recorder: Recorder) -> None:
    model = ScriptedModel([RuntimeError("provider is down")])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider), max_retries=1)

    with pytest.raises(RuntimeError, match="provider is down"):
        await asyncio.wait_for(agent.acall("hi"), 5)

    for prefix in ("chat", "invoke_agent"):
        span = recorder.one(prefix)
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "provider is down"
        assert attrs(span)["error.type"] == "RuntimeError"
        assert [e.name for e in span.events] == ["exception"]
    recorder.counter.assert_each_ended_once()


async def test_a_failing_acting_chain_fails_the_tool_span(recorder: Recorder) -> None:
    class Broken(MiddlewareBase):
        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_ACTING}

        def order(self) -> int:
            return 0  # inside the tracing middleware

        def on_acting(self, agent: Any, ctx: Any, input: ActingInput, next: Any) -> Any:
            return reactivex.throw(ValueError("acting exploded"))

    model = ScriptedModel([[ToolUseBlock("c1", "slow", {"seconds": 0})]])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider), Broken())

    with pytest.raises(ValueError, match="acting exploded"):
        await asyncio.wait_for(agent.acall("hi"), 5)

    tool_span = recorder.batch()
    assert tool_span.name == "execute_tool slow"
    assert tool_span.status.status_code is StatusCode.ERROR
    assert tool_span.status.description == "acting exploded"
    assert recorder.tool_calls() == []  # no call started
    assert recorder.one("chat").status.status_code is StatusCode.OK
    assert recorder.one("invoke_agent").status.status_code is StatusCode.ERROR
    recorder.counter.assert_each_ended_once()


async def test_an_error_without_message_uses_the_type_name(recorder: Recorder) -> None:
    agent = make_agent(ScriptedModel([KeyError()]), OtelTracingMiddleware(recorder.provider),
                       max_retries=1)
    with pytest.raises(KeyError):
        await asyncio.wait_for(agent.acall("hi"), 5)
    assert recorder.one("chat").status.description == "KeyError"


async def test_disposing_the_call_cancels_open_spans(recorder: Recorder) -> None:
    model = ScriptedModel([["a", "b", "c", "d", "e"]], delay=0.05)
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider))
    first_delta = asyncio.Event()

    def on_next(event: AgentEvent) -> None:
        if isinstance(event, TextBlockDeltaEvent):
            first_delta.set()

    subscription = agent.stream("hi").subscribe(on_next, lambda e: None)
    await asyncio.wait_for(first_delta.wait(), 5)
    subscription.dispose()
    await wait_for_spans(recorder, 2)

    for prefix in ("chat", "invoke_agent"):
        span = recorder.one(prefix)
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "cancelled"
        assert attrs(span)["error.type"] == "cancelled"
    recorder.counter.assert_each_ended_once()


async def test_disposing_during_a_tool_cancels_the_tool_span(recorder: Recorder) -> None:
    model = ScriptedModel([[ToolUseBlock("c1", "slow", {"seconds": 5})]])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider))
    seen: list[AgentEvent] = []
    subscription = agent.stream("hi").subscribe(seen.append, lambda e: None)
    for _ in range(400):
        if any(type(e).__name__ == "ToolResultStartEvent" for e in seen):
            break
        await asyncio.sleep(0.005)
    subscription.dispose()
    await wait_for_spans(recorder, 4)

    tool_span = recorder.batch()
    assert tool_span.status.status_code is StatusCode.ERROR
    assert tool_span.status.description == "cancelled"
    (call,) = recorder.tool_calls(tool_span)
    assert call.status.status_code is StatusCode.ERROR
    assert call.status.description == "cancelled"
    assert attrs(call)["error.type"] == "cancelled"
    assert call.end_time <= tool_span.end_time
    assert recorder.one("chat").status.status_code is StatusCode.OK
    assert recorder.one("invoke_agent").status.description == "cancelled"
    recorder.counter.assert_each_ended_once()


async def test_a_batch_that_fails_mid_call_closes_the_open_call_spans(
    recorder: Recorder,
) -> None:
    class LoseTheEnd(MiddlewareBase):
        """Inside the tracing middleware: turns a call's end event into an error."""

        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_ACTING}

        def order(self) -> int:
            return 0

        def on_acting(self, agent: Any, ctx: Any, input: ActingInput, next: Any) -> Any:
            def check(event: AgentEvent) -> Observable[AgentEvent]:
                if isinstance(event, ToolResultEndEvent):
                    return reactivex.throw(ValueError("lost the result"))
                return reactivex.of(event)

            return next(input).pipe(ops.concat_map(check))

    model = ScriptedModel([[ToolUseBlock("c1", "slow", {"seconds": 0})]])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider), LoseTheEnd())

    with pytest.raises(ValueError, match="lost the result"):
        await asyncio.wait_for(agent.acall("hi"), 5)

    batch = recorder.batch()
    assert batch.status.status_code is StatusCode.ERROR
    assert batch.status.description == "lost the result"
    (call,) = recorder.tool_calls(batch)
    assert call.status.status_code is StatusCode.ERROR
    assert call.status.description == "cancelled"
    assert call.end_time <= batch.end_time
    recorder.counter.assert_each_ended_once()


async def test_interrupting_a_tool_ends_its_call_span(recorder: Recorder) -> None:
    model = ScriptedModel([[ToolUseBlock("c1", "slow", {"seconds": 5})]])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider))
    ctx = RuntimeContext(session_id="s-int-tool")
    started = asyncio.Event()

    def on_next(event: AgentEvent) -> None:
        if isinstance(event, ToolResultStartEvent):
            started.set()

    done = asyncio.get_running_loop().create_future()
    agent.stream("hi", ctx).subscribe(
        on_next, done.set_exception, lambda: done.set_result(None))
    await asyncio.wait_for(started.wait(), 5)
    assert agent.interrupt(ctx)
    await asyncio.wait_for(done, 5)

    root = recorder.one("invoke_agent")
    assert attrs(root)["rx_agent.generate_reason"] == "INTERRUPTED"
    batch = recorder.batch()
    (call,) = recorder.tool_calls(batch)
    assert call.end_time <= batch.end_time
    # The interrupt cuts the step (the call span is cancelled) or lets the batch
    # deliver an INTERRUPTED result (noted on the span); either way it ends once.
    state = attrs(call).get("rx_agent.tool.state")
    if state is None:
        assert call.status.status_code is StatusCode.ERROR
        assert call.status.description == "cancelled"
    else:
        assert state == "INTERRUPTED"
    recorder.counter.assert_each_ended_once()


async def test_interrupt_cancels_the_step_but_the_reply_completes(recorder: Recorder) -> None:
    model = ScriptedModel([["a", "b", "c", "d"]], delay=0.05)
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider))
    ctx = RuntimeContext(session_id="s-int")
    task = asyncio.ensure_future(agent.acall("hi", ctx))
    await asyncio.sleep(0.08)
    assert agent.interrupt(ctx)
    msg = await asyncio.wait_for(task, 5)

    assert msg.generate_reason is GenerateReason.INTERRUPTED
    chat = recorder.one("chat")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.status.description == "cancelled"
    root = recorder.one("invoke_agent")
    assert root.status.status_code is StatusCode.OK
    assert attrs(root)["rx_agent.generate_reason"] == "INTERRUPTED"
    recorder.counter.assert_each_ended_once()


async def test_each_resubscription_is_its_own_chat_span(recorder: Recorder) -> None:
    class RetryOutside(MiddlewareBase):
        """An outer middleware that retries the model call once (calls next twice)."""

        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_MODEL_CALL}

        def order(self) -> int:
            return 10

        def on_model_call(
            self, agent: Any, ctx: Any, input: ModelCallInput, next: Any
        ) -> Observable[AgentEvent]:
            return next(input).pipe(ops.retry(2))

    model = ScriptedModel([RuntimeError("flaky"), "ok"])
    agent = make_agent(model, RetryOutside(), OtelTracingMiddleware(recorder.provider),
                       max_retries=1)

    assert (await asyncio.wait_for(agent.acall("hi"), 5)).text == "ok"

    failed, succeeded = recorder.named("chat")
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "flaky"
    assert succeeded.status.status_code is StatusCode.OK
    root = recorder.one("invoke_agent")
    assert {s.parent.span_id for s in (failed, succeeded) if s.parent} == {root.context.span_id}
    recorder.counter.assert_each_ended_once()


async def test_a_middleware_retry_below_resets_the_usage(recorder: Recorder) -> None:
    class RetryInside(MiddlewareBase):
        """Calls next twice inside the chat span: the span reports the last call."""

        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_MODEL_CALL}

        def order(self) -> int:
            return 0

        def on_model_call(
            self, agent: Any, ctx: Any, input: ModelCallInput, next: Any
        ) -> Observable[AgentEvent]:
            return reactivex.concat(next(input), next(input))

    model = ScriptedModel(["x" * 400, "ok"])
    agent = make_agent(model, OtelTracingMiddleware(recorder.provider), RetryInside())
    assert (await asyncio.wait_for(agent.acall("hi"), 5)).text == "ok"
    chat = attrs(recorder.one("chat"))
    assert chat["gen_ai.usage.output_tokens"] == 1  # "ok", not the 400-char answer
