"""verify(): Reactor-style step verification on synchronous, virtual-time and async sources."""

from __future__ import annotations

import asyncio
import gc
import time
import warnings

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.subject import Subject
from reactivex.testing import TestScheduler

from rx_agent import (
    AgentEndEvent,
    AgentResultEvent,
    AgentStartEvent,
    ModelCallStartEvent,
    Msg,
    ReActAgent,
    ScriptedModel,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
)
from rx_agent.model.errors import ModelTimeoutError
from rx_agent.testing import MiddlewareHarness, marbles, text_round, verify

from ._middlewares import NotSpaced, Spaced


def test_a_synchronous_source() -> None:
    result = (verify(reactivex.of(1, 2, 3, 4, 5))
              .expect_next(1, 2)
              .expect_next_matches(lambda x: x == 3, "three")
              .expect_next_count(1)
              .consume_while(lambda x: x > 4)
              .verify_complete())
    assert result.items == [1, 2, 3, 4, 5] and result.error is None


def test_a_mismatch_names_the_step_the_expected_and_the_actual_signal() -> None:
    with pytest.raises(AssertionError) as info:
        verify(reactivex.of("a", "b")).expect_next("a", "c").verify_complete()
    text = str(info.value)
    assert "step 2 of 3, expect_next('c')" in text
    assert "expected: on_next('c')" in text
    assert "actual:   on_next('b')" in text
    assert "->" in text.splitlines()[-2] and "on_completed()" in text.splitlines()[-1]


def test_events_match_by_class_or_by_fields_ignoring_id_and_time() -> None:
    events = text_round("hi", reply_id="r1")
    again = text_round("hi", reply_id="r1")
    verify(reactivex.from_iterable(events)).expect_next(*again).verify_complete()
    verify(reactivex.from_iterable(events)).expect_next(
        ModelCallStartEvent, *[object] * 4, ).expect_next_count(0).verify_complete()
    result = AgentResultEvent(result=Msg(role="assistant", content="x"))
    verify(reactivex.of(result)).expect_next(
        AgentResultEvent(result=Msg(role="assistant", content="x"))).verify_complete()
    other = text_round("ho", reply_id="r1")
    with pytest.raises(AssertionError, match="delta='ho'"):
        verify(reactivex.from_iterable(events)).expect_next(*other).verify_complete()


def test_errors_and_their_checks() -> None:
    failing = reactivex.concat(reactivex.of(1), reactivex.throw(ModelTimeoutError("slow")))
    got = verify(failing).expect_next(1).expect_error(ModelTimeoutError)
    assert isinstance(got.error, ModelTimeoutError)
    verify(failing).expect_next(1).expect_error_matches(lambda e: "slow" in str(e))
    with pytest.raises(AssertionError, match=r"expected: on_error\(KeyError\)"):
        verify(failing).expect_next(1).expect_error(KeyError)
    with pytest.raises(AssertionError, match=r"actual:   on_error\(ModelTimeoutError: slow\)"):
        verify(failing).expect_next(1).verify_complete()
    with pytest.raises(AssertionError, match=r"actual:   on_completed\(\) at"):
        verify(reactivex.of(1)).expect_next(1, 2).verify_complete()
    with pytest.raises(TypeError):
        verify(failing).expect_error("boom")  # type: ignore[arg-type]


def test_a_predicate_may_assert_and_its_message_is_shown() -> None:
    def is_upper(text: str) -> None:
        assert text.isupper(), f"{text!r} is not upper case"

    with pytest.raises(AssertionError, match="'abc' is not upper case"):
        verify(reactivex.of("abc")).expect_next_matches(is_upper).verify_complete()


def test_virtual_time_moves_only_as_far_as_the_steps_need() -> None:
    scheduler = TestScheduler()
    source = reactivex.interval(60.0).pipe(ops.take(3))
    began = time.monotonic()
    result = (verify(source, scheduler)
              .expect_no_event(60.0)      # the first tick comes exactly then: allowed
              .expect_next(0)
              .then_await(30.0)
              .expect_no_event(29.0)
              .expect_next(1, 2)
              .verify_complete())
    assert result.elapsed == 180.0
    assert time.monotonic() - began < 1.0
    assert [s.at for s in result.signals] == [60.0, 120.0, 180.0, 180.0]


def test_expect_no_event_fails_on_an_early_signal() -> None:
    scheduler = TestScheduler()
    with pytest.raises(AssertionError) as info:
        verify(reactivex.timer(5.0), scheduler).expect_no_event(10.0).verify_complete()
    assert "expected: no signal for 10 s" in str(info.value)
    assert "actual:   on_next(0) at 5 s" in str(info.value)


def test_a_stalled_virtual_stream_fails_at_once() -> None:
    began = time.monotonic()
    with pytest.raises(AssertionError, match="has no work scheduled"):
        verify(reactivex.never(), TestScheduler(), timeout=30).expect_next(1).verify_complete()
    assert time.monotonic() - began < 1.0


def test_the_verifier_catches_a_rate_limiter_that_does_not_wait() -> None:
    def two_calls(limiter: Spaced) -> reactivex.Observable[object]:
        harness = MiddlewareHarness(limiter, "on_model_call")
        mw, agent, ctx = harness.mw, harness.agent, harness.default_input()

        def call() -> reactivex.Observable[object]:
            def nxt(_inp: object) -> reactivex.Observable[object]:
                return marbles("a|", {"a": "call"})
            return mw.on_model_call(agent, None, ctx, nxt)
        return reactivex.merge(call(), call())

    scheduler = TestScheduler()
    verify(two_calls(Spaced(1.0)), scheduler).expect_next("call").expect_no_event(1.0) \
        .expect_next("call").verify_complete()
    with pytest.raises(AssertionError, match="no signal for 1 s"):
        verify(two_calls(NotSpaced(1.0)), TestScheduler()).expect_next("call") \
            .expect_no_event(1.0).expect_next("call").verify_complete()


def test_then_runs_an_action_and_then_cancel_disposes() -> None:
    subject: Subject[int] = Subject()
    disposed: list[bool] = []
    source = subject.pipe(ops.finally_action(lambda: disposed.append(True)))
    result = (verify(source)
              .then(lambda: subject.on_next(7))
              .expect_next(7)
              .then_cancel()
              .verify())
    assert result.items == [7] and disposed == [True]
    with pytest.raises(AssertionError, match="cancelled"):
        verify(subject).then_cancel().expect_next(1).verify()


def test_an_agent_stream_from_synchronous_code() -> None:
    agent = ReActAgent(name="a", model=ScriptedModel([["hel", "lo"]], delay=0.01))
    (verify(agent.stream("hi"))
     .expect_next(AgentStartEvent, ModelCallStartEvent)
     .consume_while(lambda e: not isinstance(e, TextBlockEndEvent))
     .expect_next(TextBlockEndEvent)
     .consume_while(lambda e: not isinstance(e, AgentEndEvent))
     .expect_next(AgentEndEvent)
     .verify_complete())


def test_a_real_time_source_that_never_emits_times_out() -> None:
    with pytest.raises(AssertionError, match=r"nothing within 0.2 s"):
        verify(reactivex.never(), timeout=0.2).expect_next(1).verify_complete()


def test_real_time_waits() -> None:
    source = reactivex.timer(0.2)
    with pytest.raises(AssertionError, match="no signal for 1 s"):
        verify(source).expect_no_event(1.0).verify_complete()
    verify(reactivex.timer(0.2)).expect_no_event(0.05).then_await(0.3).expect_next(0) \
        .verify_complete()


async def test_an_asyncio_source_inside_a_running_loop() -> None:
    agent = ReActAgent(name="a", model=ScriptedModel([["a", "b"]]))
    deltas: list[str] = []
    (await verify(agent.stream("hi"))
     .expect_next(AgentStartEvent)
     .consume_while(lambda e: not isinstance(e, TextBlockDeltaEvent))
     .expect_next_matches(lambda e: deltas.append(e.delta) is None)
     .expect_next_matches(lambda e: deltas.append(e.delta) is None)
     .then_cancel()
     .averify())
    assert deltas == ["a", "b"]
    await verify(reactivex.timer(0.01)).expect_next(0).averify_complete()
    got = await verify(reactivex.throw(KeyError("k"))).aexpect_error(KeyError)
    assert isinstance(got.error, KeyError)
    await verify(reactivex.throw(KeyError("k"))).aexpect_error_matches(
        lambda e: isinstance(e, KeyError))


async def test_the_blocking_form_inside_a_loop_points_to_the_awaitable_one() -> None:
    with pytest.raises(RuntimeError, match="averify_complete"):
        verify(reactivex.timer(0.01)).expect_next(0).verify_complete()
    # A source that is done synchronously needs no loop: the blocking form works.
    verify(reactivex.of(1)).expect_next(1).verify_complete()
    await asyncio.sleep(0)


def test_a_chain_runs_once_and_an_unrun_chain_warns() -> None:
    chain = verify(reactivex.of(1)).expect_next(1)
    chain.verify_complete()
    with pytest.raises(RuntimeError, match="already ran"):
        chain.verify_complete()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        verify(reactivex.of(1)).expect_next(1)  # never run
        gc.collect()
    assert any("never ran" in str(w.message) for w in caught)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="takes an Observable"):
        verify([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        verify(reactivex.of(1)).expect_next_count(-1)
