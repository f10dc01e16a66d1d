"""A tool's own middlewares (issue #24, item 3): ``@tool(middlewares=[...])`` and
``Tool.with_middleware(mw)``, an onion around one tool's execution wherever it runs
(in an agent under its ``on_acting`` chain, as a sub-agent's tool, called directly),
whose short-circuits, rewrites and retries follow the ``on_acting`` rule."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
import reactivex
import reactivex.operators as ops

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    MiddlewareBase,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultState,
    ToolResultTextDeltaEvent,
    ToolUseBlock,
    tool,
)
from rx_agent.testing import assert_no_orphan_tool_calls, assert_well_formed, collect
from rx_agent.tool import Tool, ToolMiddlewareError, answer


def _agent(model: ScriptedModel, *tools: Any, **kwargs: Any) -> ReActAgent:
    return ReActAgent(name="a", model=model, toolkit=Toolkit(list(tools)),
                      retry_backoff=(0.0, 0.0), **kwargs)


def _results(ctx: RuntimeContext) -> list[Any]:
    assert ctx.agent_state is not None
    return [b for m in ctx.agent_state.context for b in m.tool_results]


def _one_each(events: list[AgentEvent], *ids: str) -> None:
    assert_well_formed(events)
    starts = Counter(e.tool_call_id for e in events if isinstance(e, ToolResultStartEvent))
    ends = Counter(e.tool_call_id for e in events if isinstance(e, ToolResultEndEvent))
    assert starts == ends == Counter(ids), (starts, ends)


def logging_mw(log: list[str], name: str) -> Any:
    def mw(tool: Tool, ctx: Any, call: ToolUseBlock, next: Any) -> Any:
        log.append(f"{name} pre {call.input}")
        return next(call).pipe(ops.do_action(on_completed=lambda: log.append(f"{name} post")))

    return mw


# -- attaching -----------------------------------------------------------------------------


async def test_the_first_middleware_is_the_outermost_with_both_spellings() -> None:
    log: list[str] = []

    @tool(middlewares=[logging_mw(log, "a"), logging_mw(log, "b")])
    def echo(x: int) -> int:
        """Echo."""
        log.append("tool")
        return x

    also = echo.with_middleware(logging_mw(log, "c"))
    assert echo.middlewares != also.middlewares and len(also.middlewares) == 3
    result = await also.execute({"x": 1})
    assert (result.text, result.state) == ("1", ToolResultState.SUCCESS)
    assert log == ["a pre {'x': 1}", "b pre {'x': 1}", "c pre {'x': 1}", "tool",
                   "c post", "b post", "a post"]
    log.clear()
    await echo.execute({"x": 2})  # with_middleware left the original alone
    assert log == ["a pre {'x': 2}", "b pre {'x': 2}", "tool", "b post", "a post"]


def test_registering_a_tool_keeps_its_middlewares() -> None:
    mw = logging_mw([], "a")

    @tool(middlewares=[mw])
    def echo(x: int) -> int:
        """Echo."""
        return x

    toolkit = Toolkit([echo])
    registered = toolkit.get("echo")
    assert registered is not None and registered.middlewares == (mw,)
    renamed = Toolkit().register_tool(echo, name="other")
    assert renamed.middlewares == (mw,)


def test_middlewares_that_cannot_be_called_are_refused_at_once() -> None:
    class Cache:
        def __call__(self, tool: Any, ctx: Any, call: Any, next: Any) -> Any:
            return next(call)

    def echo(x: int) -> int:
        """Echo."""
        return x

    with pytest.raises(TypeError, match=r"tool 'echo': middleware #0 is the class Cache; "
                                        r"pass an instance"):
        tool(middlewares=[Cache])(echo)
    with pytest.raises(TypeError, match=r"middleware #1 \(int\) is not callable"):
        tool(middlewares=[Cache(), 3])(echo)
    with pytest.raises(TypeError, match=r"middlewares must be a list"):
        tool(middlewares=Cache())(echo)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"is not callable"):
        tool(echo).with_middleware("cache")  # type: ignore[arg-type]


# -- wherever the tool runs ---------------------------------------------------------------


async def test_called_directly_the_events_go_to_emit_and_the_result_is_returned() -> None:
    events: list[AgentEvent] = []

    def shout(tool: Tool, ctx: Any, call: ToolUseBlock, next: Any) -> Any:
        def up(e: AgentEvent) -> AgentEvent:
            if isinstance(e, ToolResultTextDeltaEvent):
                return e.model_copy(update={"delta": e.delta.upper()})
            return e

        return next().pipe(ops.map(up))  # next() goes on with the call it was given

    @tool(middlewares=[shout])
    def greet(name: str, ctx: RuntimeContext) -> str:
        """Greet."""
        return f"hello {name} from {ctx.get('where')}"

    ctx = RuntimeContext()
    ctx.put("where", "here")
    result = await greet.execute({"name": "ada"}, ctx, emit=events.append)
    assert result.text == "HELLO ADA FROM HERE"
    assert [type(e).__name__ for e in events] == [
        "ToolResultStartEvent", "ToolResultTextDeltaEvent", "ToolResultEndEvent"]
    with pytest.raises(TypeError, match="takes the arguments as a dict"):
        await greet.execute("ada")  # type: ignore[arg-type]


def test_inside_an_agent_it_runs_under_on_acting_and_its_result_is_stored() -> None:
    seen_by_on_acting: list[str] = []

    class Watch(MiddlewareBase):
        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_ACTING}

        def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            return next(input).pipe(ops.do_action(
                lambda e: seen_by_on_acting.append(e.delta)
                if isinstance(e, ToolResultTextDeltaEvent) else None))

    def cents(tool: Tool, ctx: Any, call: ToolUseBlock, next: Any) -> Any:
        return next(call).pipe(ops.map(
            lambda e: e.model_copy(update={"delta": e.delta + " cents"})
            if isinstance(e, ToolResultTextDeltaEvent) else e))

    @tool(middlewares=[cents])
    def price(item: str) -> int:
        """The price of an item."""
        return 42

    model = ScriptedModel([[ToolUseBlock("c1", "price", {"item": "tea"})], "ok"])
    ctx = RuntimeContext(session_id="s")
    events = collect(_agent(model, price, middlewares=[Watch()]).stream("hi", ctx))
    _one_each(events, "c1")
    assert seen_by_on_acting == ["42 cents"]
    assert [r.text for r in _results(ctx)] == ["42 cents"]


def test_as_the_tool_of_a_sub_agent_the_middleware_runs_there() -> None:
    log: list[str] = []

    @tool(middlewares=[logging_mw(log, "inner")])
    def lookup(q: str) -> str:
        """Look up."""
        return f"found {q}"

    sub = ReActAgent(name="researcher", retry_backoff=(0.0, 0.0), toolkit=Toolkit([lookup]),
                     model=ScriptedModel([[ToolUseBlock("s1", "lookup", {"q": "rx"})],
                                          "it is found"]))
    parent_model = ScriptedModel([[ToolUseBlock("p1", "researcher", {"task": "find rx"})],
                                  "done"])
    ctx = RuntimeContext(session_id="p")
    collect(_agent(parent_model, sub.as_tool()).stream("go", ctx))
    assert log == ["inner pre {'q': 'rx'}", "inner post"]
    assert [r.text for r in _results(ctx)] == ["it is found"]


# -- short-circuit, rewrite, retry -----------------------------------------------------------


def test_a_cache_answers_repeated_calls_without_running_the_tool() -> None:
    ran: list[str] = []
    cache: dict[str, str] = {}

    def caching(tool: Tool, ctx: Any, call: ToolUseBlock, next: Any) -> Any:
        key = call.input["q"]
        if key in cache:
            return answer(call, cache[key])
        parts: list[str] = []

        def keep(e: AgentEvent) -> None:
            if isinstance(e, ToolResultTextDeltaEvent):
                parts.append(e.delta)
            elif isinstance(e, ToolResultEndEvent) and e.state is ToolResultState.SUCCESS:
                cache[key] = "".join(parts)

        return next(call).pipe(ops.do_action(keep))

    @tool(middlewares=[caching])
    def search(q: str) -> str:
        """Search."""
        ran.append(q)
        return f"results for {q}"

    model = ScriptedModel([[ToolUseBlock("c1", "search", {"q": "rx"})],
                           [ToolUseBlock("c2", "search", {"q": "rx"})], "done"])
    ctx = RuntimeContext(session_id="s")
    events = collect(_agent(model, search).stream("hi", ctx))
    assert ran == ["rx"]
    _one_each(events, "c1", "c2")
    assert [(r.id, r.text) for r in _results(ctx)] == [("c1", "results for rx"),
                                                       ("c2", "results for rx")]
    reply_ids = {e.reply_id for e in events if isinstance(e, ToolResultStartEvent)}
    assert len(reply_ids) == 2  # the cached answer carries its batch's reply id


def test_validated_arguments_are_the_ones_that_run_and_are_stored() -> None:
    ran: list[int] = []

    def validate(tool: Tool, ctx: Any, call: ToolUseBlock, next: Any) -> Any:
        n = call.input.get("n")
        if not isinstance(n, int) or n < 0:
            return answer(call, f"Error: n must be a whole number >= 0, got {n!r}",
                          ToolResultState.ERROR)
        return next(call.model_copy(update={"input": {"n": min(n, 10)}}))

    @tool(middlewares=[validate])
    def count(n: int) -> str:
        """Count to n."""
        ran.append(n)
        return " ".join(str(i) for i in range(1, n + 1))

    model = ScriptedModel([[ToolUseBlock("c1", "count", {"n": -1}),
                            ToolUseBlock("c2", "count", {"n": 99})], "done"])
    ctx = RuntimeContext(session_id="s")
    events = collect(_agent(model, count).stream("hi", ctx))
    _one_each(events, "c1", "c2")
    assert ran == [10]
    first, second = _results(ctx)
    assert first.state is ToolResultState.ERROR and "got -1" in first.text
    assert second.text == "1 2 3 4 5 6 7 8 9 10"
    assert ctx.agent_state is not None
    calls = [c.input for m in ctx.agent_state.context for c in m.tool_calls]
    assert calls == [{"n": -1}, {"n": 10}]  # what ran is what is stored
    assert [c.input for c in model.calls[1].messages[1].tool_calls] == [{"n": -1}, {"n": 10}]


def test_a_retry_that_holds_back_the_failed_attempt_stores_one_result() -> None:
    attempts: list[int] = []

    def retry(tool: Tool, ctx: Any, call: ToolUseBlock, next: Any) -> Any:
        def attempt(left: int) -> Any:
            def decide(events: list[AgentEvent]) -> Any:
                failed = any(isinstance(e, ToolResultEndEvent)
                             and e.state is ToolResultState.ERROR for e in events)
                return attempt(left - 1) if failed and left > 1 else reactivex.from_iterable(
                    events)

            return next(call).pipe(ops.to_list(), ops.flat_map(decide))

        return attempt(3)

    @tool(middlewares=[retry])
    def flaky() -> str:
        """Works the third time."""
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return "finally"

    model = ScriptedModel([[ToolUseBlock("c1", "flaky", {})], "done"])
    ctx = RuntimeContext(session_id="s")
    events = collect(_agent(model, flaky).stream("hi", ctx))
    assert len(attempts) == 3
    _one_each(events, "c1")
    assert [(r.text, r.state) for r in _results(ctx)] == [("finally", ToolResultState.SUCCESS)]


def test_a_timeout_with_a_fallback_cancels_the_tool_and_keeps_the_fallback() -> None:
    cancelled: list[bool] = []

    def timeout(tool: Tool, ctx: Any, call: ToolUseBlock, next: Any) -> Any:
        return next(call).pipe(ops.timeout(0.1, other=answer(call, "stale: cached value")))

    @tool(middlewares=[timeout])
    async def quote(symbol: str) -> str:
        """A slow quote."""
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "fresh"

    model = ScriptedModel([[ToolUseBlock("c1", "quote", {"symbol": "RX"})], "done"])
    ctx = RuntimeContext(session_id="s")
    began = time.monotonic()
    events = collect(_agent(model, quote).stream("hi", ctx), timeout=5)
    assert time.monotonic() - began < 2.5
    _one_each(events, "c1")
    assert [(r.text, r.state) for r in _results(ctx)] == [
        ("stale: cached value", ToolResultState.SUCCESS)]
    assert cancelled == [True]


def test_a_middleware_that_stops_forwarding_gets_the_real_result_drained() -> None:
    finished: list[bool] = []

    @tool(middlewares=[lambda tool, ctx, call, next: next(call).pipe(ops.take(1))])
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(0.1)
        finished.append(True)
        return "real"

    model = ScriptedModel([[ToolUseBlock("c1", "slow", {})], "done"])
    ctx = RuntimeContext(session_id="s")
    events = collect(_agent(model, slow).stream("hi", ctx))
    assert finished == [True]
    _one_each(events, "c1")
    assert [r.text for r in _results(ctx)] == ["real"]


def test_next_subscribed_on_another_thread_runs_the_tool_on_the_loop() -> None:
    def later(tool: Tool, ctx: Any, call: ToolUseBlock, next: Any) -> Any:
        # reactivex.timer fires on a timer thread without a scheduler.
        return reactivex.timer(0.01).pipe(ops.flat_map(lambda _: next(call)))

    @tool(middlewares=[later])
    async def where() -> str:
        """Which loop."""
        return "on the loop" if asyncio.get_running_loop() else "?"

    model = ScriptedModel([[ToolUseBlock("c1", "where", {})], "done"])
    ctx = RuntimeContext(session_id="s")
    events = collect(_agent(model, where).stream("hi", ctx))
    _one_each(events, "c1")
    assert [r.text for r in _results(ctx)] == ["on the loop"]


# -- failures and broken contracts ----------------------------------------------------------


def test_a_middleware_that_raises_fails_the_call_like_a_tool() -> None:
    def broken(tool: Tool, ctx: Any, call: ToolUseBlock, next: Any) -> Any:
        raise RuntimeError("cache backend down")

    @tool(middlewares=[broken])
    def search(q: str) -> str:
        """Search."""
        raise AssertionError("never runs")

    model = ScriptedModel([[ToolUseBlock("c1", "search", {"q": "x"})], "recovered"])
    ctx = RuntimeContext(session_id="s")
    events = collect(_agent(model, search).stream("hi", ctx))
    _one_each(events, "c1")
    (result,) = _results(ctx)
    assert result.state is ToolResultState.ERROR
    assert result.text == "Error: tool 'search' raised RuntimeError: cache backend down"


def test_a_middleware_that_answers_nothing_gets_a_not_executed_result() -> None:
    @tool(middlewares=[lambda tool, ctx, call, next: reactivex.empty()])
    def search(q: str) -> str:
        """Search."""
        raise AssertionError("never runs")

    result = asyncio.run(search.execute({"q": "x"}))
    assert result.state is ToolResultState.ERROR
    assert result.text == "Not executed: no middleware of tool 'search' ran or answered it."


@pytest.mark.parametrize("how", ["id", "name", "not-a-call", "not-observable", "twice",
                                 "other-call"])
def test_a_broken_contract_fails_the_reply_naming_the_middleware(how: str) -> None:
    def breaks(tool: Tool, ctx: Any, call: ToolUseBlock, next: Any) -> Any:
        if how == "id":
            return next(call.model_copy(update={"id": "other"}))
        if how == "name":
            return next(call.model_copy(update={"name": "rm"}))
        if how == "not-a-call":
            return next({"q": "x"})
        if how == "not-observable":
            return [call]
        if how == "twice":
            return reactivex.concat(next(call), answer(call, "again"))
        return answer(ToolUseBlock("ghost", "search", {}), "boo")

    @tool(middlewares=[breaks])
    def search(q: str) -> str:
        """Search."""
        return "ok"

    model = ScriptedModel([[ToolUseBlock("c1", "search", {"q": "x"})], "never"])
    ctx = RuntimeContext(session_id="s")
    with pytest.raises(ToolMiddlewareError) as raised:
        collect(_agent(model, search).stream("hi", ctx))
    message = str(raised.value)
    assert "breaks" in message and "'search'" in message, message
    expected = {"id": "not the call's id or tool", "name": "not the call's id or tool",
                "not-a-call": "not a ToolUseBlock", "not-observable": "expected an Observable",
                "twice": "a second result", "other-call": "not one of the calls it was given"}
    assert expected[how] in message
    assert_no_orphan_tool_calls(ctx.agent_state.context)  # type: ignore[union-attr]
