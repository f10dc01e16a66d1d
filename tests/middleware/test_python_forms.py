"""AgentScope Python's hook forms port without rewriting: async-generator hooks at
every onion point, ``next()`` without an argument, its names (``on_reply`` refused,
``TracingMiddleware``, ``DataBlockDeltaEvent.data``). The middlewares here are
AgentScope Python's documented examples, translated to this runtime's signatures."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import reactivex
from conftest import WAIT, acall, add_toolkit, call_add, make_agent, of_type, stream_events
from reactivex import operators as ops

from rx_agent import (
    DataBlockDeltaEvent,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallStartEvent,
    Msg,
    OtelTracingMiddleware,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    ToolResultEndEvent,
    TracingMiddleware,
)
from rx_agent.event import RequestContinueEvent
from rx_agent.middleware import PlanError
from rx_agent.testing import MiddlewareHarness

ONLY = ExtensionPoint


def _texts(events: list[Any]) -> list[str]:
    return [e.delta for e in of_type(events, TextBlockDeltaEvent)]


# -- AgentScope Python's FullObservabilityMiddleware: every point, as async generators ----------


class FullObservability(MiddlewareBase):
    """Observes every point; the onion hooks are async generators."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def on_agent(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        self.log.append(f"[reply] start for {agent.name}")
        async for item in next(input):
            yield item
        self.log.append(f"[reply] end for {agent.name}")

    async def on_reasoning(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        self.log.append("[reasoning] start")
        async for event in next(input):
            yield event
        self.log.append("[reasoning] end")

    async def on_model_call(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        self.log.append(f"[model_call] {input.model.name}")
        async for event in next(input):
            yield event
        self.log.append("[model_call] done")

    async def on_acting(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        self.log.append(f"[acting] {[c.name for c in input.tool_calls]}")
        async for event in next(input):
            yield event

    async def on_compress_context(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        self.log.append(f"[compress_context] checking context for {agent.name}")
        async for event in next(input):
            yield event
        self.log.append("[compress_context] done")

    async def on_system_prompt(self, agent, current_prompt):  # type: ignore[no-untyped-def, override]
        self.log.append(f"[system_prompt] length={len(current_prompt)}")
        return current_prompt


def test_async_generator_hooks_run_at_every_onion_point() -> None:
    log: list[str] = []
    model = ScriptedModel([[call_add()], ["the sum ", "is 3"]])
    agent = make_agent(model, sys_prompt="You are a helpful assistant.", toolkit=add_toolkit(),
                       middlewares=[FullObservability(log)])
    events = stream_events(agent)
    assert events[-2].result.text == "the sum is 3"
    assert [e.state.name for e in of_type(events, ToolResultEndEvent)] == ["SUCCESS"]
    round_ = ["[compress_context] checking context for agent", "[compress_context] done",
              "[reasoning] start", "[model_call] scripted", "[model_call] done",
              "[reasoning] end"]
    assert log == [
        "[reply] start for agent",
        "[system_prompt] length=28",
        *round_,
        "[acting] ['add']",
        *round_,
        "[reply] end for agent",
    ]


async def test_async_generator_hooks_run_on_the_callers_loop() -> None:
    loops: list[Any] = []

    class Where(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            loops.append(asyncio.get_running_loop())
            async for event in next(input):
                yield event

    agent = make_agent(ScriptedModel(["x"]), middlewares=[Where()])
    assert (await acall(agent)).text == "x"
    assert loops == [asyncio.get_running_loop()]


def test_a_generator_rewrite_is_what_the_session_stores() -> None:
    class Shout(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            async for event in next(input):
                if isinstance(event, TextBlockDeltaEvent):
                    yield event.model_copy(update={"delta": event.delta.upper()})
                else:
                    yield event

    ctx = RuntimeContext(session_id="s")
    agent = make_agent(ScriptedModel([["quiet ", "words"]]), middlewares=[Shout()])
    assert agent.call_sync("hi", ctx).text == "QUIET WORDS"
    assert [m.text for m in ctx.agent_state.context] == ["hi", "QUIET WORDS"]


def test_operators_on_next_keep_it_iterable() -> None:
    class OnlyText(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            async for event in next(input).pipe(ops.filter(lambda e: True),
                                                ops.map(lambda e: e)):
                yield event

    agent = make_agent(ScriptedModel([["a", "b"]]), middlewares=[OnlyText()])
    assert agent.call_sync().text == "ab"


# -- AgentScope Python's execution order: the first middleware is outermost ---------------------


class Say(MiddlewareBase):
    def __init__(self, label: str, log: list[str]) -> None:
        self.label, self.log = label, log

    def active_points(self):  # type: ignore[no-untyped-def]
        return {ONLY.ON_MODEL_CALL}

    async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        self.log.append(f"{self.label}_pre")
        async for event in next(input):
            if isinstance(event, TextBlockDeltaEvent):
                self.log.append(f"{self.label}_event")
            yield event
        self.log.append(f"{self.label}_post")


def test_execution_order_matches_the_onion() -> None:
    log: list[str] = []
    agent = make_agent(ScriptedModel([["one"]]), middlewares=[Say("mw1", log), Say("mw2", log)])
    agent.call_sync()
    assert log == ["mw1_pre", "mw2_pre", "mw2_event", "mw1_event", "mw2_post", "mw1_post"]


def test_generator_and_rx_hooks_compose_in_one_chain() -> None:
    log: list[str] = []

    class RxOuter(MiddlewareBase):
        def order(self) -> int:
            return 5

        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            log.append("rx_pre")
            return next(input).pipe(ops.do_action(on_completed=lambda: log.append("rx_post")))

    agent = make_agent(ScriptedModel([["one"]]), middlewares=[Say("gen", log), RxOuter()])
    assert agent.call_sync().text == "one"
    assert log == ["rx_pre", "gen_pre", "gen_event", "gen_post", "rx_post"]


# -- AgentScope Python's examples: timing, rate limit, dynamic prompt, fallback, continue --------


class Timing(MiddlewareBase):
    def __init__(self) -> None:
        self.timings: list[tuple[str, str, float]] = []

    async def on_model_call(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        model_name = input.model.name
        start = time.time()
        async for event in next():
            yield event
        self.timings.append((agent.name, model_name, time.time() - start))


def test_timing_middleware_with_next_and_no_argument() -> None:
    timing = Timing()
    agent = make_agent(ScriptedModel([["a", "b"]], delay=0.01), middlewares=[timing])
    assert agent.call_sync().text == "ab"
    [(agent_name, model_name, elapsed)] = timing.timings
    assert (agent_name, model_name) == ("agent", "scripted")
    assert elapsed >= 0.015


class RateLimit(MiddlewareBase):
    def __init__(self, min_interval: float = 1.0) -> None:
        self._last_call = 0.0
        self._min_interval = min_interval

    async def on_model_call(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        now = time.monotonic()
        wait = self._min_interval - (now - self._last_call)
        if wait > 0:
            await asyncio.sleep(wait)
        self._last_call = time.monotonic()
        async for event in next():
            yield event


def test_rate_limit_middleware_spaces_model_calls() -> None:
    model = ScriptedModel([[call_add()], "done"])
    agent = make_agent(model, toolkit=add_toolkit(), middlewares=[RateLimit(0.05)])
    started = time.monotonic()
    assert agent.call_sync().text == "done"
    assert time.monotonic() - started >= 0.05  # the second call waited for its slot


class DynamicContext(MiddlewareBase):
    def __init__(self, context_fn: Any) -> None:
        self._context_fn = context_fn

    async def on_system_prompt(self, agent, current_prompt):  # type: ignore[no-untyped-def, override]
        context = self._context_fn()
        return f"{current_prompt}\n\n## Current Context\n{context}"


def test_dynamic_context_middleware() -> None:
    model = ScriptedModel(["ok"])
    agent = make_agent(model, sys_prompt="Be brief.",
                       middlewares=[DynamicContext(lambda: "Time: 12:00")])
    agent.call_sync()
    assert model.calls[0].messages[0].text == "Be brief.\n\n## Current Context\nTime: 12:00"


class ModelFallback(MiddlewareBase):
    def __init__(self, fallback_model: Any) -> None:
        self._fallback = fallback_model
        self.failures: list[str] = []

    async def on_model_call(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        try:
            async for event in next():
                yield event
        except Exception as e:
            self.failures.append(f"Primary model failed: {e}, switching to fallback")
            async for event in next(input.with_(model=self._fallback)):
                yield event


def test_model_fallback_middleware_catches_the_error_at_async_for() -> None:
    primary = ScriptedModel([ConnectionError("primary is down")], name="primary")
    backup = ScriptedModel(["answered by the backup"], name="backup")
    fallback = ModelFallback(backup)
    agent = make_agent(primary, middlewares=[fallback], max_retries=1)
    assert agent.call_sync().text == "answered by the backup"
    assert fallback.failures == ["Primary model failed: primary is down, switching to fallback"]


class ContinueOnce(MiddlewareBase):
    """AgentScope Python's ContinueOnceMiddleware: one more round before finishing."""

    def __init__(self) -> None:
        self.continued = False

    async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        async for event in next(input):
            yield event
        if not self.continued:
            self.continued = True
            yield RequestContinueEvent(hint="Check the result once more before finishing.")


def test_continue_once_middleware() -> None:
    model = ScriptedModel(["first answer", "checked answer"])
    agent = make_agent(model, middlewares=[ContinueOnce()])
    assert agent.call_sync().text == "checked answer"
    [hint] = model.calls[1].messages[-1].content
    assert hint.hint == "Check the result once more before finishing."  # type: ignore[union-attr]


# -- early exit, short-circuit, errors and disposal ----------------------------------------------


def test_a_generator_may_answer_without_calling_next() -> None:
    class Canned(MiddlewareBase):
        async def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            for event in (ModelCallStartEvent(reply_id="r"),
                          TextBlockDeltaEvent(reply_id="r", block_id="t", delta="canned")):
                yield event

    model = ScriptedModel(["never"])
    agent = make_agent(model, middlewares=[Canned()])
    assert agent.call_sync().text == "canned"
    assert model.calls == []


def test_leaving_the_loop_early_closes_the_inner_stream() -> None:
    closed: list[str] = []

    class FirstDelta(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            try:
                async for event in next(input):
                    yield event
                    if isinstance(event, TextBlockDeltaEvent):
                        return  # the rest of the model's stream is not wanted
            finally:
                closed.append("finally")

    model = ScriptedModel([["kept", " dropped", " dropped"]], delay=0.01)
    agent = make_agent(model, middlewares=[FirstDelta()])
    events = stream_events(agent)
    assert _texts(events) == ["kept"]
    assert events[-2].result.text == "kept"
    assert closed == ["finally"]


def test_an_outer_take_disposes_the_generator_and_runs_its_finally() -> None:
    closed = threading.Event()
    yielded: list[str] = []

    class Inner(MiddlewareBase):
        def order(self) -> int:
            return 0

        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            try:
                async for event in next(input):
                    yielded.append(type(event).__name__)
                    yield event
            finally:
                closed.set()

    class Outer(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            return next(input).pipe(ops.take(3))  # up to the first text delta

    model = ScriptedModel([["a", "b", "c", "d"]], delay=0.01)
    agent = make_agent(model, middlewares=[Inner(), Outer()])
    agent.call_sync()
    assert closed.wait(WAIT)
    assert len(yielded) == 3


def test_an_error_raised_by_the_generator_fails_the_call() -> None:
    class Broken(MiddlewareBase):
        async def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            async for event in next(input):
                yield event
            raise LookupError("audit index missing")

    agent = make_agent(ScriptedModel([[call_add()], "never"]), toolkit=add_toolkit(),
                       middlewares=[Broken()])
    with pytest.raises(LookupError, match="audit index missing"):
        agent.call_sync()


def test_an_inner_error_not_caught_by_the_generator_fails_the_call() -> None:
    class Passes(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            async for event in next(input):
                yield event

    agent = make_agent(ScriptedModel([ConnectionError("down")]), middlewares=[Passes()],
                       max_retries=1)
    with pytest.raises(ConnectionError, match="down"):
        agent.call_sync()


def test_disposing_the_call_closes_a_waiting_generator() -> None:
    started, closed = threading.Event(), threading.Event()

    class Waits(MiddlewareBase):
        async def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            try:
                started.set()
                await asyncio.sleep(30)
                async for event in next(input):
                    yield event
            finally:
                closed.set()

    model = ScriptedModel(["never"])
    subscription = make_agent(model, middlewares=[Waits()]).stream("hi").subscribe(
        on_error=lambda e: None)
    assert started.wait(WAIT)
    subscription.dispose()
    assert closed.wait(WAIT)
    assert model.calls == []


def test_disposing_mid_stream_closes_the_generator_and_the_model_stream() -> None:
    first, closed = threading.Event(), threading.Event()

    class Relay(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            try:
                async for event in next(input):
                    if isinstance(event, TextBlockDeltaEvent):
                        first.set()
                    yield event
            finally:
                closed.set()

    model = ScriptedModel([["a"] + ["b"] * 200], delay=0.02)
    seen: list[Any] = []
    subscription = make_agent(model, middlewares=[Relay()]).stream("hi").subscribe(
        seen.append, lambda e: None)
    assert first.wait(WAIT)
    subscription.dispose()
    assert closed.wait(WAIT)
    count = len(seen)
    time.sleep(0.1)
    assert len(seen) == count  # nothing reaches the caller after disposal


def test_a_retry_runs_the_generator_again() -> None:
    runs: list[int] = []

    class Flaky(MiddlewareBase):
        def order(self) -> int:
            return 0

        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            runs.append(1)
            if len(runs) == 1:
                raise ConnectionError("first run fails")
            async for event in next(input):
                yield event

    class Retry(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            return next(input).pipe(ops.retry(2))

    agent = make_agent(ScriptedModel(["second"]), middlewares=[Flaky(), Retry()])
    assert agent.call_sync().text == "second"
    assert len(runs) == 2


def test_a_generator_at_a_point_that_does_not_yield_events_is_refused_at_build() -> None:
    class Yields(MiddlewareBase):
        async def on_system_prompt(self, agent, current_prompt):  # type: ignore[no-untyped-def, override]
            yield current_prompt

    with pytest.raises(PlanError, match=r"Yields\.on_system_prompt is an async generator, but "
                                        r"only onion hooks yield events.*`return current_prompt`"):
        make_agent(ScriptedModel([]), middlewares=[Yields()])


def test_the_harness_runs_a_generator_hook() -> None:
    class Shout(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            async for event in next():
                if isinstance(event, TextBlockDeltaEvent):
                    yield event.model_copy(update={"delta": event.delta.upper()})
                else:
                    yield event

    delta = TextBlockDeltaEvent(reply_id="r", block_id="t", delta="hi")
    result = MiddlewareHarness(Shout(), ONLY.ON_MODEL_CALL).run(upstream=[delta, delta])
    assert _texts(result.events) == ["HI", "HI"]
    assert result.completed and result.subscriptions == 1


# -- next() without an argument ------------------------------------------------------------------


def test_next_without_an_argument_passes_the_hooks_own_input_at_every_point() -> None:
    seen: list[str] = []

    class Plain(MiddlewareBase):
        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            seen.append("agent")
            return next()

        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            seen.append("reasoning")
            return next()

        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            seen.append("model_call")
            return next.apply()

        def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            seen.append("acting")
            return next()

        def on_compress_context(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            return next()

    class Coroutine(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            await asyncio.sleep(0)
            return next()

    model = ScriptedModel([[call_add()], "done"])
    agent = make_agent(model, toolkit=add_toolkit(), middlewares=[Plain(), Coroutine(), Plain()])
    assert agent.call_sync("hi").text == "done"
    assert seen.count("acting") == 2 and seen.count("model_call") == 4
    assert model.calls[0].messages[-1].text == "hi"


def test_next_without_an_argument_in_a_later_callback_says_to_pass_the_input() -> None:
    class Deferred(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            return reactivex.defer(lambda _: next())

    agent = make_agent(ScriptedModel(["x"]), middlewares=[Deferred()])
    with pytest.raises(TypeError) as info:
        agent.call_sync()
    assert str(info.value) == (
        "on_model_call: next() was called without an input after the hook returned (in a "
        "callback or a deferred stream); there, pass it: next(input)"
    )


def test_concurrent_calls_of_one_layer_each_pass_their_own_input() -> None:
    class Twice(MiddlewareBase):
        def order(self) -> int:
            return 2

        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            first = input.with_(messages=[*input.messages, Msg(role="user", content="one")])
            second = input.with_(messages=[*input.messages, Msg(role="user", content="two")])
            # Both calls of the layer inside are made before either is subscribed.
            return reactivex.concat(next(first).pipe(ops.ignore_elements()), next(second))

    class Generator(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            async for event in next():
                yield event

    model = ScriptedModel(["a", "b"])
    make_agent(model, middlewares=[Twice(), Generator()]).call_sync("hi")
    assert [c.messages[-1].text for c in model.calls] == ["one", "two"]


# -- names ---------------------------------------------------------------------------------------


def test_on_reply_is_refused_at_build_naming_on_agent() -> None:
    class Ported(MiddlewareBase):
        async def on_reply(self, agent, input, next):  # type: ignore[no-untyped-def]
            async for item in next(input):
                yield item

    with pytest.raises(PlanError) as info:
        ReActAgent(name="a", model=ScriptedModel([]), middlewares=[Ported()])
    assert str(info.value) == (
        "Ported.on_reply is AgentScope Python's name and would never be called; did you mean "
        "`on_agent`? (it wraps the whole call, as `on_reply` does)"
    )


def test_tracing_middleware_is_the_otel_one() -> None:
    import rx_agent
    import rx_agent.tracing

    assert TracingMiddleware is OtelTracingMiddleware
    assert rx_agent.tracing.TracingMiddleware is OtelTracingMiddleware
    assert "TracingMiddleware" in rx_agent.__all__
    assert "TracingMiddleware" in rx_agent.tracing.__all__


def test_data_block_delta_answers_data_as_well_as_delta() -> None:
    event = DataBlockDeltaEvent(reply_id="r", block_id="b", delta="AAEC")
    assert event.data == event.delta == "AAEC"
    assert "data" not in event.model_dump()  # the wire format is unchanged


async def test_a_finished_call_with_generator_hooks_leaves_no_cycle() -> None:
    import gc

    class Relay(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            async for event in next(input):
                yield event

    agent = make_agent(ScriptedModel(["x"] * 30), middlewares=[Relay(), Relay()])
    for _ in range(3):
        await acall(agent)
    gc.collect()
    gc.disable()
    try:
        for _ in range(10):
            await acall(agent)
        left = gc.collect()
    finally:
        gc.enable()
    assert left == 0  # reference counting freed every call
