"""Hook forms a port writes: Java's ctx-less signatures, ``async def`` hooks, ``next.apply``,
and the slips the plan refuses at build time with a message naming the middleware."""

from __future__ import annotations

import asyncio
import threading
import warnings
from typing import Any

import pytest
import reactivex
from conftest import WAIT, acall, add_toolkit, call_add, make_agent, of_type, stream_events
from reactivex import operators as ops

from rx_agent import (
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    ToolResultEndEvent,
)
from rx_agent.middleware import PlanError

ONLY = ExtensionPoint


def _upper(event: Any) -> Any:
    if isinstance(event, TextBlockDeltaEvent):
        return event.model_copy(update={"delta": event.delta.upper()})
    return event


# -- item 8: Java's ctx-less signatures --------------------------------------------------------


class JavaStyle(MiddlewareBase):
    """Written as the Java guide writes them: no ``ctx`` parameter."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def on_agent(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        self.log.append(f"agent:{agent.name}")
        return next(input)

    def on_reasoning(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        self.log.append(f"reasoning:{input.iteration}")
        return next(input)

    def on_model_call(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        self.log.append(f"model_call:{type(input).__name__}")
        return next(input).pipe(ops.map(_upper))

    def on_acting(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        self.log.append(f"acting:{len(input.tool_calls)}")
        return next(input)

    def on_system_prompt(self, agent, current_prompt):  # type: ignore[no-untyped-def, override]
        return current_prompt + " (ported)"

    def on_agent_state_ready(self, agent, state, input_messages):  # type: ignore[no-untyped-def, override]
        self.log.append(f"state_ready:{len(input_messages)}")

    def on_agent_finish(self, agent, outcome):  # type: ignore[no-untyped-def, override]
        self.log.append(f"finish:{outcome.reason}")


def test_ctx_less_hooks_run_at_every_point() -> None:
    log: list[str] = []
    model = ScriptedModel([[call_add()], "done"])
    agent = make_agent(model, sys_prompt="Be brief.", toolkit=add_toolkit(),
                       middlewares=[JavaStyle(log)])
    assert agent.call_sync("hi").text == "DONE"
    assert model.calls[0].messages[0].text == "Be brief. (ported)"
    assert log == [
        "agent:agent",
        "state_ready:1",
        "reasoning:1",
        "model_call:ModelCallInput",
        "acting:1",
        "reasoning:2",
        "model_call:ModelCallInput",
        "finish:MODEL_STOP",
    ]


def test_full_form_with_an_optional_parameter_stays_the_full_form() -> None:
    seen: list[Any] = []

    class Optional(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ONLY.ON_MODEL_CALL}

        def on_model_call(self, agent, ctx, input, next=None):  # type: ignore[no-untyped-def, override]
            seen.append(ctx)
            return next(input)

    ctx = RuntimeContext(session_id="s")
    make_agent(ScriptedModel(["x"]), middlewares=[Optional()]).call_sync("hi", ctx)
    assert isinstance(seen[0], RuntimeContext) and seen[0].session_id == "s"


@pytest.mark.parametrize(
    ("point", "signature", "expected"),
    [
        (ONLY.ON_MODEL_CALL, "def on_model_call(self, input, next)",
         ("(self, agent, ctx, input, next)", "(self, agent, input, next)")),
        (ONLY.ON_MODEL_CALL, "def on_model_call(self, a, b, c, d, e)",
         ("(self, agent, ctx, input, next)", "(self, agent, input, next)")),
        (ONLY.ON_SYSTEM_PROMPT, "def on_system_prompt(self)",
         ("(self, agent, ctx, current_prompt)", "(self, agent, current_prompt)")),
        (ONLY.ON_AGENT_FINISH, "def on_agent_finish(self, a, b, c, *, d)",
         ("(self, agent, ctx, outcome)", "(self, agent, outcome)")),
    ],
)
def test_any_other_arity_is_refused_at_build_naming_the_method(
    point: ExtensionPoint, signature: str, expected: tuple[str, str]
) -> None:
    namespace: dict[str, Any] = {}
    exec(f"{signature}:\n    return None", namespace)
    hook = namespace[point.value]
    bad = type("BadArity", (MiddlewareBase,), {point.value: hook})
    with pytest.raises(PlanError) as info:
        make_agent(ScriptedModel([]), middlewares=[bad()])
    message = str(info.value)
    assert f"BadArity.{point.value}" in message
    for form in expected:
        assert f"def {point.value}{form}" in message


# -- item 14: async def hooks ------------------------------------------------------------------


class AsyncEverywhere(MiddlewareBase):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        await asyncio.sleep(0.001)
        self.log.append("agent")
        return next(input)

    async def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        await asyncio.sleep(0.001)
        self.log.append("reasoning")
        return next(input)

    async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        await asyncio.sleep(0.001)
        self.log.append("model_call")
        return next(input).pipe(ops.map(_upper))

    async def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        await asyncio.sleep(0.001)
        self.log.append("acting")
        return next(input)


def test_async_onion_hooks_are_awaited_then_their_stream_subscribed() -> None:
    log: list[str] = []
    agent = make_agent(ScriptedModel([[call_add()], "done"]), toolkit=add_toolkit(),
                       middlewares=[AsyncEverywhere(log)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "coroutine was never awaited"
        events = stream_events(agent)
    assert events[-2].result.text == "DONE"
    assert [e.state.name for e in of_type(events, ToolResultEndEvent)] == ["SUCCESS"]
    assert log == ["agent", "reasoning", "model_call", "acting", "reasoning", "model_call"]


async def test_async_onion_hooks_run_on_the_callers_loop() -> None:
    loops: list[Any] = []

    class Where(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            loops.append(asyncio.get_running_loop())
            return next(input)

    agent = make_agent(ScriptedModel(["x"]), middlewares=[Where()])
    assert (await acall(agent)).text == "x"
    assert loops == [asyncio.get_running_loop()]


def test_async_hook_ported_without_ctx_works_too() -> None:
    class Both(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ONLY.ON_MODEL_CALL}

        async def on_model_call(self, agent, input, next):  # type: ignore[no-untyped-def, override]
            await asyncio.sleep(0)
            return next.apply(input).pipe(ops.map(_upper))

    assert make_agent(ScriptedModel(["quiet"]), middlewares=[Both()]).call_sync().text == "QUIET"


def test_an_async_hook_that_raises_fails_the_call_with_that_error() -> None:
    class Broken(MiddlewareBase):
        async def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            await asyncio.sleep(0)
            raise LookupError("no such index")

    agent = make_agent(ScriptedModel(["x"]), middlewares=[Broken()])
    with pytest.raises(LookupError, match="no such index"):
        agent.call_sync("hi")


def test_an_async_hook_returning_no_observable_names_the_middleware() -> None:
    class Forgetful(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            next(input)

    agent = make_agent(ScriptedModel(["x"]), middlewares=[Forgetful()])
    with pytest.raises(TypeError, match=r"Forgetful\.on_model_call\(\) returned NoneType"):
        agent.call_sync("hi")


def test_an_async_hook_may_short_circuit_and_be_retried() -> None:
    attempts: list[int] = []

    class Flaky(MiddlewareBase):
        def order(self) -> int:
            return 0  # inside Retry

        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            attempts.append(1)
            if len(attempts) == 1:
                return reactivex.throw(ConnectionError("first try fails"))
            return next(input)

    class Retry(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            return next(input).pipe(ops.retry(2))

    agent = make_agent(ScriptedModel(["second"]), middlewares=[Flaky(), Retry()])
    assert agent.call_sync("hi").text == "second"
    assert len(attempts) == 2  # each subscription awaits the hook again


def test_disposing_while_an_async_hook_awaits_cancels_it() -> None:
    started, cancelled = threading.Event(), threading.Event()

    class Waits(MiddlewareBase):
        async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return next(input)

    model = ScriptedModel(["never"])
    agent = make_agent(model, middlewares=[Waits()])
    subscription = agent.stream("hi").subscribe(on_error=lambda e: None)
    assert started.wait(WAIT)
    subscription.dispose()
    assert cancelled.wait(WAIT)
    assert model.calls == []


def test_a_plain_hook_returning_a_coroutine_is_awaited() -> None:
    class Returns(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            async def later() -> Any:
                await asyncio.sleep(0)
                return next(input).pipe(ops.map(_upper))

            return later()  # type: ignore[return-value]

    assert make_agent(ScriptedModel(["calm"]), middlewares=[Returns()]).call_sync().text == "CALM"


# -- item 15: next.apply and the slips refused at build -----------------------------------------


def test_next_apply_works_as_in_java() -> None:
    class Apply(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            return next.apply(input).pipe(ops.map(_upper))

        def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            return next.apply(input)

    agent = make_agent(ScriptedModel([[call_add()], "ok"]), toolkit=add_toolkit(),
                       middlewares=[Apply(), Apply()])
    assert agent.call_sync("hi").text == "OK"


def test_order_as_a_class_attribute_is_refused_at_build() -> None:
    class Fixed(MiddlewareBase):
        order = 5  # type: ignore[assignment]

    with pytest.raises(PlanError, match=r"Fixed\.order must be a method `def order\(self\) -> int`"
                       r", got int 5"):
        make_agent(ScriptedModel([]), middlewares=[Fixed()])


def test_active_points_as_a_class_attribute_is_refused_at_build() -> None:
    class Declared(MiddlewareBase):
        active_points = {ExtensionPoint.ON_AGENT}  # type: ignore[assignment]

    with pytest.raises(PlanError, match=r"Declared\.active_points must be a method .*got set"):
        make_agent(ScriptedModel([]), middlewares=[Declared()])


def test_a_java_named_hook_is_refused_instead_of_never_running() -> None:
    class Ported(MiddlewareBase):
        def onModelCall(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input)

    with pytest.raises(PlanError, match=r"Ported\.onModelCall .*`on_model_call`"):
        make_agent(ScriptedModel([]), middlewares=[Ported()])


def test_a_hook_that_is_not_callable_is_refused_at_build() -> None:
    class Nothing(MiddlewareBase):
        on_reasoning = None  # type: ignore[assignment]

    with pytest.raises(PlanError, match=r"Nothing\.on_reasoning must be a method"):
        make_agent(ScriptedModel([]), middlewares=[Nothing()])


def test_a_str_given_as_middleware_to_the_constructor_says_so() -> None:
    with pytest.raises(TypeError, match=r"got str 'audit'") as info:
        ReActAgent(name="a", model=ScriptedModel([]), middlewares=["audit"])  # type: ignore[list-item]
    assert "class" not in str(info.value)


def test_the_model_call_input_type_is_checked_on_next_apply_too() -> None:
    class Wrong(MiddlewareBase):
        def on_model_call(self, agent, ctx, input: ModelCallInput, next):  # type: ignore[no-untyped-def, override]
            return next.apply(input.messages)

    agent = make_agent(ScriptedModel(["x"]), middlewares=[Wrong()])
    expected = "next\\(\\) was given HistoryView, expected ModelCallInput"
    with pytest.raises(TypeError, match=expected):
        agent.call_sync("hi")


# -- the plan's own runners for the transformer and the finish notification ---------------------


def test_plan_system_prompt_runs_every_form_in_plan_order() -> None:
    class Plain(MiddlewareBase):
        def order(self) -> int:
            return 3

        def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def, override]
            return current_prompt + "|plain"

    class NoCtx(MiddlewareBase):
        def order(self) -> int:
            return 2

        def on_system_prompt(self, agent, current_prompt):  # type: ignore[no-untyped-def, override]
            return reactivex.just(current_prompt + "|no-ctx")

    class Awaits(MiddlewareBase):
        async def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def, override]
            await asyncio.sleep(0)
            return current_prompt + "|async"

    plan = make_agent(ScriptedModel([]), middlewares=[Awaits(), NoCtx(), Plain()]).plan
    prompt = asyncio.run(plan.system_prompt(None, RuntimeContext(), "  base  "))  # type: ignore[arg-type]
    assert prompt == "base|plain|no-ctx|async"


def test_plan_system_prompt_names_the_numbered_participant_that_broke() -> None:
    class Prompt(MiddlewareBase):
        def __init__(self, value: Any) -> None:
            self.value = value

        def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def, override]
            return self.value

    plan = make_agent(ScriptedModel([]), middlewares=[Prompt("ok"), Prompt(7)]).plan
    with pytest.raises(TypeError, match=r"Prompt#2\.on_system_prompt\(\) produced int"):
        asyncio.run(plan.system_prompt(None, RuntimeContext(), ""))  # type: ignore[arg-type]


def test_plan_notify_finish_awaits_each_hook_and_returns_the_first_failure() -> None:
    seen: list[str] = []

    class Flush(MiddlewareBase):
        def order(self) -> int:
            return 2

        async def on_agent_finish(self, agent, outcome):  # type: ignore[no-untyped-def, override]
            await asyncio.sleep(0)
            seen.append(f"flush:{outcome.error}")

    class Fails(MiddlewareBase):
        def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def, override]
            raise KeyError("audit store down")

    class Never(MiddlewareBase):
        def order(self) -> int:
            return 0

        def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def, override]
            seen.append("never")

    plan = make_agent(ScriptedModel([]), middlewares=[Never(), Fails(), Flush()]).plan
    original = ValueError("the call failed")
    error = asyncio.run(plan.notify_finish(None, RuntimeContext(), None, original))  # type: ignore[arg-type]
    assert isinstance(error, KeyError) and error.__context__ is original
    assert seen == ["flush:the call failed"]
    assert asyncio.run(make_agent(ScriptedModel([])).plan.notify_finish(
        None, RuntimeContext(), None, original)) is original  # type: ignore[arg-type]
