"""What the on_acting chain returns is what the session keeps (issue #24, item 1).

The tool results the session stores, the next model request sees and the caller
receives are the ones that leave the outermost on_acting hook: one complete result
(start, deltas, end) per tool call, never two.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import reactivex
import reactivex.operators as ops
from conftest import (
    add_toolkit,
    call_add,
    make_agent,
    of_type,
    result_msg,
    stream_error,
    stream_events,
    tool_calls,
    tool_results,
)

from rx_agent import (
    AgentEvent,
    DataBlock,
    ExtensionPoint,
    MiddlewareBase,
    RuntimeContext,
    ScriptedModel,
    SqliteSessionStore,
    TextBlock,
    Toolkit,
    ToolResultBlock,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultState,
    ToolResultTextDeltaEvent,
    ToolUseBlock,
    tool,
)
from rx_agent.session import SessionKey
from rx_agent.testing import assert_no_orphan_tool_calls, assert_well_formed
from rx_agent.tool import answer, current_tool_call


class Acting(MiddlewareBase):
    """An on_acting middleware whose hook is the function given."""

    def __init__(self, hook: Any, order: int = 1) -> None:
        self.hook = hook
        self._order = order

    def order(self) -> int:
        return self._order

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_ACTING}

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return self.hook(input, next)


def one_result_each(events: list[AgentEvent], *ids: str) -> None:
    """The caller got exactly one start and one end for each call, in a valid stream."""
    assert_well_formed(events)
    starts = Counter(e.tool_call_id for e in of_type(events, ToolResultStartEvent))
    ends = Counter(e.tool_call_id for e in of_type(events, ToolResultEndEvent))
    assert starts == Counter(ids), starts
    assert ends == Counter(ids), ends


def text_of(events: list[AgentEvent], call_id: str) -> str:
    return "".join(e.delta for e in of_type(events, ToolResultTextDeltaEvent)
                   if e.tool_call_id == call_id)


def end_of(events: list[AgentEvent], call_id: str) -> ToolResultEndEvent:
    (end,) = [e for e in of_type(events, ToolResultEndEvent) if e.tool_call_id == call_id]
    return end  # type: ignore[no-any-return]


# -- short-circuit -------------------------------------------------------------------------------


def test_a_cache_hit_is_the_one_result_stored_seen_by_the_model_and_saved(tmp_path: Path) -> None:
    ran: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        ran.append(a + b)
        return a + b

    def cached(inp: Any, next: Any) -> Any:
        return reactivex.concat(*[answer(c, "cached!") for c in inp.tool_calls])

    store = SqliteSessionStore(tmp_path / "s.db")
    try:
        model = ScriptedModel([[call_add("c1")], "done"])
        agent = make_agent(model, toolkit=Toolkit([add]), middlewares=[Acting(cached)],
                           session_store=store)
        events = stream_events(agent, "hi", RuntimeContext(session_id="s"))
        assert ran == []
        one_result_each(events, "c1")
        assert text_of(events, "c1") == "cached!"
        assert end_of(events, "c1").state is ToolResultState.SUCCESS
        (seen,) = tool_results(model.calls[1].messages)
        assert (seen.text, seen.state) == ("cached!", ToolResultState.SUCCESS)
        saved = store.load(SessionKey("__anon__", "s"))
        assert saved is not None
        assert [(r.text, r.state) for r in tool_results(saved.context)] == [
            ("cached!", ToolResultState.SUCCESS)]
    finally:
        store.close()


def test_a_call_the_chain_neither_runs_nor_answers_gets_one_not_executed_result() -> None:
    model = ScriptedModel([[call_add("c1"), call_add("c2", 3, 4)], "done"])
    ctx = RuntimeContext(session_id="s")

    def only_first(inp: Any, next: Any) -> Any:
        return next(inp.with_(tool_calls=inp.tool_calls[:1]))

    events = stream_events(make_agent(model, toolkit=add_toolkit(),
                                      middlewares=[Acting(only_first)]), "hi", ctx)
    one_result_each(events, "c1", "c2")
    assert "Not executed" in text_of(events, "c2")
    results = tool_results(ctx.agent_state.context)
    assert [(r.id, r.state) for r in results] == [("c1", ToolResultState.SUCCESS),
                                                  ("c2", ToolResultState.ERROR)]
    assert tool_results(model.calls[1].messages) == results


def test_answering_some_calls_and_running_the_rest_keeps_call_order() -> None:
    model = ScriptedModel([[call_add("c1"), call_add("c2", 3, 4), call_add("c3", 5, 6)], "ok"])
    ctx = RuntimeContext(session_id="s")

    def answers_middle(inp: Any, next: Any) -> Any:
        hit, rest = inp.tool_calls[1], [c for c in inp.tool_calls if c.id != "c2"]
        return reactivex.concat(answer(hit, "from cache"), next(inp.with_(tool_calls=rest)))

    events = stream_events(make_agent(model, toolkit=add_toolkit(),
                                      middlewares=[Acting(answers_middle)]), "hi", ctx)
    one_result_each(events, "c1", "c2", "c3")
    assert [(r.id, r.text) for r in tool_results(ctx.agent_state.context)] == [
        ("c1", "3"), ("c2", "from cache"), ("c3", "11")]


def test_a_result_for_a_call_the_model_never_made_is_refused_naming_the_middleware() -> None:
    class Inventor(MiddlewareBase):
        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_ACTING}

        def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            return reactivex.concat(next(input), answer(call_add("ghost"), "boo"))

    model = ScriptedModel([[call_add("c1")], "never"])
    ctx = RuntimeContext(session_id="s")
    _, error = stream_error(make_agent(model, toolkit=add_toolkit(),
                                       middlewares=[Inventor()]).stream("hi", ctx))
    assert isinstance(error, ValueError)
    assert "Inventor.on_acting()" in str(error) and "'ghost'" in str(error)
    assert "not one of the calls it was given" in str(error)
    assert_no_orphan_tool_calls(ctx.agent_state.context)


def test_running_a_call_the_chain_answered_already_is_skipped() -> None:
    ran: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        ran.append(a + b)
        return a + b

    def twice(inp: Any, next: Any) -> Any:
        return reactivex.concat(next(inp), next(inp))

    model = ScriptedModel([[call_add("c1")], "done"])
    events = stream_events(make_agent(model, toolkit=Toolkit([add]),
                                      middlewares=[Acting(twice)]))
    assert ran == [3]
    one_result_each(events, "c1")


def test_a_second_result_for_an_answered_call_is_refused() -> None:
    def twice(inp: Any, next: Any) -> Any:
        return reactivex.concat(next(inp), answer(inp.tool_calls[0], "again"))

    model = ScriptedModel([[call_add("c1")], "never"])
    ctx = RuntimeContext(session_id="s")
    _, error = stream_error(make_agent(model, toolkit=add_toolkit(),
                                       middlewares=[Acting(twice)]).stream("hi", ctx))
    assert "Acting.on_acting() emitted a second result for tool call 'c1'" in str(error)
    assert [r.id for r in tool_results(ctx.agent_state.context)] == ["c1"]


# -- rewritten results -------------------------------------------------------------------------


def test_a_redacted_result_is_what_is_stored_and_what_the_model_sees_next() -> None:
    @tool
    def lookup() -> str:
        """Returns a secret."""
        return "the key is hunter2"

    def redact(inp: Any, next: Any) -> Any:
        def hide(event: AgentEvent) -> AgentEvent:
            if isinstance(event, ToolResultTextDeltaEvent):
                return event.model_copy(update={"delta": event.delta.replace("hunter2", "***")})
            return event

        return next(inp).pipe(ops.map(hide))

    model = ScriptedModel([[ToolUseBlock("c1", "lookup", {})], "done"])
    ctx = RuntimeContext(session_id="s")
    events = stream_events(make_agent(model, toolkit=Toolkit([lookup]),
                                      middlewares=[Acting(redact)]), "hi", ctx)
    one_result_each(events, "c1")
    assert text_of(events, "c1") == "the key is ***"
    assert [r.text for r in tool_results(ctx.agent_state.context)] == ["the key is ***"]
    assert all("hunter2" not in m.model_dump_json() for m in model.calls[1].messages)


def test_mapping_an_error_to_success_is_the_stored_state() -> None:
    @tool
    def flaky() -> str:
        """Fails."""
        raise RuntimeError("down")

    def fallback(inp: Any, next: Any) -> Any:
        def fix(event: AgentEvent) -> AgentEvent:
            if isinstance(event, ToolResultEndEvent) and event.state is ToolResultState.ERROR:
                return event.model_copy(update={"state": ToolResultState.SUCCESS})
            return event

        return next(inp).pipe(ops.map(fix))

    model = ScriptedModel([[ToolUseBlock("c1", "flaky", {})], "done"])
    ctx = RuntimeContext(session_id="s")
    events = stream_events(make_agent(model, toolkit=Toolkit([flaky]),
                                      middlewares=[Acting(fallback)]), "hi", ctx)
    assert end_of(events, "c1").state is ToolResultState.SUCCESS
    (stored,) = tool_results(ctx.agent_state.context)
    assert stored.state is ToolResultState.SUCCESS and "down" in stored.text
    assert tool_results(model.calls[1].messages)[0].state is ToolResultState.SUCCESS


def test_a_pass_through_layer_stores_the_tool_result_exactly() -> None:
    picture = DataBlock(media_type="image/png", data="aGVsbG8=")

    @tool
    def draw() -> list[Any]:
        """Text, a picture, more text; with a note streamed on the side."""
        handle = current_tool_call()
        assert handle is not None
        handle.text("working...")
        return [TextBlock(text="here:"), picture, TextBlock(text="done")]

    expected = ToolResultBlock("c1", "draw", [TextBlock(text="here:"), picture,
                                              TextBlock(text="done")])
    for middlewares in ([], [Acting(lambda inp, next: next(inp))],
                        [Acting(lambda inp, next: next(inp).pipe(ops.map(lambda e: e)))]):
        model = ScriptedModel([[ToolUseBlock("c1", "draw", {})], "ok"])
        ctx = RuntimeContext(session_id="s")
        events = stream_events(make_agent(model, toolkit=Toolkit([draw]),
                                          middlewares=middlewares), "hi", ctx)
        one_result_each(events, "c1")
        assert tool_results(ctx.agent_state.context) == [expected], middlewares


def test_a_filter_that_drops_a_calls_events_leaves_the_real_result_delivered_once() -> None:
    model = ScriptedModel([[call_add("c1"), call_add("c2", 3, 4)], "done"])
    ctx = RuntimeContext(session_id="s")

    def hide_c2(inp: Any, next: Any) -> Any:
        return next(inp).pipe(ops.filter(lambda e: getattr(e, "tool_call_id", None) != "c2"))

    events = stream_events(make_agent(model, toolkit=add_toolkit(),
                                      middlewares=[Acting(hide_c2)]), "hi", ctx)
    one_result_each(events, "c1", "c2")
    assert text_of(events, "c2") == "7"
    assert [(r.id, r.text) for r in tool_results(ctx.agent_state.context)] == [("c1", "3"),
                                                                               ("c2", "7")]


def test_a_filter_that_drops_end_events_gets_the_real_end_from_the_runtime() -> None:
    model = ScriptedModel([[call_add("c1")], "done"])
    ctx = RuntimeContext(session_id="s")

    def no_ends(inp: Any, next: Any) -> Any:
        return next(inp).pipe(ops.filter(lambda e: not isinstance(e, ToolResultEndEvent)))

    events = stream_events(make_agent(model, toolkit=add_toolkit(),
                                      middlewares=[Acting(no_ends)]), "hi", ctx)
    one_result_each(events, "c1")
    assert end_of(events, "c1").state is ToolResultState.SUCCESS
    assert [r.text for r in tool_results(ctx.agent_state.context)] == ["3"]


# -- stopping forwarding does not cancel -------------------------------------------------------


def _slow_toolkit(finished: list[str], *, safe: bool = False, seconds: float = 0.2) -> Toolkit:
    @tool(concurrency_safe=safe)
    async def slow(tag: str) -> str:
        """Slow."""
        await asyncio.sleep(seconds)
        finished.append(tag)
        return f"slow {tag}"

    return Toolkit([slow])


@pytest.mark.parametrize("safe", [False, True])
@pytest.mark.parametrize("how", ["take", "first", "take_while"])
def test_a_hook_that_stops_forwarding_does_not_cancel_the_tools(how: str, safe: bool) -> None:
    finished: list[str] = []
    operator = {
        "take": ops.take(1),
        "first": ops.first(),
        "take_while": ops.take_while(lambda e: not isinstance(e, ToolResultStartEvent)),
    }[how]
    calls = [ToolUseBlock("k1", "slow", {"tag": "a"}), ToolUseBlock("k2", "slow", {"tag": "b"})]
    model = ScriptedModel([calls, "done"])
    ctx = RuntimeContext(session_id="s")
    agent = make_agent(model, toolkit=_slow_toolkit(finished, safe=safe),
                       middlewares=[Acting(lambda inp, next: next(inp).pipe(operator))])
    events = stream_events(agent, "hi", ctx)
    assert sorted(finished) == ["a", "b"]
    one_result_each(events, "k1", "k2")
    results = tool_results(ctx.agent_state.context)
    assert [(r.id, r.text, r.state) for r in results] == [
        ("k1", "slow a", ToolResultState.SUCCESS), ("k2", "slow b", ToolResultState.SUCCESS)]
    assert tool_results(model.calls[1].messages) == results
    assert result_msg(events).text == "done"


def test_a_timeout_that_answers_every_call_itself_cancels_the_tools() -> None:
    finished: list[str] = []

    def timeout(inp: Any, next: Any) -> Any:
        fallback = reactivex.concat(*[answer(c, "too slow", ToolResultState.ERROR)
                                      for c in inp.tool_calls])
        return next(inp).pipe(ops.timeout(0.1, other=fallback))

    calls = [ToolUseBlock("k1", "slow", {"tag": "a"})]
    model = ScriptedModel([calls, "done"])
    ctx = RuntimeContext(session_id="s")
    agent = make_agent(model, toolkit=_slow_toolkit(finished, seconds=5),
                       middlewares=[Acting(timeout)])
    began = time.monotonic()
    events = stream_events(agent, "hi", ctx)
    assert time.monotonic() - began < 2.5
    one_result_each(events, "k1")
    assert [(r.text, r.state) for r in tool_results(ctx.agent_state.context)] == [
        ("too slow", ToolResultState.ERROR)]
    assert finished == []


# -- the stored tool call is the input that ran --------------------------------------------------


def test_rewritten_arguments_are_stored_before_the_tool_starts(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    seen_stored: list[Any] = []
    ran: list[str] = []

    @tool
    def search(query: str) -> str:
        """Search."""
        ran.append(query)
        peek = SqliteSessionStore(path)  # what a worker restarting now would load
        try:
            state = peek.load(SessionKey("__anon__", "s"))
            assert state is not None
            seen_stored.extend(c.input for c in tool_calls(state.context))
        finally:
            peek.close()
        return f"found {query}"

    def trim(inp: Any, next: Any) -> Any:
        calls = [c.model_copy(update={"input": {"query": c.input["query"].strip()}})
                 for c in inp.tool_calls]
        return next(inp.with_(tool_calls=calls))

    store = SqliteSessionStore(path)
    try:
        model = ScriptedModel([[ToolUseBlock("c1", "search", {"query": "  rx  "})], "done"])
        ctx = RuntimeContext(session_id="s")
        agent = make_agent(model, toolkit=Toolkit([search]), middlewares=[Acting(trim)],
                           session_store=store)
        stream_events(agent, "hi", ctx)
        assert ran == ["rx"]
        assert seen_stored == [{"query": "rx"}]
        assert [c.input for c in tool_calls(ctx.agent_state.context)] == [{"query": "rx"}]
        assert [c.input for c in tool_calls(model.calls[1].messages)] == [{"query": "rx"}]
    finally:
        store.close()


@pytest.mark.parametrize("change", ["id", "name", "new"])
def test_renaming_a_call_in_the_acting_input_is_refused_naming_the_middleware(
    change: str,
) -> None:
    ran: list[int] = []

    def sub(a: int, b: int) -> int:
        """Subtract."""
        ran.append(a - b)
        return a - b

    class Renames(MiddlewareBase):
        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_ACTING}

        def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            (call,) = input.tool_calls
            if change == "new":
                return next(input.with_(tool_calls=[call, call_add("extra")]))
            update = {"id": "other"} if change == "id" else {"name": "sub"}
            return next(input.with_(tool_calls=[call.model_copy(update=update)]))

    model = ScriptedModel([[call_add("c1")], "never"])
    ctx = RuntimeContext(session_id="s")
    _, error = stream_error(make_agent(model, toolkit=add_toolkit(sub),
                                       middlewares=[Renames()]).stream("hi", ctx))
    assert isinstance(error, ValueError)
    assert str(error).startswith("Renames.on_acting() ")
    assert "could not be matched to the model's call" in str(error)
    assert ran == []
    assert_no_orphan_tool_calls(ctx.agent_state.context)


def test_a_run_that_fails_after_the_chain_stopped_listening_fails_the_reply() -> None:
    from rx_agent.tool import ToolMiddlewareError

    @tool(middlewares=[lambda t, ctx, call, next: reactivex.concat(next(call),
                                                                   answer(call, "again"))])
    async def twice() -> str:
        """Answered twice by its own middleware."""
        await asyncio.sleep(0.05)
        return "once"

    model = ScriptedModel([[ToolUseBlock("c1", "twice", {})], "never"])
    ctx = RuntimeContext(session_id="s")
    def first_then_wait(inp: Any, next: Any) -> Any:
        # The run fails while the chain, done listening, still waits.
        return next(inp).pipe(ops.take(1),
                              ops.concat(reactivex.timer(0.3).pipe(ops.ignore_elements())))

    agent = make_agent(model, toolkit=Toolkit([twice]), middlewares=[Acting(first_then_wait)])
    _, error = stream_error(agent.stream("hi", ctx))
    assert isinstance(error, ToolMiddlewareError)
    assert "a second result for tool call 'c1'" in str(error)
    assert_no_orphan_tool_calls(ctx.agent_state.context)


# -- a finished call leaves no cycle -----------------------------------------------------------


@pytest.mark.parametrize("how", ["none", "layer", "take", "tool-middleware"])
@pytest.mark.parametrize("safe", [False, True], ids=["sequential", "concurrent"])
async def test_a_tool_round_leaves_nothing_for_the_cyclic_collector(how: str, safe: bool) -> None:
    import gc

    from rx_agent.agent._batch import Batch, BatchRun
    from rx_agent.agent._steps import CallScope
    from rx_agent.tool._middleware import _Chain

    def own(tool: Any, ctx: Any, call: Any, next: Any) -> Any:
        return next(call)

    @tool(concurrency_safe=safe, middlewares=[own] if how == "tool-middleware" else [])
    async def echo(value: int) -> str:
        """Echo."""
        await asyncio.sleep(0)
        return str(value)

    hook = {"layer": lambda inp, next: next(inp).pipe(ops.map(lambda e: e)),
            "take": lambda inp, next: next(inp).pipe(ops.take(1))}.get(how)
    script: list[Any] = []
    for i in range(6):
        script += [[ToolUseBlock(f"c{i}", "echo", {"value": i}),
                    ToolUseBlock(f"d{i}", "echo", {"value": i})], "ok"]
    agent = make_agent(ScriptedModel(script), toolkit=Toolkit([echo]),
                       middlewares=[Acting(hook)] if hook is not None else [])
    kinds = (Batch, BatchRun, CallScope, _Chain)
    gc.collect()
    # Only this test's calls count: an earlier test may still hold one of its own (an
    # exception instance in its parameters keeps its last traceback's frames).
    before = {id(o) for o in gc.get_objects() if isinstance(o, kinds)}
    gc.disable()
    try:
        for i in range(6):
            await agent.acall("go", RuntimeContext(session_id=f"s{i}"))
        await asyncio.sleep(0.01)  # cancelled leftovers unwind
        alive = [type(o).__name__ for o in gc.get_objects()
                 if isinstance(o, kinds) and id(o) not in before]
    finally:
        gc.enable()
    assert alive == []
