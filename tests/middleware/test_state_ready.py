"""on_agent_state_ready, a synchronous notification (docs/concepts/hooks.md)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
import reactivex.operators as ops
from conftest import (
    RecordingMiddleware,
    changed,
    make_agent,
    of_type,
    result_msg,
    run_stream,
    stream_error,
    stream_events,
)

from rx_agent import (
    AgentEndEvent,
    AgentState,
    ExtensionPoint,
    MiddlewareBase,
    Msg,
    RuntimeContext,
    ScriptedModel,
)
from rx_agent.middleware import ExecutionPlan


class Hook(MiddlewareBase):
    """Runs ``fn(agent, ctx, state, input_messages)`` at ON_AGENT_STATE_READY only."""

    def __init__(self, fn, order: int = 1) -> None:  # type: ignore[no-untyped-def]
        self.fn = fn
        self._order = order
        self.calls = 0

    def order(self) -> int:
        return self._order

    def active_points(self):  # type: ignore[no-untyped-def]
        return {ExtensionPoint.ON_AGENT_STATE_READY}

    def on_agent_state_ready(self, agent, ctx, state, input_messages):  # type: ignore[no-untyped-def]
        self.calls += 1
        self.fn(agent, ctx, state, input_messages)


def _noop(*_args) -> None:  # type: ignore[no-untyped-def]
    return None


class Boom(Exception):
    pass


def test_fires_once_per_call() -> None:
    hook = Hook(_noop)
    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[hook]))
    assert hook.calls == 1


def test_fires_again_when_the_same_cold_stream_is_resubscribed() -> None:
    hook = Hook(_noop)
    observable = make_agent(ScriptedModel(["a", "b"]), middlewares=[hook]).stream("hi")
    run_stream(observable)
    run_stream(observable)
    assert hook.calls == 2


def test_fires_again_when_the_same_cold_call_is_resubscribed() -> None:
    hook = Hook(_noop)
    observable = make_agent(ScriptedModel(["a", "b"]), middlewares=[hook]).call("hi")
    assert [m.text for m in run_stream(observable)] == ["a"]
    assert [m.text for m in run_stream(observable)] == ["b"]
    assert hook.calls == 2


def test_state_is_ctx_agent_state_and_never_none() -> None:
    seen: list = []
    hook = Hook(lambda agent, ctx, state, msgs: seen.append((state, ctx.agent_state)))
    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[hook]))
    ((state, bound),) = seen
    assert state is not None
    assert state is bound


def test_new_session_has_an_empty_context() -> None:
    lengths: list[int] = []
    hook = Hook(lambda agent, ctx, state, msgs: lengths.append(len(state.context)))
    stream_events(
        make_agent(ScriptedModel(["ok"]), middlewares=[hook]),
        "hi",
        RuntimeContext(session_id="brand-new"),
    )
    assert lengths == [0]


def test_fires_before_the_input_is_merged_into_the_context() -> None:
    snapshots: list[list[str]] = []
    hook = Hook(lambda agent, ctx, state, msgs: snapshots.append([m.text for m in state.context]))
    agent = make_agent(ScriptedModel(["first answer", "second answer"]), middlewares=[hook])
    ctx = RuntimeContext(session_id="s")
    stream_events(agent, "q1", ctx)
    stream_events(agent, "q2", ctx)
    assert snapshots == [[], ["q1", "first answer"]]


def test_input_messages_is_a_list_with_the_call_input() -> None:
    seen: list = []
    hook = Hook(lambda agent, ctx, state, msgs: seen.append(msgs))
    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[hook]), "hello")
    (msgs,) = seen
    assert isinstance(msgs, list)
    assert [m.text for m in msgs] == ["hello"]


def test_in_place_edits_of_input_messages_apply_to_the_call() -> None:
    def prepend(agent, ctx, state, msgs) -> None:  # type: ignore[no-untyped-def]
        msgs.insert(0, Msg("user", "profile: likes tea"))

    model = ScriptedModel(["ok"])
    ctx = RuntimeContext(session_id="p")
    stream_events(make_agent(model, middlewares=[Hook(prepend)]), "hello", ctx)
    assert [m.text for m in model.calls[0].messages] == ["profile: likes tea", "hello"]
    assert [m.text for m in ctx.agent_state.context][:2] == ["profile: likes tea", "hello"]


def test_clearing_input_messages_removes_the_input_from_the_call() -> None:
    model = ScriptedModel(["ok"])
    stream_events(
        make_agent(model, middlewares=[Hook(lambda a, c, s, msgs: msgs.clear())]), "secret"
    )
    assert "secret" not in [m.text for m in model.calls[0].messages]


def test_callers_list_is_never_touched() -> None:
    def mutate(agent, ctx, state, msgs) -> None:  # type: ignore[no-untyped-def]
        msgs.append(Msg("user", "added"))
        msgs.pop(0)

    caller_list = [Msg("user", "mine")]
    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[Hook(mutate)]), caller_list)
    assert [m.text for m in caller_list] == ["mine"]


def test_each_subscription_gets_its_own_copy() -> None:
    def add(agent, ctx, state, msgs) -> None:  # type: ignore[no-untyped-def]
        msgs.append(Msg("user", "extra"))

    model = ScriptedModel(["a", "b"])
    observable = make_agent(model, middlewares=[Hook(add)]).stream("hi", RuntimeContext("s1"))
    run_stream(observable)
    run_stream(observable)
    second_call_new = [m.text for m in model.calls[1].messages][-2:]
    assert second_call_new == ["hi", "extra"]
    assert [m.text for m in model.calls[1].messages].count("extra") == 2  # one per call


def test_runs_in_plan_order_and_later_participants_see_earlier_changes() -> None:
    seen: list = []

    def first(agent, ctx, state, msgs) -> None:  # type: ignore[no-untyped-def]
        seen.append(("first", [m.text for m in msgs]))
        msgs.append(Msg("user", "from first"))

    def second(agent, ctx, state, msgs) -> None:  # type: ignore[no-untyped-def]
        seen.append(("second", [m.text for m in msgs]))

    stream_events(
        make_agent(
            ScriptedModel(["ok"]), middlewares=[Hook(second, order=1), Hook(first, order=2)]
        ),
        "hi",
    )
    assert seen == [("first", ["hi"]), ("second", ["hi", "from first"])]


def test_sees_the_input_that_on_agent_passed_to_next() -> None:
    class Rewrites(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_AGENT}

        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(changed(input, msgs=[Msg("user", "rewritten")]))

    seen: list = []
    hook = Hook(lambda agent, ctx, state, msgs: seen.append([m.text for m in msgs]))
    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[Rewrites(), hook]), "original")
    assert seen == [["rewritten"]]


def test_fires_after_on_agent_pre_and_before_reasoning_and_model_call() -> None:
    log: list = []
    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[RecordingMiddleware("r", log)]))
    firsts = [(e[1], e[2]) for e in log if e[2] in ("pre", "call")]
    assert firsts[:3] == [
        ("on_agent", "pre"),
        ("on_agent_state_ready", "call"),
        ("on_system_prompt", "call"),
    ]
    assert firsts.index(("on_agent_state_ready", "call")) < firsts.index(("on_model_call", "pre"))


def test_a_write_to_ctx_is_visible_to_later_hooks() -> None:
    seen: list = []

    class Reads(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            seen.append(ctx.get("from_state_ready"))
            return next(input)

    hook = Hook(lambda agent, ctx, state, msgs: ctx.put("from_state_ready", "yes"), order=5)
    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[hook, Reads()]))
    assert seen == ["yes"]


# -- exceptions --------------------------------------------------------------------------------


def _raising_agent(error: BaseException, model: ScriptedModel, log: list | None = None):  # type: ignore[no-untyped-def]
    def raise_it(agent, ctx, state, msgs) -> None:  # type: ignore[no-untyped-def]
        raise error

    later = Hook(lambda *a: (log if log is not None else []).append("later ran"), order=0)
    return make_agent(model, middlewares=[Hook(raise_it, order=5), later])


def test_exception_reaches_the_caller_unchanged() -> None:
    error = Boom("state ready failed")
    agent = _raising_agent(error, ScriptedModel([]))
    _, received = stream_error(agent.stream("hi"))
    assert received is error
    assert type(received) is Boom
    assert str(received) == "state ready failed"


def test_exception_unchanged_through_call_sync() -> None:
    error = Boom("sync path")
    agent = _raising_agent(error, ScriptedModel([]))
    with pytest.raises(Boom) as info:
        agent.call_sync("hi")
    assert info.value is error


async def test_exception_unchanged_through_acall() -> None:
    error = Boom("async path")
    agent = _raising_agent(error, ScriptedModel([]))
    with pytest.raises(Boom) as info:
        await agent.acall("hi")
    assert info.value is error


def test_exception_stops_later_participants() -> None:
    log: list = []
    agent = _raising_agent(Boom("x"), ScriptedModel([]), log)
    stream_error(agent.stream("hi"))
    assert log == []


def test_exception_means_the_model_is_never_called() -> None:
    model = ScriptedModel(["never"])
    agent = _raising_agent(Boom("x"), model)
    events, _ = stream_error(agent.stream("hi"))
    assert model.calls == []
    assert of_type(events, AgentEndEvent) == []


def test_exception_does_not_fire_on_agent_finish() -> None:
    finished: list = []

    class Finish(MiddlewareBase):
        def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def]
            finished.append(outcome)

    def raise_it(agent, ctx, state, msgs) -> None:  # type: ignore[no-untyped-def]
        raise Boom("x")

    agent = make_agent(ScriptedModel([]), middlewares=[Hook(raise_it), Finish()])
    stream_error(agent.stream("hi"))
    assert finished == []


def test_exception_releases_the_session_for_the_next_call() -> None:
    calls = {"n": 0}

    def fail_first(agent, ctx, state, msgs) -> None:  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise Boom("first only")

    agent = make_agent(ScriptedModel(["second works"]), middlewares=[Hook(fail_first)])
    ctx = RuntimeContext(session_id="same")
    stream_error(agent.stream("one", ctx))
    events = stream_events(agent, "two", ctx)
    assert result_msg(events).text == "second works"


async def test_exception_releases_the_session_in_async_code() -> None:
    calls = {"n": 0}

    def fail_first(agent, ctx, state, msgs) -> None:  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise Boom("first only")

    agent = make_agent(ScriptedModel(["second works"]), middlewares=[Hook(fail_first)])
    ctx = RuntimeContext(session_id="same")
    with pytest.raises(Boom):
        await agent.acall("one", ctx)
    import asyncio

    msg = await asyncio.wait_for(agent.acall("two", ctx), 3)
    assert msg.text == "second works"


def test_exception_is_not_wrapped_by_an_on_agent_middleware_that_passes_errors() -> None:
    class Outer(MiddlewareBase):
        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.do_action(on_error=lambda e: None))

    error = Boom("through on_agent")

    def raise_it(agent, ctx, state, msgs) -> None:  # type: ignore[no-untyped-def]
        raise error

    agent = make_agent(ScriptedModel([]), middlewares=[Outer(), Hook(raise_it)])
    _, received = stream_error(agent.stream("hi"))
    assert received is error


def test_fires_once_when_on_agent_calls_next_twice() -> None:
    class RetryCall(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_AGENT}

        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.catch(lambda err, _src: next(input)))

    hook = Hook(_noop)
    model = ScriptedModel([Boom("first attempt"), "second attempt"])
    events = stream_events(make_agent(model, max_retries=1, middlewares=[RetryCall(), hook]))
    assert result_msg(events).text == "second attempt"
    assert hook.calls == 1


def test_caller_context_gets_the_state_even_when_the_call_fails() -> None:
    ctx = RuntimeContext(session_id="failing")
    agent = make_agent(ScriptedModel([Boom("model down")]), max_retries=1)
    stream_error(agent.stream("hi", ctx))
    assert ctx.agent_state is not None
    assert [m.text for m in ctx.agent_state.context] == ["hi"]


# -- async def on_agent_state_ready (issue 10, item 14) ------------------------------------------


class AsyncHook(MiddlewareBase):
    """An ``async def`` state-ready hook that appends to ``input_messages`` after a wait."""

    def __init__(self, label: str, log: list[str], order: int = 1) -> None:
        self.label, self.log, self._order = label, log, order

    def order(self) -> int:
        return self._order

    def active_points(self):  # type: ignore[no-untyped-def]
        return {ExtensionPoint.ON_AGENT_STATE_READY}

    async def on_agent_state_ready(self, agent, ctx, state, input_messages):  # type: ignore[no-untyped-def, override]
        await asyncio.sleep(0.001)
        self.log.append(self.label)
        input_messages.append(Msg(role="user", content=f"({self.label})"))


def test_synchronous_hooks_have_run_when_notify_returns_and_its_result_is_a_no_op() -> None:
    first, second = Hook(_noop), Hook(_noop)
    plan = ExecutionPlan([first, second])
    done = plan.notify_state_ready(None, RuntimeContext(), AgentState(session_id="s"), [])  # type: ignore[arg-type]
    assert (first.calls, second.calls) == (1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        del done  # dropping it is harmless: it is no coroutine
    asyncio.run(_wait(plan.notify_state_ready(None, RuntimeContext(), AgentState(session_id="s"),  # type: ignore[arg-type]
                                              [])))
    assert (first.calls, second.calls) == (2, 2)


def test_plan_awaits_an_async_hook_before_the_later_ones_run() -> None:
    log: list[str] = []
    sync_after = Hook(lambda *_: log.append("sync"), order=0)
    plan = ExecutionPlan([sync_after, AsyncHook("async", log, order=2)])
    messages: list[Msg] = []
    pending = plan.notify_state_ready(None, RuntimeContext(), AgentState(session_id="s"),  # type: ignore[arg-type]
                                      messages)
    assert pending is not None and log == []  # nothing ran past the async hook yet
    asyncio.run(_wait(pending))
    assert log == ["async", "sync"]
    assert [m.text for m in messages] == ["(async)"]


def test_plan_propagates_an_async_hooks_error_and_skips_later_hooks() -> None:
    later = Hook(_noop, order=0)

    class Fails(MiddlewareBase):
        async def on_agent_state_ready(self, agent, ctx, state, input_messages):  # type: ignore[no-untyped-def, override]
            raise Boom("async state ready")

    plan = ExecutionPlan([Fails(), later])
    pending = plan.notify_state_ready(None, RuntimeContext(), AgentState(session_id="s"), [])  # type: ignore[arg-type]
    assert pending is not None
    with pytest.raises(Boom, match="async state ready"):
        asyncio.run(_wait(pending))
    assert later.calls == 0


async def _wait(awaitable: Any) -> None:
    await awaitable


def test_async_state_ready_hooks_run_in_plan_order_before_the_model() -> None:
    log: list[str] = []
    model = ScriptedModel(["ok"])
    agent = make_agent(model, middlewares=[AsyncHook("second", log, 1), AsyncHook("first", log, 2)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "coroutine was never awaited"
        assert agent.call_sync("hi").text == "ok"
    assert log == ["first", "second"]
    assert [m.text for m in model.calls[0].messages] == ["hi", "(first)", "(second)"]
