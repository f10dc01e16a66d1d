"""A hook may use any RxPY operator on its stream (docs/concepts/hooks.md).

RxPY's time operators (delay, timer) run on TimeoutScheduler threads unless a
scheduler is passed, so these hooks hand events (and next() subscriptions) to the
runtime from another thread. The call must still complete, serially and correctly.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import reactivex
import reactivex.operators as ops
from conftest import ONION, add_toolkit, call_add, make_agent, result_msg, run_stream

from rx_agent import ExtensionPoint, MiddlewareBase, ScriptedModel

FAST_FAIL = 1.5  # seconds: a correct run takes a few tens of milliseconds


def _hook_class(point: ExtensionPoint, wrap) -> type[MiddlewareBase]:  # type: ignore[no-untyped-def]
    class Hook(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {point}

    def hook(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return wrap(input, next)

    setattr(Hook, point.value, hook)
    return Hook


def _delay_events(input, next):  # type: ignore[no-untyped-def]
    return next(input).pipe(ops.delay(0.03))


def _timer_then_next(input, next):  # type: ignore[no-untyped-def]
    # The Java guide's RateLimitMiddleware: Mono.delay(...).thenMany(next.apply(input)).
    return reactivex.timer(0.03).pipe(ops.flat_map(lambda _: next(input)))


def _run(point: ExtensionPoint, wrap) -> list:  # type: ignore[no-untyped-def]
    model = ScriptedModel([[call_add()], "finished"])
    agent = make_agent(model, toolkit=add_toolkit(), middlewares=[_hook_class(point, wrap)()])
    return run_stream(agent.stream("hi"), timeout=FAST_FAIL)


@pytest.mark.parametrize("point", ONION, ids=lambda p: p.name)
def test_hook_delaying_its_events_on_a_timer_thread_completes(point: ExtensionPoint) -> None:
    assert result_msg(_run(point, _delay_events)).text == "finished"


@pytest.mark.parametrize("point", ONION, ids=lambda p: p.name)
def test_hook_calling_next_from_a_timer_thread_completes(point: ExtensionPoint) -> None:
    assert result_msg(_run(point, _timer_then_next)).text == "finished"


@pytest.mark.parametrize("wrap", [_delay_events, _timer_then_next], ids=["delay", "timer_next"])
@pytest.mark.parametrize("point", ONION, ids=lambda p: p.name)
async def test_thread_hopping_hook_completes_when_the_caller_runs_a_loop(
    point: ExtensionPoint,
    wrap,  # type: ignore[no-untyped-def]
) -> None:
    model = ScriptedModel([[call_add()], "finished"])
    agent = make_agent(model, toolkit=add_toolkit(), middlewares=[_hook_class(point, wrap)()])
    msg = await asyncio.wait_for(agent.acall("hi"), FAST_FAIL)
    assert msg.text == "finished"


def test_events_reach_the_caller_serially_after_a_thread_hop() -> None:
    busy = threading.Lock()
    overlaps: list = []
    done = threading.Event()

    def on_next(event) -> None:  # type: ignore[no-untyped-def]
        if not busy.acquire(blocking=False):
            overlaps.append(event)
            return
        try:
            time.sleep(0.001)
        finally:
            busy.release()

    model = ScriptedModel([[call_add()], "ok"])
    Hook = _hook_class(ExtensionPoint.ON_REASONING, _delay_events)
    agent = make_agent(model, toolkit=add_toolkit(), middlewares=[Hook()])
    agent.stream("hi").subscribe(on_next, lambda e: done.set(), done.set)
    assert done.wait(FAST_FAIL), "the call never terminated"
    assert overlaps == []


def test_system_prompt_observable_completing_on_a_timer_thread_is_awaited() -> None:
    class Later(MiddlewareBase):
        def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def]
            return reactivex.timer(0.03).pipe(ops.map(lambda _: current_prompt + "|late"))

    model = ScriptedModel(["ok"])
    run_stream(
        make_agent(model, sys_prompt="base", middlewares=[Later()]).stream("hi"), timeout=FAST_FAIL
    )
    assert model.calls[0].messages[0].text == "base|late"
