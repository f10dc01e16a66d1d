"""Hook chains on the lean subscribe path (issue #18 item 3): what ``next(input)``
returns and each hook's Observable are subscribed with one slotted sink, and RxPY's
trampoline runs once at the runtime's top-level subscription. Operators in user hooks
must behave exactly as on RxPY's ordinary path."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
import reactivex
import reactivex.operators as ops
from conftest import ONION, add_toolkit, call_add, make_agent, result_msg, run_stream, stream_error

from rx_agent import (
    AgentEndEvent,
    AgentStartEvent,
    CustomEvent,
    ExtensionPoint,
    MiddlewareBase,
    ScriptedModel,
    TextBlockDeltaEvent,
)

FAST_FAIL = 5.0  # seconds: a correct run takes a few tens of milliseconds


def _hook(point: ExtensionPoint, wrap: Any) -> MiddlewareBase:
    class Hook(MiddlewareBase):
        def active_points(self) -> set[ExtensionPoint]:
            return {point}

    def hook(self: Any, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return wrap(input, next)

    setattr(Hook, point.value, hook)
    return Hook()


def _mapped(input: Any, next: Any) -> Any:
    return next(input).pipe(ops.map(lambda e: e))


def _endless_customs() -> reactivex.Observable[Any]:
    return reactivex.from_iterable(itertools.count()).pipe(
        ops.map(lambda i: CustomEvent(name=f"tick{i}")))


def _agent(*middlewares: MiddlewareBase, model: Any = None) -> Any:
    model = model or ScriptedModel([[call_add()], "finished"])
    return make_agent(model, toolkit=add_toolkit(), middlewares=list(middlewares))


@pytest.mark.parametrize("point", ONION, ids=lambda p: p.name)
def test_two_one_operator_layers_run_a_tool_round(point: ExtensionPoint) -> None:
    events = run_stream(_agent(_hook(point, _mapped), _hook(point, _mapped)).stream("hi"),
                        timeout=FAST_FAIL)
    assert result_msg(events).text == "finished"


@pytest.mark.parametrize("outer", [False, True], ids=["top-level", "under an operator"])
def test_take_over_an_endless_synchronous_source_in_a_hook_stops(outer: bool) -> None:
    def inner(input: Any, next: Any) -> Any:
        return reactivex.concat(_endless_customs().pipe(ops.take(3)), next(input))

    layers = [_hook(ExtensionPoint.ON_AGENT, _mapped)] if outer else []
    agent = _agent(*layers, _hook(ExtensionPoint.ON_AGENT, inner))
    events = run_stream(agent.stream("hi"), timeout=FAST_FAIL)
    assert [e.name for e in events if isinstance(e, CustomEvent)] == ["tick0", "tick1", "tick2"]
    assert result_msg(events).text == "finished"


def test_take_in_an_on_agent_hook_ends_the_callers_stream_after_n_events() -> None:
    def take3(input: Any, next: Any) -> Any:
        return next(input).pipe(ops.take(3))

    agent = _agent(_hook(ExtensionPoint.ON_AGENT, _mapped), _hook(ExtensionPoint.ON_AGENT, take3))
    events = run_stream(agent.stream("hi"), timeout=FAST_FAIL)
    assert len(events) == 3 and isinstance(events[0], AgentStartEvent)


def test_first_in_an_on_agent_hook_gives_the_start_event_only() -> None:
    def first(input: Any, next: Any) -> Any:
        return next(input).pipe(ops.first())

    agent = _agent(_hook(ExtensionPoint.ON_AGENT, first))
    events = run_stream(agent.stream("hi"), timeout=FAST_FAIL)
    assert [type(e) for e in events] == [AgentStartEvent]


def test_take_until_in_hooks_passes_everything_until_its_signal() -> None:
    def until_never(input: Any, next: Any) -> Any:
        return next(input).pipe(ops.take_until(reactivex.never()))

    agent = _agent(*(_hook(p, until_never) for p in ONION))
    events = run_stream(agent.stream("hi"), timeout=FAST_FAIL)
    assert result_msg(events).text == "finished"
    assert isinstance(events[-1], AgentEndEvent)


def test_take_until_cuts_a_slow_model_call_and_the_reply_goes_on() -> None:
    def cut(input: Any, next: Any) -> Any:
        return next(input).pipe(ops.take_until(reactivex.timer(0.05)))

    model = ScriptedModel([["a", "b", "c", "d"]], delay=0.5)
    agent = make_agent(model, middlewares=[_hook(ExtensionPoint.ON_AGENT, _mapped),
                                          _hook(ExtensionPoint.ON_AGENT, cut)])
    start = time.perf_counter()
    events = run_stream(agent.stream("hi"), timeout=FAST_FAIL)
    assert time.perf_counter() - start < 0.4  # cut, not waited for
    assert not any(isinstance(e, TextBlockDeltaEvent) for e in events)


@pytest.mark.parametrize("point", ONION, ids=lambda p: p.name)
def test_an_erroring_inner_hook_fails_the_call_through_the_outer_operator(
    point: ExtensionPoint,
) -> None:
    def fail_on_first(input: Any, next: Any) -> Any:
        def boom(event: Any) -> Any:
            raise LookupError(f"inner failed at {point.value}")

        return next(input).pipe(ops.map(boom))

    agent = _agent(_hook(point, _mapped), _hook(point, fail_on_first))
    _, error = stream_error(agent.stream("hi"), timeout=FAST_FAIL)
    assert isinstance(error, LookupError) and point.value in str(error)


@pytest.mark.parametrize("point", ONION, ids=lambda p: p.name)
def test_an_asynchronous_inner_hook_under_an_outer_operator_completes(
    point: ExtensionPoint,
) -> None:
    def delayed(input: Any, next: Any) -> Any:
        return next(input).pipe(ops.delay(0.01))  # events arrive on a timer thread

    events = run_stream(_agent(_hook(point, _mapped), _hook(point, delayed)).stream("hi"),
                        timeout=FAST_FAIL)
    assert result_msg(events).text == "finished"


def test_disposal_from_another_thread_stops_the_chain_and_its_model() -> None:
    model = ScriptedModel([["w"] * 200], delay=0.005)
    agent = make_agent(model, middlewares=[_hook(p, _mapped) for p in
                                           (ExtensionPoint.ON_AGENT, ExtensionPoint.ON_REASONING,
                                            ExtensionPoint.ON_MODEL_CALL)] * 2)
    got: list[Any] = []
    subscription = agent.stream("hi").subscribe(got.append)
    deadline = time.monotonic() + FAST_FAIL
    while sum(isinstance(e, TextBlockDeltaEvent) for e in got) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.002)
    disposer = threading.Thread(target=subscription.dispose)
    disposer.start()
    disposer.join()
    time.sleep(0.05)  # the dispose hops to the loop; then nothing more arrives
    seen = len(got)
    time.sleep(0.1)
    assert len(got) == seen
    assert sum(isinstance(e, TextBlockDeltaEvent) for e in got) < 100
