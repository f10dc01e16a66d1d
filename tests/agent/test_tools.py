"""Tools: the tool context, tool batches and failures, and the Toolkit
(docs/concepts/context.md, docs/concepts/hooks.md)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

from conftest import (
    add_toolkit,
    call_add,
    make_agent,
    of_type,
    result_msg,
    stream_events,
    tool_results,
)

from rx_agent import (
    MiddlewareBase,
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

# -- Toolkit and @tool -------------------------------------------------------------------------


def test_tool_decorator_on_plain_function_uses_name_and_docstring() -> None:
    @tool
    def lookup(city: str, days: int = 1) -> str:
        """Look up the weather."""
        return city

    toolkit = Toolkit()
    toolkit.register_tool(lookup)
    (schema,) = toolkit.schemas()
    assert schema["name"] == "lookup"
    assert schema["description"] == "Look up the weather."
    params = schema["parameters"]
    assert params["type"] == "object"
    assert params["properties"]["city"]["type"] == "string"
    assert params["properties"]["days"]["type"] == "integer"
    assert params["required"] == ["city"]


def test_tool_decorator_with_name_and_description() -> None:
    @tool(name="renamed", description="Custom text.")
    async def original(x: int) -> int:
        """Ignored docstring."""
        return x

    toolkit = Toolkit()
    toolkit.register_tool(original)
    (schema,) = toolkit.schemas()
    assert (schema["name"], schema["description"]) == ("renamed", "Custom text.")


def test_decorated_function_stays_callable() -> None:
    @tool
    def double(x: int) -> int:
        """Double."""
        return 2 * x

    assert double(4) == 8


def test_register_plain_function_with_permission_and_external() -> None:
    def plain(q: str) -> str:
        """Plain docs."""
        return q

    toolkit = Toolkit()
    toolkit.register_tool(plain, permission="allow", external=False)
    assert [s["name"] for s in toolkit.schemas()] == ["plain"]
    assert toolkit.schemas()[0]["description"] == "Plain docs."


def test_runtime_context_parameter_is_hidden_from_the_schema() -> None:
    @tool
    def who(name: str, ctx: RuntimeContext) -> str:
        """Say who."""
        return name

    toolkit = Toolkit()
    toolkit.register_tool(who)
    params = toolkit.schemas()[0]["parameters"]
    assert set(params["properties"]) == {"name"}
    assert "ctx" not in params.get("required", [])


# -- tool failures never fail the loop ---------------------------------------------------------


def _tool_result_after(model: ScriptedModel):  # type: ignore[no-untyped-def]
    (result,) = tool_results(model.calls[1].messages)
    return result


def test_tool_exception_becomes_an_error_result_and_the_loop_continues() -> None:
    @tool
    def explode(x: int) -> int:
        """Always fails."""
        raise ValueError("kaput")

    toolkit = Toolkit()
    toolkit.register_tool(explode)
    model = ScriptedModel([[ToolUseBlock("c1", "explode", {"x": 1})], "recovered"])
    events = stream_events(make_agent(model, toolkit=toolkit))
    assert result_msg(events).text == "recovered"
    result = _tool_result_after(model)
    assert result.state is ToolResultState.ERROR
    assert "kaput" in str(result.output)
    (end,) = of_type(events, ToolResultEndEvent)
    assert end.state is ToolResultState.ERROR


def test_async_tool_exception_becomes_an_error_result() -> None:
    @tool
    async def explode() -> str:
        """Always fails."""
        await asyncio.sleep(0)
        raise RuntimeError("async kaput")

    toolkit = Toolkit()
    toolkit.register_tool(explode)
    model = ScriptedModel([[ToolUseBlock("c1", "explode", {})], "recovered"])
    events = stream_events(make_agent(model, toolkit=toolkit))
    assert result_msg(events).text == "recovered"
    result = _tool_result_after(model)
    assert result.state is ToolResultState.ERROR
    assert "async kaput" in str(result.output)


def test_unknown_tool_becomes_a_clear_error_result() -> None:
    model = ScriptedModel([[ToolUseBlock("c1", "no_such_tool", {})], "recovered"])
    events = stream_events(make_agent(model, toolkit=add_toolkit()))
    assert result_msg(events).text == "recovered"
    result = _tool_result_after(model)
    assert result.state is ToolResultState.ERROR
    assert "no_such_tool" in str(result.output)


def test_invalid_arguments_become_a_clear_error_result_without_running_the_tool() -> None:
    ran: list = []

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        ran.append((a, b))
        return a + b

    toolkit = Toolkit()
    toolkit.register_tool(add)
    model = ScriptedModel([[ToolUseBlock("c1", "add", {"a": "not a number"})], "recovered"])
    events = stream_events(make_agent(model, toolkit=toolkit))
    assert result_msg(events).text == "recovered"
    assert ran == []
    result = _tool_result_after(model)
    assert result.state is ToolResultState.ERROR
    assert "b" in str(result.output) or "a" in str(result.output)


def test_extra_unknown_argument_is_an_error_result() -> None:
    model = ScriptedModel([[ToolUseBlock("c1", "add", {"a": 1, "b": 2, "c": 3})], "recovered"])
    events = stream_events(make_agent(model, toolkit=add_toolkit()))
    assert result_msg(events).text == "recovered"
    assert _tool_result_after(model).state is ToolResultState.ERROR


def test_successful_tool_result_events_carry_ids_name_delta_and_state() -> None:
    model = ScriptedModel([[call_add("c1", 2, 3)], "done"])
    events = stream_events(make_agent(model, toolkit=add_toolkit()))
    (start,) = of_type(events, ToolResultStartEvent)
    deltas = of_type(events, ToolResultTextDeltaEvent)
    (end,) = of_type(events, ToolResultEndEvent)
    for event in (start, *deltas, end):
        assert (event.tool_call_id, event.tool_call_name) == ("c1", "add")
    assert "".join(d.delta for d in deltas) == "5"
    assert end.state is ToolResultState.SUCCESS


# -- batches: sequential vs concurrency-safe ---------------------------------------------------


def _timed_toolkit(
    spans: dict, safe: bool | dict[str, bool], durations: dict[str, float]
) -> Toolkit:
    """Async tools that sleep and record their (start, end) times in ``spans``."""
    toolkit = Toolkit()
    for name, seconds in durations.items():

        async def fn(seconds: float = seconds, name: str = name) -> str:
            spans[name] = [time.perf_counter(), None]
            await asyncio.sleep(seconds)
            spans[name][1] = time.perf_counter()
            return name

        fn.__name__ = name
        fn.__doc__ = f"Sleep {seconds}s."
        is_safe = safe[name] if isinstance(safe, dict) else safe
        toolkit.register_tool(tool(name=name, concurrency_safe=is_safe)(fn))
    return toolkit


def test_tools_run_one_after_another_by_default() -> None:
    spans: dict = {}
    toolkit = _timed_toolkit(spans, False, {"slow": 0.05, "fast": 0.01})
    model = ScriptedModel(
        [[ToolUseBlock("c1", "slow", {}), ToolUseBlock("c2", "fast", {})], "done"]
    )
    stream_events(make_agent(model, toolkit=toolkit))
    assert spans["slow"][1] <= spans["fast"][0], "the second tool started before the first ended"


def test_concurrency_safe_tools_run_concurrently() -> None:
    spans: dict = {}
    toolkit = _timed_toolkit(spans, True, {"slow": 0.05, "fast": 0.01})
    model = ScriptedModel(
        [[ToolUseBlock("c1", "slow", {}), ToolUseBlock("c2", "fast", {})], "done"]
    )
    stream_events(make_agent(model, toolkit=toolkit))
    assert spans["fast"][0] < spans["slow"][1], "concurrency-safe tools did not overlap"


def test_mixed_batch_runs_sequentially() -> None:
    spans: dict = {}
    toolkit = _timed_toolkit(spans, {"slow": True, "fast": False}, {"slow": 0.05, "fast": 0.01})
    model = ScriptedModel(
        [[ToolUseBlock("c1", "slow", {}), ToolUseBlock("c2", "fast", {})], "done"]
    )
    stream_events(make_agent(model, toolkit=toolkit))
    assert spans["slow"][1] <= spans["fast"][0]


def test_concurrent_results_enter_the_context_in_call_order() -> None:
    spans: dict = {}
    toolkit = _timed_toolkit(spans, True, {"slow": 0.05, "fast": 0.01})
    model = ScriptedModel(
        [[ToolUseBlock("c1", "slow", {}), ToolUseBlock("c2", "fast", {})], "done"]
    )
    ctx = RuntimeContext(session_id="order")
    stream_events(make_agent(model, toolkit=toolkit), "hi", ctx)
    assert [r.id for r in tool_results(ctx.agent_state.context)] == ["c1", "c2"]
    assert [r.id for r in tool_results(model.calls[1].messages)] == ["c1", "c2"]


def test_sequential_results_enter_the_context_in_call_order() -> None:
    model = ScriptedModel([[call_add("c1"), call_add("c2"), call_add("c3")], "done"])
    ctx = RuntimeContext(session_id="order")
    stream_events(make_agent(model, toolkit=add_toolkit()), "hi", ctx)
    assert [r.id for r in tool_results(ctx.agent_state.context)] == ["c1", "c2", "c3"]


def test_concurrent_sync_tools_deliver_events_serially_and_well_formed() -> None:
    toolkit = Toolkit()
    for name in ("a", "b", "c", "d"):

        def fn(name: str = name) -> str:
            time.sleep(0.02)
            return name * 3

        fn.__name__ = name
        fn.__doc__ = "Sleep then answer."
        toolkit.register_tool(tool(concurrency_safe=True)(fn))
    model = ScriptedModel([[ToolUseBlock(f"c{n}", n, {}) for n in "abcd"], "done"])
    busy = threading.Lock()
    overlaps: list = []
    events: list = []
    done = threading.Event()

    def on_next(event) -> None:  # type: ignore[no-untyped-def]
        if not busy.acquire(blocking=False):
            overlaps.append(event)
            return
        try:
            events.append(event)
            time.sleep(0.002)
        finally:
            busy.release()

    make_agent(model, toolkit=toolkit).stream("hi").subscribe(
        on_next, lambda e: done.set(), done.set
    )
    assert done.wait(3)
    assert overlaps == []
    for call_id in ("ca", "cb", "cc", "cd"):
        kinds = [
            type(e).__name__
            for e in events
            if isinstance(e, (ToolResultStartEvent, ToolResultTextDeltaEvent, ToolResultEndEvent))
            and e.tool_call_id == call_id
        ]
        assert kinds[0] == "ToolResultStartEvent" and kinds[-1] == "ToolResultEndEvent"
        assert len(kinds) >= 2


# -- RuntimeContext in tools -------------------------------------------------------------------


def _ctx_tool(seen: list) -> Toolkit:
    @tool
    def probe(label: str, ctx: RuntimeContext) -> str:
        """Report context values."""
        seen.append(
            {
                "label": label,
                "session": ctx.session_id,
                "user": ctx.user_id,
                "from_hook": ctx.get("from_hook"),
                "a": ctx.get("a"),
                "b": ctx.get("b"),
                "state": ctx.agent_state,
            }
        )
        ctx.put("from_tool", label)
        return "ok"

    toolkit = Toolkit()
    toolkit.register_tool(probe)
    return toolkit


def test_tool_gets_the_runtime_context_injected() -> None:
    seen: list = []
    model = ScriptedModel([[ToolUseBlock("c1", "probe", {"label": "x"})], "done"])
    ctx = RuntimeContext(session_id="sess", user_id="alice")
    stream_events(make_agent(model, toolkit=_ctx_tool(seen)), "hi", ctx)
    (row,) = seen
    assert (row["session"], row["user"]) == ("sess", "alice")
    assert row["state"] is ctx.agent_state


def test_builder_tool_execution_context_is_merged_under_the_per_call_context() -> None:
    from conftest import builder

    seen: list = []
    base = RuntimeContext()
    base.put("a", "global a")
    base.put("b", "global b")
    model = ScriptedModel([[ToolUseBlock("c1", "probe", {"label": "x"})], "done"])
    agent = builder(model).toolkit(_ctx_tool(seen)).tool_execution_context(base).build()
    per_call = RuntimeContext(session_id="s")
    per_call.put("b", "call b")
    stream_events(agent, "hi", per_call)
    (row,) = seen
    assert row["a"] == "global a"
    assert row["b"] == "call b"


def test_tool_execution_context_also_works_without_a_per_call_context() -> None:
    seen: list = []
    base = RuntimeContext()
    base.put("a", "global a")
    model = ScriptedModel([[ToolUseBlock("c1", "probe", {"label": "x"})], "done"])
    agent = make_agent(model, toolkit=_ctx_tool(seen), tool_execution_context=base)
    stream_events(agent, "hi")
    assert seen[0]["a"] == "global a"


def test_hook_put_is_visible_to_tools_and_tool_put_to_later_hooks() -> None:
    seen: list = []
    later: list = []

    class Hooks(MiddlewareBase):
        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            ctx.put("from_hook", "hooked")
            return next(input)

        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            later.append(ctx.get("from_tool"))
            return next(input)

    model = ScriptedModel([[ToolUseBlock("c1", "probe", {"label": "tool-wrote"})], "done"])
    stream_events(make_agent(model, toolkit=_ctx_tool(seen), middlewares=[Hooks()]))
    assert seen[0]["from_hook"] == "hooked"
    assert later == [None, "tool-wrote"]


def test_tool_sees_hook_writes_even_with_a_builder_tool_execution_context() -> None:
    seen: list = []
    later: list = []
    base = RuntimeContext()
    base.put("a", "global a")

    class Hooks(MiddlewareBase):
        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            ctx.put("from_hook", "hooked")
            return next(input)

        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            later.append(ctx.get("from_tool"))
            return next(input)

    model = ScriptedModel([[ToolUseBlock("c1", "probe", {"label": "tool-wrote"})], "done"])
    stream_events(
        make_agent(
            model, toolkit=_ctx_tool(seen), middlewares=[Hooks()], tool_execution_context=base
        )
    )
    assert seen[0]["from_hook"] == "hooked"
    assert seen[0]["a"] == "global a"
    assert later == [None, "tool-wrote"]


def _sync_sleepers(safe: bool, spans: dict) -> Toolkit:
    toolkit = Toolkit()
    for name in ("s1", "s2", "s3"):

        def fn(name: str = name) -> str:
            spans[name] = [time.perf_counter(), None]
            time.sleep(0.04)
            spans[name][1] = time.perf_counter()
            return name

        fn.__name__ = name
        fn.__doc__ = "Block for a while."
        toolkit.register_tool(tool(concurrency_safe=safe)(fn))
    return toolkit


def test_concurrency_safe_sync_tools_run_concurrently() -> None:
    spans: dict = {}
    model = ScriptedModel([[ToolUseBlock(f"c{n}", f"s{n}", {}) for n in (1, 2, 3)], "done"])
    stream_events(make_agent(model, toolkit=_sync_sleepers(True, spans)))
    latest_start = max(s[0] for s in spans.values())
    earliest_end = min(s[1] for s in spans.values())
    assert latest_start < earliest_end, "concurrency-safe sync tools did not overlap"


def test_sync_tools_run_one_after_another_by_default() -> None:
    spans: dict = {}
    model = ScriptedModel([[ToolUseBlock(f"c{n}", f"s{n}", {}) for n in (1, 2, 3)], "done"])
    stream_events(make_agent(model, toolkit=_sync_sleepers(False, spans)))
    ordered = [spans[n] for n in ("s1", "s2", "s3")]
    for earlier, later in itertools.pairwise(ordered):
        assert earlier[1] <= later[0]
