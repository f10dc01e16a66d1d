"""Errors name the fix: the messages a port's usual slips get, checked word for word
where the wording is the point."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest
import reactivex
from conftest import make_agent
from reactivex import operators as ops

from rx_agent import (
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    Msg,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    tool,
)


@tool
def clock() -> str:
    """The current time."""
    return "12:00"


# -- constructor keywords other libraries use ----------------------------------------------------


@pytest.mark.parametrize(
    ("keyword", "value", "hint"),
    [
        ("system_prompt", "Be brief.", "sys_prompt"),
        ("tools", [clock], "toolkit=Toolkit([...])"),
        ("middleware", [MiddlewareBase()], "middlewares"),
    ],
)
def test_another_librarys_keyword_gets_the_name_here(keyword: str, value: Any, hint: str) -> None:
    with pytest.raises(TypeError) as info:
        ReActAgent(name="a", model=ScriptedModel([]), **{keyword: value})
    assert str(info.value) == (
        f"ReActAgent() got an unexpected keyword argument {keyword!r}; did you mean `{hint}`?"
    )


def test_a_near_miss_keyword_gets_the_closest_name() -> None:
    with pytest.raises(TypeError, match=r"'max_iter'; did you mean `max_iters`\?$"):
        ReActAgent(name="a", model=ScriptedModel([]), max_iter=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("name", "hint"),
    [("system_prompt", "sys_prompt"), ("tools", "toolkit(Toolkit([...]))"),
     ("middlewares_", "middlewares")],
)
def test_the_builder_answers_the_same_slips(name: str, hint: str) -> None:
    with pytest.raises(AttributeError) as info:
        getattr(ReActAgent.builder(), name)
    assert str(info.value) == (
        f"'ReActAgentBuilder' object has no attribute {name!r}; did you mean `{hint}`?"
    )


def test_the_suggested_keywords_build() -> None:
    agent = ReActAgent(name="a", model=ScriptedModel(["hi"]), sys_prompt="Be brief.",
                       toolkit=Toolkit([clock]), middlewares=[MiddlewareBase()])
    assert agent.toolkit.names == ["clock"]


# -- on_system_prompt that returns nothing -------------------------------------------------------


class _NoReturn(MiddlewareBase):
    def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def, override]
        _ = current_prompt + " (edited)"  # the slip: no return


class _AsyncNoReturn(MiddlewareBase):
    async def on_system_prompt(self, agent, current_prompt):  # type: ignore[no-untyped-def, override]
        await asyncio.sleep(0)


def test_an_on_system_prompt_returning_none_says_so() -> None:
    agent = make_agent(ScriptedModel(["x"]), middlewares=[_NoReturn()])
    with pytest.raises(TypeError) as info:
        agent.call_sync("hi")
    assert str(info.value) == (
        "_NoReturn.on_system_prompt() returned None (did it forget `return current_prompt`?); "
        "expected a str"
    )


def test_an_async_on_system_prompt_returning_none_says_so() -> None:
    agent = make_agent(ScriptedModel(["x"]), middlewares=[_AsyncNoReturn()])
    with pytest.raises(TypeError, match=r"^_AsyncNoReturn\.on_system_prompt\(\) returned None "
                                        r"from its coroutine \(did it forget `return"):
        agent.call_sync("hi", RuntimeContext())


# -- a hook stream that carries something other than events --------------------------------------


class _Emits(MiddlewareBase):
    """Emits ``item`` before the inner stream at ``point``."""

    def __init__(self, point: ExtensionPoint, item: Any) -> None:
        self.point, self.item = point, item

    def active_points(self):  # type: ignore[no-untyped-def]
        return {self.point}

    def _emit(self, input: Any, next: Any) -> Any:
        return reactivex.concat(reactivex.of(self.item), next(input))

    def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        return self._emit(input, next)

    def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        return self._emit(input, next)

    def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        return self._emit(input, next)


class _Watches(MiddlewareBase):
    """Overrides on_reasoning and on_model_call with pass-throughs (every point is its)."""

    def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        return next(input)

    def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        return next(input)


class _Bystander(MiddlewareBase):
    """Takes part in every point and overrides none of them."""


_TIMER_HINT = ("(a port of Mono.delay(...).thenMany(...) emits the timer's 0: drop it with "
               "ops.ignore_elements() or use ops.flat_map)")


def _failure(*middlewares: MiddlewareBase) -> str:
    agent = make_agent(ScriptedModel(["x"]), middlewares=list(middlewares))
    with pytest.raises(TypeError) as info:
        agent.call_sync("hi")
    return str(info.value)


def test_an_int_from_on_model_call_names_that_point_and_shows_the_timer_hint() -> None:
    message = _failure(_Watches(), _Emits(ExtensionPoint.ON_MODEL_CALL, 0), _Bystander())
    assert message == (
        "one of _Watches.on_model_call(), _Emits.on_model_call() emitted int 0, not an "
        f"AgentEvent, into the on_model_call stream {_TIMER_HINT}"
    )


def test_an_int_from_on_reasoning_names_only_that_point() -> None:
    message = _failure(_Emits(ExtensionPoint.ON_REASONING, 0), _Bystander(),
                       _Emits(ExtensionPoint.ON_MODEL_CALL, "never reached"))
    assert message == (
        "_Emits#1.on_reasoning() emitted int 0, not an AgentEvent, into the on_reasoning "
        f"stream {_TIMER_HINT}"
    )


def test_an_item_from_on_model_call_without_reasoning_hooks_names_on_model_call() -> None:
    message = _failure(_Bystander(), _Emits(ExtensionPoint.ON_MODEL_CALL, 7))
    assert message.startswith("_Emits.on_model_call() emitted int 7, not an AgentEvent, "
                              "into the on_model_call stream")


def test_a_str_gets_no_timer_hint() -> None:
    message = _failure(_Emits(ExtensionPoint.ON_MODEL_CALL, "tick"))
    assert message == ("_Emits.on_model_call() emitted str 'tick', not an AgentEvent, into "
                       "the on_model_call stream")


def test_a_stream_inside_the_stream_suggests_flat_map() -> None:
    message = _failure(_Emits(ExtensionPoint.ON_REASONING, reactivex.empty()))
    assert "into the on_reasoning stream (a stream inside the stream: to splice one in per " \
           "event, use ops.flat_map or ops.concat_map instead of ops.map)" in message


def test_a_message_in_the_on_agent_stream_says_the_runtime_emits_it() -> None:
    message = _failure(_Emits(ExtensionPoint.ON_AGENT, Msg(role="assistant", content="done")))
    assert message.startswith("_Emits.on_agent() emitted Msg ")
    assert message.endswith("into the on_agent stream (the reply's message is not an event: the "
                            "runtime emits it itself, in AgentResultEvent; emit events such as "
                            "TextBlockDeltaEvent to add text)")


# -- Java record accessors: input.messages() ----------------------------------------------------


class _JavaAccessors(MiddlewareBase):
    """``new ModelCallInput(input.messages(), input.tools(), input.options(), fallback)``."""

    def __init__(self, accessor: str) -> None:
        self.accessor = accessor

    def active_points(self):  # type: ignore[no-untyped-def]
        return {ExtensionPoint.ON_MODEL_CALL}

    def on_model_call(self, agent, input, next):  # type: ignore[no-untyped-def, override]
        if self.accessor == "messages":
            return next(ModelCallInput(input.messages(), input.tools, input.options, input.model))
        return next(input.with_(model=input.model()))


class _AsyncAccessor(MiddlewareBase):
    async def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        await asyncio.sleep(0)
        return next(input.with_(messages=input.messages()[-2:]))


class _GeneratorAccessor(MiddlewareBase):
    async def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        for call in input.tool_calls():
            yield call


class _FinishAccessor(MiddlewareBase):
    def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def, override]
        print(outcome.result().text)


def _field_message(name: str, owner: str, held: str, middleware: str, point: str) -> str:
    return (f"{middleware}.{point}(): {name} is a field: write input.{name}, without the "
            f"parentheses of Java's record accessor ({owner}.{name} holds {held}, which "
            "cannot be called)")


def test_a_java_accessor_on_an_input_record_says_it_is_a_field() -> None:
    message = _failure(_JavaAccessors("messages"))
    assert message == _field_message("messages", "ModelCallInput",
                                     "a read-only sequence of messages", "_JavaAccessors",
                                     "on_model_call")


def test_a_java_accessor_on_the_model_field_says_it_is_a_field() -> None:
    message = _failure(_JavaAccessors("model"))
    assert message == _field_message("model", "ModelCallInput", "a ScriptedModel",
                                     "_JavaAccessors", "on_model_call")


def test_a_java_accessor_in_an_async_hook_says_it_is_a_field() -> None:
    message = _failure(_AsyncAccessor())
    assert message == _field_message("messages", "ReasoningInput",
                                     "a read-only sequence of messages", "_AsyncAccessor",
                                     "on_reasoning")


def test_a_java_accessor_in_a_generator_hook_says_it_is_a_field() -> None:
    agent = make_agent(ScriptedModel([[ToolUseBlock("c1", "clock", {})], "x"]),
                       toolkit=Toolkit([clock]), middlewares=[_GeneratorAccessor()])
    with pytest.raises(TypeError) as info:
        agent.call_sync("hi")
    assert str(info.value) == _field_message("tool_calls", "ActingInput", "a tuple",
                                             "_GeneratorAccessor", "on_acting")
    assert isinstance(info.value.__cause__, TypeError)  # Python's own error is kept
    assert str(info.value.__cause__) == "'tuple' object is not callable"


def test_a_java_accessor_in_on_agent_finish_says_it_is_a_field() -> None:
    message = _failure(_FinishAccessor())
    assert message == ("_FinishAccessor.on_agent_finish(): result is a field: write "
                       "outcome.result, without the parentheses of Java's record accessor "
                       "(AgentFinishOutcome.result holds a Msg, which cannot be called)")


def test_any_other_type_error_of_a_hook_is_left_as_it_is() -> None:
    boom = TypeError("'tuple' object is not callable")

    class Raises(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            raise boom

    class Calls(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
            handlers = input.messages
            return handlers(input)  # a local name called, not a field

    agent = make_agent(ScriptedModel(["x"]), middlewares=[Raises()])
    with pytest.raises(TypeError) as info:
        agent.call_sync("hi")
    assert info.value is boom
    assert _failure(Calls()) == "'HistoryView' object is not callable"


# -- a callback in a hook's stream that raises ----------------------------------------------------


class _FailingCleanup(MiddlewareBase):
    """``next(input).pipe(ops.finally_action(cleanup))`` whose cleanup raises."""

    def __init__(self, point: ExtensionPoint, *, asynchronous: bool = False) -> None:
        self.point, self.asynchronous = point, asynchronous

    def active_points(self):  # type: ignore[no-untyped-def]
        return {self.point}

    def _chain(self, input: Any, next: Any) -> Any:
        def cleanup() -> None:
            raise RuntimeError("cleanup failed")

        chain = next(input).pipe(ops.finally_action(cleanup), ops.map(lambda e: e))
        if not self.asynchronous:
            return chain

        async def later() -> Any:
            return chain

        return later()

    def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        return self._chain(input, next)

    def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        return self._chain(input, next)

    def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        return self._chain(input, next)

    def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        return self._chain(input, next)


def _cleanup_reports(caplog: pytest.LogCaptureFixture) -> list[str]:
    assert not [r for r in caplog.records if r.name == "asyncio"], "an anonymous loop error"
    return [r.getMessage() for r in caplog.records
            if r.name == "rx_agent" and "cleanup failed" in r.getMessage()]


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("point", [ExtensionPoint.ON_AGENT, ExtensionPoint.ON_REASONING,
                                   ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_ACTING])
async def test_a_cleanup_that_raises_is_logged_naming_the_middleware(
    point: ExtensionPoint, asynchronous: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    agent = make_agent(ScriptedModel([[ToolUseBlock("c1", "clock", {})], "done"]),
                       toolkit=Toolkit([clock]),
                       middlewares=[_FailingCleanup(point, asynchronous=asynchronous)])
    assert (await asyncio.wait_for(agent.acall("hi"), 5)).text == "done"
    await asyncio.sleep(0.05)  # anything the loop would log late
    reports = _cleanup_reports(caplog)
    assert reports, "the failing cleanup was not reported"
    for report in reports:
        assert report.startswith(
            f"_FailingCleanup.{point.value}(): a callback of its stream (a dispose action, "
            "such as ops.finally_action's) raised after the stream ended or was disposed, "
            "where the call cannot see it: RuntimeError('cleanup failed') in "
            "_FailingCleanup._chain.<locals>.cleanup (")


def test_a_cleanup_that_raises_when_the_caller_disposes_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    agent = make_agent(ScriptedModel([["a"] * 100], delay=0.01),
                       middlewares=[_FailingCleanup(ExtensionPoint.ON_MODEL_CALL)])
    seen = threading.Event()
    subscription = agent.stream("hi").subscribe(lambda e: seen.set(), lambda e: None)
    assert seen.wait(5)
    subscription.dispose()
    time.sleep(0.1)
    assert any(r.startswith("_FailingCleanup.on_model_call(): a callback of its stream")
               for r in _cleanup_reports(caplog))


class _GeneratorCleanup(MiddlewareBase):
    async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        try:
            async for event in next(input):
                yield event
        finally:
            raise RuntimeError("generator cleanup failed")


def test_a_generator_whose_finally_raises_fails_the_call() -> None:
    agent = make_agent(ScriptedModel(["x"]), middlewares=[_GeneratorCleanup()])
    with pytest.raises(RuntimeError, match="generator cleanup failed"):
        agent.call_sync("hi")


def test_a_generator_whose_finally_raises_after_disposal_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    agent = make_agent(ScriptedModel([["a"] * 100], delay=0.01),
                       middlewares=[_GeneratorCleanup()])
    seen = threading.Event()
    subscription = agent.stream("hi").subscribe(lambda e: seen.set(), lambda e: None)
    assert seen.wait(5)
    subscription.dispose()
    deadline = time.monotonic() + 5
    while not _cleanup_reports(caplog) and time.monotonic() < deadline:
        time.sleep(0.01)
    [report] = _cleanup_reports(caplog)
    assert report == ("_GeneratorCleanup.on_model_call() failed while its generator closed, "
                      "after the stream was disposed: RuntimeError('generator cleanup failed')")
