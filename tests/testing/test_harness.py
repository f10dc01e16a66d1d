"""MiddlewareHarness: one hook, a scripted upstream, virtual time."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops

from rx_agent import (
    ActingInput,
    AgentFinishOutcome,
    AgentStartEvent,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallEndEvent,
    ModelCallInput,
    ModelCallStartEvent,
    Msg,
    RequestStopEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    ToolResultEndEvent,
    ToolUseBlock,
)
from rx_agent.model.errors import ModelServerError, ModelTimeoutError
from rx_agent.testing import (
    MiddlewareHarness,
    attempts,
    event_types,
    text_round,
    tool_results,
    verify,
)

from ._middlewares import DropsTextEnd, IdleTimeout, NotSpaced, Retry, Shout, Spaced

ON_MODEL_CALL = ExtensionPoint.ON_MODEL_CALL


def test_the_hook_sees_the_scripted_upstream_and_its_output_is_recorded() -> None:
    result = MiddlewareHarness(Shout(), ON_MODEL_CALL).run(text_round("hel", "lo"))
    assert result.completed and result.error is None
    deltas = [e.delta for e in result.events if isinstance(e, TextBlockDeltaEvent)]
    assert deltas == ["HEL", "LO"]
    assert result.subscriptions == 1
    assert isinstance(result.inputs[0], ModelCallInput)
    assert all(t == 0.0 for t, _ in result.timeline)


def test_a_rate_limiter_spaces_calls_on_virtual_time_without_sleeping() -> None:
    harness = MiddlewareHarness(Spaced(30.0), ON_MODEL_CALL)
    began = time.monotonic()
    result = harness.run(text_round("hi"), starts=[0.0, 0.0, 10.0])
    assert time.monotonic() - began < 2.0  # a minute of virtual time, no sleeping
    assert [u.subscribed_at for u in result.upstream] == [0.0, 30.0, 60.0]
    assert result.times(ModelCallStartEvent) == [0.0, 30.0, 60.0]
    assert result.completed and result.ended_at == 60.0


def test_the_harness_shows_a_rate_limiter_that_does_not_wait() -> None:
    result = MiddlewareHarness(NotSpaced(30.0), ON_MODEL_CALL).run(
        text_round("hi"), starts=[0.0, 0.0])
    assert [u.subscribed_at for u in result.upstream] == [0.0, 0.0]
    with pytest.raises(AssertionError):
        assert result.times(ModelCallStartEvent) == [0.0, 30.0]


def test_marble_upstream_with_a_legend() -> None:
    events = text_round("a", "b")
    legend = dict(zip("sxyzbe", events, strict=True))
    result = MiddlewareHarness(Shout(), ON_MODEL_CALL).run("sx-y-(zb)e|", legend=legend,
                                                           timespan=1.0)
    assert [(t, type(e).__name__) for t, e in result.timeline] == [
        (0.0, "ModelCallStartEvent"), (1.0, "TextBlockStartEvent"),
        (3.0, "TextBlockDeltaEvent"), (5.0, "TextBlockDeltaEvent"),
        (5.0, "TextBlockEndEvent"), (9.0, "ModelCallEndEvent"),
    ]
    assert result.ended_at == 10.0


def test_a_timeout_is_tested_without_waiting_and_disposes_upstream() -> None:
    start, text_start, delta, *_ = text_round("late")
    result = MiddlewareHarness(IdleTimeout(5.0), ON_MODEL_CALL).run(
        "sb------d|", legend={"s": start, "b": text_start, "d": delta}, timespan=1.0)
    assert isinstance(result.error, ModelTimeoutError)
    assert result.ended_at == 6.0  # 5 s after the last event (at 1 s)
    (call,) = result.upstream
    assert call.disposed_at == 6.0 and call.ended_at is None
    fast = MiddlewareHarness(IdleTimeout(5.0), ON_MODEL_CALL).run("sb-d|", legend={
        "s": start, "b": text_start, "d": delta}, timespan=1.0)
    assert fast.completed


def test_a_retry_with_backoff_resubscribes_at_the_backoff_times() -> None:
    harness = MiddlewareHarness(Retry(3, 2.0), ON_MODEL_CALL)
    result = harness.run(attempts(ModelServerError("503"), ModelServerError("503"),
                                  text_round("ok")))
    assert result.completed
    assert result.subscriptions == 3
    assert [u.subscribed_at for u in result.upstream] == [0.0, 2.0, 6.0]
    assert result.times(TextBlockDeltaEvent) == [6.0]
    spent = harness.run(attempts(*[ModelServerError("503")] * 3))
    assert isinstance(spent.error, ModelServerError) and spent.subscriptions == 3


def test_attempts_fails_clearly_past_its_script() -> None:
    result = MiddlewareHarness(Retry(2, 1.0), ON_MODEL_CALL).run(
        attempts(ModelServerError("a")))
    assert isinstance(result.error, AssertionError)
    assert "subscribed upstream 2 times; attempts() scripts 1" in str(result.error)


def test_a_list_upstream_may_end_with_an_error() -> None:
    events = text_round("x")[:3]
    result = MiddlewareHarness(Shout(), ON_MODEL_CALL).run([*events, ModelServerError("cut")])
    assert event_types(result.events) == ["ModelCallStartEvent", "TextBlockStartEvent",
                                          "TextBlockDeltaEvent"]
    assert isinstance(result.error, ModelServerError) and not result.completed
    with pytest.raises(TypeError, match="only the last item"):
        MiddlewareHarness(Shout(), ON_MODEL_CALL).run([ModelServerError("x"), *events])


def test_dispose_at_propagates_to_upstream() -> None:
    legend = {"a": text_round("x")[0]}
    result = MiddlewareHarness(Shout(), ON_MODEL_CALL).run("a---------|", legend=legend,
                                                           timespan=1.0, dispose_at=4.0)
    assert not result.terminated and len(result.events) == 1
    assert result.upstream[0].disposed_at == 4.0


def test_until_stops_an_endless_stream() -> None:
    class Ticker(MiddlewareBase):
        def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            return reactivex.interval(1.0).pipe(
                ops.map(lambda i: RequestStopEvent(reason=str(i))))

    result = MiddlewareHarness(Ticker(), ON_MODEL_CALL).run(until=3.5)
    assert [e.reason for e in result.events] == ["0", "1", "2"]
    assert not result.terminated and result.subscriptions == 0


def test_the_broken_hook_that_drops_a_block_end_is_caught() -> None:
    good = MiddlewareHarness(Shout(), ON_MODEL_CALL).run(text_round("hi"))
    assert TextBlockEndEvent in {type(e) for e in good.events}
    result = MiddlewareHarness(DropsTextEnd(), ON_MODEL_CALL).run(text_round("hi"))
    with pytest.raises(AssertionError, match="TextBlockEndEvent"):
        (verify(reactivex.from_iterable(result.events))
         .expect_next(ModelCallStartEvent)
         .consume_while(lambda e: not isinstance(e, TextBlockEndEvent | ModelCallEndEvent))
         .expect_next(TextBlockEndEvent)
         .expect_next(ModelCallEndEvent)
         .verify_complete())


@pytest.mark.parametrize("point", [p for p in ExtensionPoint if p.kind == "onion"])
def test_every_onion_point_has_a_default_input_and_upstream(point: ExtensionPoint) -> None:
    seen: list[Any] = []

    class Probe(MiddlewareBase):
        def _hook(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            seen.append((agent, ctx, input))
            return next(input)

        on_agent = on_reasoning = on_acting = on_model_call = on_compress_context = _hook

    result = MiddlewareHarness(Probe(), point).run()
    assert result.completed
    agent, ctx, inp = seen[0]
    assert agent.name == "agent" and ctx.agent_state is result.state
    assert type(inp).__name__ == {"on_agent": "AgentInput", "on_reasoning": "ReasoningInput",
                                  "on_acting": "ActingInput", "on_model_call": "ModelCallInput",
                                  }.get(point.value, "CompressContextInput")
    assert result.inputs == [inp]  # the default upstream answered next(input)
    if point is ExtensionPoint.ON_ACTING:
        assert isinstance(result.events[-1], ToolResultEndEvent)
    if point is ExtensionPoint.ON_AGENT:
        assert isinstance(result.events[0], AgentStartEvent)


def test_an_input_of_the_wrong_type_fails_like_the_runtime() -> None:
    result = MiddlewareHarness(Shout(), ON_MODEL_CALL).run(
        text_round("x"), ActingInput((ToolUseBlock(id="c", name="f", input={}),)))
    assert isinstance(result.error, TypeError)


def test_a_given_input_reaches_the_hook_and_next() -> None:
    calls = (ToolUseBlock(id="c7", name="search", input={"q": "rx"}),)

    class Rename(MiddlewareBase):
        def on_acting(self, agent: Any, ctx: Any, input: ActingInput, next: Any) -> Any:
            return next(input.with_(tool_calls=[c.model_copy(update={"name": "find"})
                                                for c in input.tool_calls]))

    result = MiddlewareHarness(Rename(), "on_acting").run(
        lambda inp: tool_results(*inp.tool_calls), ActingInput(calls))
    assert result.inputs[0].tool_calls[0].name == "find"
    assert {e.tool_call_name for e in result.events} == {"find"}


def test_ctx_less_and_async_hooks_run_as_the_runtime_runs_them() -> None:
    class JavaForm(MiddlewareBase):
        def on_model_call(self, agent, input, next):  # type: ignore[no-untyped-def, override]
            return next(input).pipe(ops.take(1))

    assert event_types(MiddlewareHarness(JavaForm(), ON_MODEL_CALL).run().events) == [
        "ModelCallStartEvent"]

    class Awaits(MiddlewareBase):
        async def on_model_call(self, agent: Any, ctx: Any, input: Any,  # type: ignore[override]
                                next: Any) -> Any:
            await asyncio.sleep(0)
            return next(input).pipe(ops.skip(1))

    result = MiddlewareHarness(Awaits(), ON_MODEL_CALL).run(text_round("x"))
    assert result.completed and event_types(result.events)[0] == "TextBlockStartEvent"


def test_a_hook_that_raises_or_returns_nothing_fails_its_stream() -> None:
    class Raises(MiddlewareBase):
        def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            raise ValueError("bad hook")

    class Forgets(MiddlewareBase):
        def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            next(input)

    raised = MiddlewareHarness(Raises(), ON_MODEL_CALL).run()
    assert isinstance(raised.error, ValueError) and raised.subscriptions == 0
    forgot = MiddlewareHarness(Forgets(), ON_MODEL_CALL).run()
    assert isinstance(forgot.error, TypeError)
    assert "forget to `return next(input)`" in str(forgot.error)


def test_a_middleware_that_skips_the_point_is_refused() -> None:
    with pytest.raises(ValueError, match="does not take part in on_acting"):
        MiddlewareHarness(Shout(), ExtensionPoint.ON_ACTING)


def test_system_prompt_hook() -> None:
    class Suffix(MiddlewareBase):
        def on_system_prompt(self, agent: Any, ctx: Any, current_prompt: str) -> Any:
            return reactivex.timer(2.0).pipe(ops.map(lambda _: current_prompt + " Be brief."))

    result = MiddlewareHarness(Suffix(), "on_system_prompt").run(input="Hi.")
    assert result.timeline == [(2.0, "Hi. Be brief.")] and result.completed

    class Two(MiddlewareBase):
        def on_system_prompt(self, agent: Any, ctx: Any, current_prompt: str) -> Any:
            return reactivex.of("a", "b")

    assert "emitted 2 items" in str(MiddlewareHarness(Two(), "on_system_prompt").run().error)
    with pytest.raises(TypeError, match="has no upstream"):
        MiddlewareHarness(Two(), "on_system_prompt").run(["x"])


def test_state_ready_hook_sees_and_edits_the_input_messages() -> None:
    class Tag(MiddlewareBase):
        async def on_agent_state_ready(self, agent: Any, ctx: Any, state: Any,
                                       input_messages: list[Msg]) -> None:
            await asyncio.sleep(0)
            state.data["seen"] = len(input_messages)
            input_messages.append(Msg(role="user", content="extra"))

    result = MiddlewareHarness(Tag(), ExtensionPoint.ON_AGENT_STATE_READY).run()
    assert result.completed and result.events == []
    assert result.state.data == {"seen": 1}
    assert result.input_messages is not None
    assert [m.text for m in result.input_messages] == ["hello", "extra"]


def test_finish_hook_answers_are_settled() -> None:
    done: list[Any] = []

    class Finish(MiddlewareBase):
        def on_agent_finish(self, agent: Any, ctx: Any, outcome: AgentFinishOutcome) -> Any:
            done.append(outcome.reason)
            return reactivex.timer(1.0).pipe(ops.map(lambda _: "flushed"))

    result = MiddlewareHarness(Finish(), "on_agent_finish").run()
    assert result.timeline == [(1.0, "flushed")] and done == ["MODEL_STOP"]

    class Wrong(MiddlewareBase):
        def on_agent_finish(self, agent: Any, ctx: Any, outcome: Any) -> Any:
            return 42

    assert "returned int" in str(MiddlewareHarness(Wrong(), "on_agent_finish").run().error)


def test_run_inside_a_loop_points_to_arun() -> None:
    harness = MiddlewareHarness(Shout(), ON_MODEL_CALL)

    async def inside() -> list[Any]:
        with pytest.raises(RuntimeError, match="arun"):
            harness.run()
        return (await harness.arun(text_round("a"))).events

    assert len(asyncio.run(inside())) == 5


def test_real_asyncio_timers_of_a_hook_are_waited_for() -> None:
    class Sleeps(MiddlewareBase):
        async def on_model_call(self, agent: Any, ctx: Any, input: Any,  # type: ignore[override]
                                next: Any) -> Any:
            await asyncio.sleep(0.05)  # real time: the harness waits for it
            return next(input)

    began = time.monotonic()
    result = MiddlewareHarness(Sleeps(), ON_MODEL_CALL).run(text_round("x"))
    assert result.completed and len(result.events) == 5
    assert 0.04 < time.monotonic() - began < 5.0


def test_a_given_agent_and_ctx_reach_the_hook() -> None:
    from rx_agent import ReActAgent, RuntimeContext, ScriptedModel

    seen: list[Any] = []

    class Probe(MiddlewareBase):
        def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            seen.append((agent, ctx.get("tenant"), input.model))
            return next(input)

    agent = ReActAgent(name="mine", model=ScriptedModel(["x"], name="m"))
    ctx = RuntimeContext(session_id="s1", attributes={"tenant": "acme"})
    result = MiddlewareHarness(Probe(), ON_MODEL_CALL, agent=agent, ctx=ctx).run()
    assert seen == [(agent, "acme", agent.model)]
    assert result.ctx is ctx and result.state.session_id == "s1"
