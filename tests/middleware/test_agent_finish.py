"""on_agent_finish (awaited notification) and the order of one call (docs/concepts/hooks.md)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import reactivex
import reactivex.operators as ops
from conftest import (
    RecordingMiddleware,
    add_toolkit,
    call_add,
    make_agent,
    result_msg,
    run_stream,
    stream_error,
    stream_events,
)

from rx_agent import (
    ExtensionPoint,
    GenerateReason,
    InMemorySessionStore,
    MiddlewareBase,
    RuntimeContext,
    ScriptedModel,
)


class Finish(MiddlewareBase):
    """Records outcomes at ON_AGENT_FINISH; ``returns`` builds the hook's return value."""

    def __init__(self, log: list, label: str = "f", order: int = 1, returns=None) -> None:  # type: ignore[no-untyped-def]
        self.log = log
        self.label = label
        self._order = order
        self.returns = returns
        self.outcomes: list = []

    def order(self) -> int:
        return self._order

    def active_points(self):  # type: ignore[no-untyped-def]
        return {ExtensionPoint.ON_AGENT_FINISH}

    def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def]
        self.outcomes.append(outcome)
        self.log.append(f"{self.label} start")
        return self.returns(self) if self.returns else None


class Boom(Exception):
    pass


# -- firing and the outcome --------------------------------------------------------------------


def test_fires_once_with_the_result_and_reason() -> None:
    mw = Finish([])
    events = stream_events(make_agent(ScriptedModel(["answer"]), middlewares=[mw]))
    (outcome,) = mw.outcomes
    assert outcome.result is not None
    assert outcome.result.text == "answer"
    assert outcome.result.id == result_msg(events).id
    assert outcome.error is None
    assert outcome.reason is GenerateReason.MODEL_STOP


def test_fires_once_per_subscription_of_the_same_cold_stream() -> None:
    mw = Finish([])
    observable = make_agent(ScriptedModel(["a", "b"]), middlewares=[mw]).stream("hi")
    run_stream(observable)
    run_stream(observable)
    assert [o.result.text for o in mw.outcomes] == ["a", "b"]


def test_outcome_on_max_iterations() -> None:
    mw = Finish([])
    model = ScriptedModel([[call_add()], "summary"])
    stream_events(make_agent(model, toolkit=add_toolkit(), max_iters=1, middlewares=[mw]))
    (outcome,) = mw.outcomes
    assert outcome.reason is GenerateReason.MAX_ITERATIONS
    assert outcome.result.generate_reason is GenerateReason.MAX_ITERATIONS


def test_outcome_on_model_error_carries_the_error() -> None:
    mw = Finish([])
    error = Boom("model down")
    agent = make_agent(ScriptedModel([error]), max_retries=1, middlewares=[mw])
    _, received = stream_error(agent.stream("hi"))
    assert received is error
    (outcome,) = mw.outcomes
    assert outcome.error is error
    assert outcome.result is None
    assert outcome.reason is None


def test_fires_on_an_error_raised_by_an_on_agent_middleware() -> None:
    error = Boom("on_agent failed")

    class Raises(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_AGENT}

        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.flat_map(lambda e: reactivex.throw(error)))

    mw = Finish([])
    agent = make_agent(ScriptedModel(["x"]), middlewares=[mw, Raises()])
    _, received = stream_error(agent.stream())
    assert received is error
    (outcome,) = mw.outcomes
    assert outcome.error is error
    assert outcome.reason is None


def test_fires_when_an_on_agent_hook_raises_before_calling_next() -> None:
    error = Boom("pre failed")

    class Raises(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_AGENT}

        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            raise error

    mw = Finish([])
    _, received = stream_error(make_agent(ScriptedModel([]), middlewares=[Raises(), mw]).stream())
    assert received is error
    assert [o.error for o in mw.outcomes] == [error]


async def test_fires_with_interrupted_reason() -> None:
    mw = Finish([])
    agent = make_agent(
        ScriptedModel([["a", "b", "c", "d", "e", "f"]], delay=0.03), middlewares=[mw]
    )
    ctx = RuntimeContext(session_id="intr")
    task = asyncio.ensure_future(agent.acall("hi", ctx))
    await asyncio.sleep(0.05)
    agent.interrupt(ctx)
    msg = await asyncio.wait_for(task, 3)
    assert msg.generate_reason is GenerateReason.INTERRUPTED
    (outcome,) = mw.outcomes
    assert outcome.reason is GenerateReason.INTERRUPTED
    assert outcome.error is None


def test_not_fired_when_the_caller_disposes() -> None:
    mw = Finish([])
    model = ScriptedModel([["a", "b", "c", "d", "e", "f"], "next"], delay=0.02)
    agent = make_agent(model, middlewares=[mw])
    ctx = RuntimeContext(session_id="disp")
    got_first = threading.Event()
    subscription = agent.stream("hi", ctx).subscribe(lambda e: got_first.set(), lambda e: None)
    assert got_first.wait(3)
    time.sleep(0.03)
    subscription.dispose()
    time.sleep(0.2)
    assert mw.outcomes == []
    # the state is still saved and the slot released
    events = stream_events(agent, "again", ctx)
    assert result_msg(events).text == "next"
    assert mw.outcomes[-1].result.text == "next"


def test_sees_the_same_per_call_context_as_the_other_hooks() -> None:
    seen: list = []

    class Writes(MiddlewareBase):
        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            ctx.put("trace", "t-1")
            return next(input)

    class Reads(MiddlewareBase):
        def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def]
            seen.append((ctx.get("trace"), ctx.agent_state is not None))

    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[Writes(), Reads()]))
    assert seen == [("t-1", True)]


# -- sequential, awaited, before the terminal signal -------------------------------------------


def _later(log: list, label: str, seconds: float = 0.03):  # type: ignore[no-untyped-def]
    """A hook result that completes ``seconds`` later on the event loop running the hook."""

    def build(_mw):  # type: ignore[no-untyped-def]
        async def work() -> str:
            await asyncio.sleep(seconds)
            log.append(f"{label} done")
            return label

        return reactivex.defer(lambda _: reactivex.from_future(asyncio.ensure_future(work())))

    return build


def _timer(log: list, label: str, seconds: float = 0.03):  # type: ignore[no-untyped-def]
    """A hook result that completes ``seconds`` later on an Rx timer thread."""

    def build(_mw):  # type: ignore[no-untyped-def]
        return reactivex.timer(seconds).pipe(
            ops.do_action(on_completed=lambda: log.append(f"{label} done"))
        )

    return build


def test_hooks_run_in_plan_order_each_awaited_before_the_next_and_the_caller() -> None:
    log: list = []
    low = Finish(log, "low", order=1, returns=_later(log, "low"))
    high = Finish(log, "high", order=2, returns=_later(log, "high"))
    agent = make_agent(ScriptedModel(["ok"]), middlewares=[low, high])
    done = threading.Event()
    agent.stream("hi").subscribe(
        lambda e: None, lambda e: done.set(), lambda: (log.append("caller completed"), done.set())
    )
    assert done.wait(3)
    assert log == ["high start", "high done", "low start", "low done", "caller completed"]


def test_finish_observable_completing_on_another_thread_is_awaited() -> None:
    log: list = []
    mw = Finish(log, "timer", returns=_timer(log, "timer"))
    agent = make_agent(ScriptedModel(["ok"]), middlewares=[mw])
    done = threading.Event()
    agent.stream("hi").subscribe(
        lambda e: None, lambda e: done.set(), lambda: (log.append("caller completed"), done.set())
    )
    assert done.wait(3), "the call never completed"
    assert log == ["timer start", "timer done", "caller completed"]


async def test_hooks_returning_loop_observables_are_awaited_in_async_code() -> None:
    log: list = []
    first = Finish(log, "first", order=2, returns=_later(log, "first", 0.02))
    second = Finish(log, "second", order=1, returns=_later(log, "second", 0.02))
    agent = make_agent(ScriptedModel(["ok"]), middlewares=[second, first])
    msg = await asyncio.wait_for(agent.acall("hi"), 3)
    log.append("caller got result")
    assert msg.text == "ok"
    assert log == ["first start", "first done", "second start", "second done", "caller got result"]


def test_caller_error_signal_waits_for_finish_hooks_too() -> None:
    log: list = []
    mw = Finish(log, "f", returns=_later(log, "f"))
    agent = make_agent(ScriptedModel([Boom("x")]), max_retries=1, middlewares=[mw])
    done = threading.Event()
    agent.stream("hi").subscribe(
        lambda e: None, lambda e: (log.append("caller error"), done.set()), done.set
    )
    assert done.wait(3)
    assert log == ["f start", "f done", "caller error"]


def test_runs_after_on_agent_completes_and_before_the_session_is_saved() -> None:
    log: list = []

    class LoggingStore(InMemorySessionStore):
        def save(self, key, state):  # type: ignore[no-untyped-def]
            log.append("saved")
            return super().save(key, state)

    class Agent(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_AGENT}

        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.do_action(on_completed=lambda: log.append("on_agent done")))

    mw = Finish(log, "finish")
    agent = make_agent(
        ScriptedModel(["ok"]), middlewares=[Agent(), mw], session_store=LoggingStore()
    )
    done = threading.Event()
    agent.stream("hi").subscribe(
        lambda e: None, lambda e: done.set(), lambda: (log.append("caller completed"), done.set())
    )
    assert done.wait(3)
    assert log == ["on_agent done", "finish start", "saved", "caller completed"]


def test_order_of_one_call() -> None:
    log: list = []

    class Store(InMemorySessionStore):
        def save(self, key, state):  # type: ignore[no-untyped-def]
            log.append(("store", "save", "call", None))
            return super().save(key, state)

    model = ScriptedModel([[call_add()], "done"])
    agent = make_agent(
        model,
        toolkit=add_toolkit(),
        middlewares=[RecordingMiddleware("r", log)],
        session_store=Store(),
    )
    done = threading.Event()
    agent.stream("hi").subscribe(
        lambda e: None,
        lambda e: done.set(),
        lambda: (log.append(("caller", "completed", "call", None)), done.set()),
    )
    assert done.wait(3)
    steps = [(e[1], e[2]) for e in log if e[2] != "event"]
    assert steps == [
        ("on_agent", "pre"),
        ("on_agent_state_ready", "call"),
        ("on_system_prompt", "call"),
        ("on_reasoning", "pre"),
        ("on_model_call", "pre"),
        ("on_model_call", "post"),
        ("on_reasoning", "post"),
        ("on_acting", "pre"),
        ("on_acting", "post"),
        ("on_reasoning", "pre"),
        ("on_model_call", "pre"),
        ("on_model_call", "post"),
        ("on_reasoning", "post"),
        ("on_agent", "post"),
        ("on_agent_finish", "call"),
        ("save", "call"),
        ("completed", "call"),
    ]


# -- errors in finish hooks --------------------------------------------------------------------


def test_exception_in_a_finish_hook_fails_the_call_with_it() -> None:
    error = Boom("finish failed")

    def raise_it(_mw):  # type: ignore[no-untyped-def]
        raise error

    agent = make_agent(ScriptedModel(["ok"]), middlewares=[Finish([], returns=raise_it)])
    _, received = stream_error(agent.stream("hi"))
    assert received is error


def test_error_observable_from_a_finish_hook_fails_the_call_with_it() -> None:
    error = Boom("finish observable failed")
    agent = make_agent(
        ScriptedModel(["ok"]), middlewares=[Finish([], returns=lambda _mw: reactivex.throw(error))]
    )
    _, received = stream_error(agent.stream("hi"))
    assert received is error


def test_exception_in_a_finish_hook_still_saves_state_and_releases_the_slot() -> None:
    calls = {"n": 0}

    def fail_first(_mw):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise Boom("first finish fails")

    agent = make_agent(ScriptedModel(["one", "two"]), middlewares=[Finish([], returns=fail_first)])
    ctx = RuntimeContext(session_id="kept")
    stream_error(agent.stream("q1", ctx))
    events = stream_events(agent, "q2", ctx)
    assert result_msg(events).text == "two"
    texts = [m.text for m in ctx.agent_state.context]
    assert texts[:2] == ["q1", "one"]


def test_exception_in_finish_hook_with_call_sync_raises_it() -> None:
    error = Boom("sync finish")

    def raise_it(_mw):  # type: ignore[no-untyped-def]
        raise error

    agent = make_agent(ScriptedModel(["ok"]), middlewares=[Finish([], returns=raise_it)])
    with pytest.raises(Boom) as info:
        agent.call_sync("hi")
    assert info.value is error


def test_none_and_empty_observable_returns_are_accepted() -> None:
    agent = make_agent(
        ScriptedModel(["ok"]),
        middlewares=[Finish([]), Finish([], returns=lambda _m: reactivex.empty())],
    )
    assert result_msg(stream_events(agent)).text == "ok"


async def test_slow_finish_hook_holds_the_session_until_it_completes() -> None:
    log: list = []

    class Ready(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_AGENT_STATE_READY}

        def on_agent_state_ready(self, agent, ctx, state, input_messages):  # type: ignore[no-untyped-def]
            log.append("state ready " + input_messages[0].text)

    agent = make_agent(
        ScriptedModel(["one", "two"]),
        middlewares=[Ready(), Finish(log, "f", returns=_later(log, "f", 0.05))],
    )
    ctx = RuntimeContext(session_id="held")
    first = asyncio.ensure_future(agent.acall("q1", ctx))
    second = asyncio.ensure_future(agent.acall("q2", ctx))
    results = await asyncio.wait_for(asyncio.gather(first, second), 3)
    assert [m.text for m in results] == ["one", "two"]
    assert log == ["state ready q1", "f start", "f done", "state ready q2", "f start", "f done"]


def test_fires_once_when_on_agent_calls_next_twice() -> None:
    class RetryCall(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_AGENT}

        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.catch(lambda err, _src: next(input)))

    mw = Finish([])
    model = ScriptedModel([Boom("first attempt"), "second attempt"])
    events = stream_events(make_agent(model, max_retries=1, middlewares=[RetryCall(), mw]))
    assert result_msg(events).text == "second attempt"
    assert [o.result.text for o in mw.outcomes] == ["second attempt"]


def test_fires_with_the_error_when_a_system_prompt_hook_raises() -> None:
    error = Boom("prompt failed")

    class BadPrompt(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_SYSTEM_PROMPT}

        def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def]
            raise error

    mw = Finish([])
    model = ScriptedModel(["next call"])
    agent = make_agent(model, middlewares=[BadPrompt(), mw])
    _, received = stream_error(agent.stream("hi", RuntimeContext(session_id="p")))
    assert received is error
    assert [o.error for o in mw.outcomes] == [error]
    assert model.calls == []
