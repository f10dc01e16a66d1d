"""No orphan tool call on any error path; tool failures of any kind become results;
bad text never enters the context (issue #10, items 3-7 and 13)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import reactivex
import reactivex.operators as ops
from conftest import assert_no_orphan_tool_calls, make_agent, tool_results

from rx_agent import (
    AgentEvent,
    AgentState,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    Msg,
    RuntimeContext,
    ScriptedModel,
    TextBlock,
    Toolkit,
    ToolResultEndEvent,
    ToolResultState,
    ToolUseBlock,
    tool,
)


def _toolkit(*fns: Any) -> Toolkit:
    toolkit = Toolkit()
    for fn in fns:
        toolkit.register_tool(fn)
    return toolkit


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def _echo_round(n: int = 1) -> list[Any]:
    return [ToolUseBlock(f"e{i}", "echo", {"text": f"t{i}"}) for i in range(n)]


class _Acting(MiddlewareBase):
    def __init__(self, how: str) -> None:
        self.how = how

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_ACTING}

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        if self.how == "raise-before":
            raise RuntimeError("acting hook failed")
        if self.how == "none":
            return None
        if self.how == "not-observable":
            return [1, 2]
        inner = next(input)
        if self.how == "raise-after":
            raise RuntimeError("acting hook failed after next")
        if self.how == "operator-raises":
            def boom(event: AgentEvent) -> AgentEvent:
                if isinstance(event, ToolResultEndEvent):
                    raise RuntimeError("operator failed")
                return event
            return inner.pipe(ops.map(boom))
        raise AssertionError(self.how)


@pytest.mark.parametrize(
    "how", ["raise-before", "raise-after", "none", "not-observable", "operator-raises"]
)
async def test_a_failing_on_acting_hook_leaves_no_orphan_tool_call(how: str) -> None:
    model = ScriptedModel([_echo_round(2), "after", "next call"])
    agent = make_agent(model, toolkit=_toolkit(echo), middlewares=[_Acting(how)])
    ctx = RuntimeContext(session_id="s")
    with pytest.raises((RuntimeError, TypeError)):
        await asyncio.wait_for(agent.acall("go", ctx), 3)
    context = ctx.agent_state.context
    assert_no_orphan_tool_calls(context)
    assert [r.id for r in tool_results(context)] == ["e0", "e1"]


class _AgentFailsMidRun(MiddlewareBase):
    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_AGENT}

    def on_agent(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        def boom(event: AgentEvent) -> AgentEvent:
            if type(event).__name__ == "ToolResultStartEvent":
                raise RuntimeError("on_agent failed mid-run")
            return event
        return next(input).pipe(ops.map(boom))


async def test_an_on_agent_hook_failing_mid_run_leaves_no_orphan_tool_call() -> None:
    model = ScriptedModel([_echo_round(1), "after"])
    agent = make_agent(model, toolkit=_toolkit(echo), middlewares=[_AgentFailsMidRun()])
    ctx = RuntimeContext(session_id="s")
    with pytest.raises(RuntimeError, match="mid-run"):
        await asyncio.wait_for(agent.acall("go", ctx), 3)
    await asyncio.sleep(0.05)  # the cancelled inner run unwinds
    assert_no_orphan_tool_calls(ctx.agent_state.context)
    # The session goes on normally.
    plain = make_agent(ScriptedModel(["fine"]), toolkit=_toolkit(echo),
                       session_store=agent.session_store)
    msg = await asyncio.wait_for(plain.acall("again", ctx), 3)
    assert msg.text == "fine"


class _TwiceAtOnce(MiddlewareBase):
    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_AGENT}

    def on_agent(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return reactivex.merge(next(input), next(input))


async def test_next_twice_at_once_at_on_agent_fails_clearly() -> None:
    agent = make_agent(ScriptedModel(["one", "two"]), middlewares=[_TwiceAtOnce()])
    ctx = RuntimeContext(session_id="s")
    with pytest.raises(RuntimeError, match=r"_TwiceAtOnce.*next\(\).*twice"):
        await asyncio.wait_for(agent.acall("go", ctx), 3)


class _SequentialRetry(MiddlewareBase):
    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_AGENT}

    def on_agent(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return next(input).pipe(ops.catch(lambda _e, _src: next(input)))


async def test_next_again_after_the_first_inner_run_failed_still_works() -> None:
    model = ScriptedModel([RuntimeError("down"), RuntimeError("down"), RuntimeError("down"),
                           "recovered"])
    agent = make_agent(model, middlewares=[_SequentialRetry()])
    msg = await asyncio.wait_for(agent.acall("go"), 3)
    assert msg.text == "recovered"


def _call_or_hang(agent: Any, ctx: RuntimeContext) -> Msg:
    done = threading.Event()
    box: list[Any] = []

    def on_error(exc: Exception) -> None:
        box.append(exc)
        done.set()

    agent.call("go", ctx).subscribe(box.append, on_error, done.set)
    assert done.wait(3), "the call hung: the runtime loop died"
    assert isinstance(box[-1], Msg), box
    return box[-1]


class _CustomBase(BaseException):
    pass


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt, _CustomBase])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_tool_raising_a_base_exception_is_an_error_result(
    kind: str, exc_type: type[BaseException]
) -> None:
    if kind == "sync":
        @tool
        def bad() -> str:
            """Exits."""
            raise exc_type(2)
    else:
        @tool
        async def bad() -> str:
            """Exits."""
            raise exc_type(2)

    model = ScriptedModel([[ToolUseBlock("b1", "bad", {})], "after",
                           [ToolUseBlock("b2", "bad", {})], "again"])
    agent = make_agent(model, toolkit=_toolkit(bad))
    ctx = RuntimeContext(session_id="s")
    for expected in ("after", "again"):  # the runtime's loop survives: later calls work
        msg = _call_or_hang(agent, ctx)
        assert msg.text == expected
    results = tool_results(ctx.agent_state.context)
    assert [r.state for r in results] == [ToolResultState.ERROR] * 2
    assert exc_type.__name__ in results[0].text


async def test_a_cancelled_error_inside_a_tool_is_a_tool_error() -> None:
    @tool
    async def flaky() -> str:
        """Its own inner await is cancelled."""
        fut = asyncio.get_running_loop().create_future()
        fut.cancel()
        await fut
        return "never"

    model = ScriptedModel([[ToolUseBlock("f1", "flaky", {})], "after"])
    agent = make_agent(model, toolkit=_toolkit(flaky))
    ctx = RuntimeContext(session_id="s")
    msg = await asyncio.wait_for(agent.acall("go", ctx), 3)
    assert msg.text == "after"
    [result] = tool_results(ctx.agent_state.context)
    assert result.state is ToolResultState.ERROR
    assert "CancelledError" in result.text


def test_a_sync_tool_raising_cancelled_error_is_a_tool_error() -> None:
    @tool
    def flaky() -> str:
        """Raises CancelledError itself."""
        raise asyncio.CancelledError()

    model = ScriptedModel([[ToolUseBlock("f1", "flaky", {})], "after"])
    agent = make_agent(model, toolkit=_toolkit(flaky))
    msg = agent.call_sync("go")
    assert msg.text == "after"


@pytest.mark.parametrize("where", ["str", "msg", "block-list"])
async def test_a_lone_surrogate_in_the_input_is_rejected_before_it_enters_the_context(
    where: str,
) -> None:
    agent = make_agent(ScriptedModel(["first", "second"]))
    ctx = RuntimeContext(session_id="s")
    await asyncio.wait_for(agent.acall("hello", ctx), 3)
    bad: Any = {
        "str": "bad \ud800 text",
        "msg": Msg("user", "bad \ud800 text"),
        "block-list": [Msg("user", [TextBlock("ok"), TextBlock("x\udfff")])],
    }[where]
    with pytest.raises(ValueError, match="surrogate"):
        await asyncio.wait_for(agent.acall(bad, ctx), 3)
    state = ctx.agent_state
    assert len(state.context) == 2
    AgentState.model_validate_json(state.model_dump_json())  # still serializes
    msg = await asyncio.wait_for(agent.acall("fine", ctx), 3)
    assert msg.text == "second"


async def test_lone_surrogates_from_models_and_tools_are_sanitized() -> None:
    @tool
    def weird() -> str:
        """Returns a broken string."""
        return "tool \udc80 out"

    model = ScriptedModel([[ToolUseBlock("w1", "weird", {})], ["model \ud83d", " text"]])
    agent = make_agent(model, toolkit=_toolkit(weird))
    ctx = RuntimeContext(session_id="s")
    msg = await asyncio.wait_for(agent.acall("go", ctx), 3)
    assert msg.generate_reason is GenerateReason.MODEL_STOP
    dumped = ctx.agent_state.model_dump_json()  # the stored state serializes
    assert "\ufffd" in msg.text
    AgentState.model_validate_json(dumped)


class _EmitsTimerValue(MiddlewareBase):
    def __init__(self, point: ExtensionPoint) -> None:
        self.point = point

    def active_points(self) -> set[ExtensionPoint]:
        return {self.point}

    def _hook(self, input: Any, next: Any) -> Any:
        # A literal port of Mono.delay(...).thenMany(next.apply(input)): emits the 0.
        return reactivex.concat(reactivex.of(0), next(input))

    def on_agent(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return self._hook(input, next)

    def on_reasoning(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return self._hook(input, next)

    def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return self._hook(input, next)

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return self._hook(input, next)


@pytest.mark.parametrize("point", [ExtensionPoint.ON_AGENT, ExtensionPoint.ON_REASONING,
                                   ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_ACTING])
async def test_a_non_event_item_in_a_hook_stream_is_refused_naming_the_middleware(
    point: ExtensionPoint,
) -> None:
    model = ScriptedModel([_echo_round(1), "done"])
    agent = make_agent(model, toolkit=_toolkit(echo), middlewares=[_EmitsTimerValue(point)])
    ctx = RuntimeContext(session_id="s")
    seen: list[Any] = []
    with pytest.raises(TypeError, match=rf"_EmitsTimerValue.*{point.value}.*int"):
        async for e in agent.astream("go", ctx):
            seen.append(e)
    assert 0 not in seen
    if ctx.agent_state is not None:  # on_agent's 0 comes before the state is bound
        assert_no_orphan_tool_calls(ctx.agent_state.context)
