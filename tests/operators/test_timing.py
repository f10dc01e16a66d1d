"""with_timeout and rate_limit, on virtual time and on a real agent's loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.testing import TestScheduler

from rx_agent import (
    ExtensionPoint,
    GenerateOptions,
    Msg,
    RuntimeContext,
    ScriptedModel,
)
from rx_agent import operators as aops
from rx_agent.agent._config import RetryPolicy
from rx_agent.model.errors import ModelTimeoutError

from .conftest import (
    Tracked,
    collect,
    ending,
    hook_agent,
    on_completed,
    on_next,
    run_virtual,
    text_round,
    timed,
    values,
)

# -- with_timeout on virtual time ---------------------------------------------------------


def _run_timeout(messages: list[Any], **limits: Any) -> tuple[list[Any], Any, Any]:
    scheduler = TestScheduler()
    xs = scheduler.create_cold_observable(messages)
    result = scheduler.start(lambda: xs.pipe(aops.with_timeout(**limits)))
    return result.messages, xs, scheduler


def test_first_event_counts_to_the_first_content_not_the_call_start() -> None:
    # ModelCallStartEvent at 210, the first text event at 220 (virtual seconds).
    messages, xs, _ = _run_timeout(timed(text_round(["a"])), first_event=15)
    assert [type(v).__name__ for v in values(messages)] == ["ModelCallStartEvent"]
    end = messages[-1]
    assert end.time == 215 and isinstance(end.value.exception, ModelTimeoutError)
    assert "first_event=15" in str(end.value.exception)
    # The source (the model call) was disposed at the timeout.
    assert [(s.subscribe, s.unsubscribe) for s in xs.subscriptions] == [(200, 215)]


def test_first_event_met_lets_the_stream_run_past_it() -> None:
    messages, _, _ = _run_timeout(timed(text_round(["a", "b"])), first_event=25)
    assert ending(messages).kind == "C" and len(values(messages)) == 6


def test_between_events_fails_a_stall_in_the_middle() -> None:
    events = text_round(["a", "b", "c"])
    stalled = [on_next(t, e) for t, e in zip([10, 20, 30, 40, 90, 100, 110], events,
                                              strict=True)] + [on_completed(120)]
    messages, xs, _ = _run_timeout(stalled, between_events=25)
    assert len(values(messages)) == 4
    assert messages[-1].time == 265  # 25 s after the event at 240
    assert "between_events=25" in str(messages[-1].value.exception)
    assert xs.subscriptions[0].unsubscribe == 265


def test_between_events_without_first_event_also_bounds_the_first_wait() -> None:
    late = [on_next(40, text_round(["a"])[0]), on_completed(50)]
    messages, _, _ = _run_timeout(late, between_events=30)
    assert messages[-1].time == 230 and messages[-1].value.kind == "E"


def test_between_events_starts_with_the_content_when_first_event_is_set() -> None:
    events = text_round(["a"])
    # Call start at 210, content only at 250: within first_event, longer than the gap.
    msgs = [on_next(t, e) for t, e in zip([10, 50, 60, 70, 80], events, strict=True)]
    messages, _, _ = _run_timeout([*msgs, on_completed(90)], first_event=60, between_events=20)
    assert ending(messages).kind == "C"


def test_total_bounds_the_whole_stream() -> None:
    messages, _, _ = _run_timeout(timed(text_round(["a", "b"])), total=35)
    assert messages[-1].time == 235 and "total=35" in str(messages[-1].value.exception)


def test_a_stream_that_ends_in_time_leaves_no_timer_behind() -> None:
    messages, _, scheduler = _run_timeout(timed(text_round(["a"])), first_event=100,
                                          between_events=100, total=100)
    assert ending(messages).kind == "C" and messages[-1].time == 260
    assert scheduler.clock == 1000  # ran to the end: no later timeout error arrived
    assert len(messages) == 6


def test_errors_and_disposal_pass_through() -> None:
    boom = RuntimeError("model failed")
    _, error = collect(Tracked(text_round(["a"]), error=boom).observable().pipe(
        aops.with_timeout(total=10)))
    assert error is boom
    scheduler = TestScheduler()
    xs = scheduler.create_cold_observable(timed(text_round(["a", "b"])))
    result = scheduler.start(lambda: xs.pipe(aops.with_timeout(total=500)), disposed=225)
    assert xs.subscriptions[0].unsubscribe == 225
    assert all(m.value.kind == "N" for m in result.messages)  # disposed: no timeout error


def test_the_timeout_error_is_retryable_for_the_runtime() -> None:
    error = ModelTimeoutError("x")
    assert error.retryable
    assert RetryPolicy(max_attempts=3).should_retry(1, error)


@pytest.mark.parametrize(("limits", "exc"), [
    ({}, ValueError), ({"total": -1}, ValueError), ({"first_event": "5"}, TypeError),
    ({"between_events": float("nan")}, ValueError),
])
def test_bad_limits_are_refused(limits: dict[str, Any], exc: type) -> None:
    with pytest.raises(exc, match="with_timeout"):
        aops.with_timeout(**limits)


def test_a_given_scheduler_wins_over_the_subscription_one() -> None:
    mine = TestScheduler()
    seen: list[Any] = []
    reactivex.never().pipe(aops.with_timeout(total=5, scheduler=mine)).subscribe(
        on_error=seen.append, scheduler=TestScheduler())
    mine.advance_to(6)
    assert isinstance(seen[0], ModelTimeoutError)


# -- with_timeout in a real agent -------------------------------------------------------


def test_a_stalled_model_call_ends_with_a_timeout_error() -> None:
    model = ScriptedModel(["slow answer"], delay=1.0)
    agent = hook_agent(ExtensionPoint.ON_MODEL_CALL, lambda inp, next: next(inp).pipe(
        aops.with_timeout(first_event=0.05)), model)
    started = time.monotonic()
    _, error = collect(agent.stream("hi"))
    assert isinstance(error, ModelTimeoutError)
    assert time.monotonic() - started < 0.8
    assert len(model.calls) == 1  # the built-in retries sit below on_model_call


def test_retry_model_retries_a_timed_out_call() -> None:
    class SlowFirst(ScriptedModel):
        def stream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] = (),
                   options: GenerateOptions | None = None) -> Any:
            self.delay = 1.0 if not self.calls else 0.0
            return super().stream(messages, tools, options)

    model = SlowFirst(["never seen", "fast answer"])
    agent = hook_agent(ExtensionPoint.ON_MODEL_CALL, lambda inp, next: aops.retry_model(
        2, backoff=0)(lambda i: next(i).pipe(aops.with_timeout(first_event=0.05)), inp), model)
    items, error = collect(agent.stream("hi"))
    assert error is None and items[-2].result.text == "fast answer"
    assert len(model.calls) == 2


async def test_with_timeout_waits_on_the_callers_loop() -> None:
    threads: set[int] = set()
    model = ScriptedModel([["a", "b"]], delay=0.01)

    def hook(inp: Any, next: Any) -> Any:
        return next(inp).pipe(aops.with_timeout(first_event=1, between_events=1, total=2),
                              ops.do_action(lambda _: threads.add(threading.get_ident())))

    agent = hook_agent(ExtensionPoint.ON_MODEL_CALL, hook, model)
    before = threading.active_count()
    msg = await asyncio.wait_for(agent.acall("hi"), 5)
    assert msg.text == "ab"
    assert threads == {threading.get_ident()}
    assert threading.active_count() == before  # no timer thread


# -- rate_limit on virtual time -----------------------------------------------------------


def test_one_instance_spaces_the_subscriptions_it_sees_the_first_undelayed() -> None:
    limit = aops.rate_limit(50)
    scheduler = TestScheduler()
    xs = scheduler.create_cold_observable(timed(text_round(["a"]), step=1))
    scheduler.start(lambda: reactivex.merge(*(xs.pipe(limit) for _ in range(3))))
    assert [s.subscribe for s in xs.subscriptions] == [200, 250, 300]


def test_a_later_call_after_the_interval_is_not_delayed() -> None:
    limit = aops.rate_limit(50)

    def make(scheduler: TestScheduler) -> Any:
        xs = scheduler.create_cold_observable(timed(text_round(["a"]), step=1))
        later = reactivex.timer(80.0).pipe(ops.flat_map(lambda _: xs.pipe(limit)))
        return reactivex.merge(xs.pipe(limit), later)

    _, messages = run_virtual(make)
    starts = [m.time for m in messages if m.value.kind == "N"
              and type(m.value.value).__name__ == "ModelCallStartEvent"]
    assert starts == [210, 290]  # 280 + 10: no wait, the interval had passed


def test_a_subscription_disposed_while_waiting_gives_its_slot_back() -> None:
    limit = aops.rate_limit(50)
    scheduler = TestScheduler()
    xs = scheduler.create_cold_observable(timed(text_round(["a"]), step=1))
    first = xs.pipe(limit).subscribe(scheduler=scheduler)
    waiting = xs.pipe(limit).subscribe(scheduler=scheduler)
    scheduler.advance_to(20)
    waiting.dispose()  # before its slot at 50
    scheduler.advance_to(30)
    xs.pipe(limit).subscribe(scheduler=scheduler)
    scheduler.advance_to(200)
    assert [s.subscribe for s in xs.subscriptions] == [0, 50]
    first.dispose()


def test_rate_limit_passes_errors_and_refuses_bad_intervals() -> None:
    boom = RuntimeError("x")
    _, error = collect(Tracked([], error=boom).observable().pipe(aops.rate_limit(0)))
    assert error is boom
    with pytest.raises(ValueError, match="rate_limit"):
        aops.rate_limit(-1)
    with pytest.raises(TypeError, match="rate_limit"):
        aops.rate_limit("1s")  # type: ignore[arg-type]


# -- rate_limit in real agents ----------------------------------------------------------


class _Stamped(ScriptedModel):
    def __init__(self, responses: list[Any]) -> None:
        super().__init__(responses)
        self.stamps: list[float] = []

    def stream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] = (),
               options: GenerateOptions | None = None) -> Any:
        self.stamps.append(time.monotonic())
        return super().stream(messages, tools, options)


async def test_concurrent_calls_on_one_loop_are_spaced_and_stay_on_the_loop() -> None:
    limit = aops.rate_limit(0.1)
    threads: set[int] = set()
    model = _Stamped([f"answer {i}" for i in range(3)])

    def hook(inp: Any, next: Any) -> Any:
        return next(inp).pipe(limit, ops.do_action(lambda _: threads.add(threading.get_ident())))

    agent = hook_agent(ExtensionPoint.ON_MODEL_CALL, hook, model)
    before = threading.active_count()
    replies = await asyncio.wait_for(asyncio.gather(*(
        agent.acall(f"q{i}", RuntimeContext(session_id=f"s{i}")) for i in range(3))), 5)
    assert sorted(r.text for r in replies) == ["answer 0", "answer 1", "answer 2"]
    gaps = [b - a for a, b in zip(model.stamps, model.stamps[1:], strict=False)]
    assert len(gaps) == 2 and all(g >= 0.09 for g in gaps), gaps
    assert threads == {threading.get_ident()}
    assert threading.active_count() == before


def test_rate_limit_from_synchronous_callers() -> None:
    limit = aops.rate_limit(0.05)
    model = _Stamped(["one", "two"])
    agent = hook_agent(ExtensionPoint.ON_MODEL_CALL,
                       lambda inp, next: next(inp).pipe(limit), model)
    for _ in range(2):
        _, error = collect(agent.stream("hi", RuntimeContext(session_id="s")))
        assert error is None
    assert model.stamps[1] - model.stamps[0] >= 0.045

