"""Type-checked (not run) by ``nox -s lint``: the testing kit as docs/testing.md uses it."""

from __future__ import annotations

from pathlib import Path

import reactivex
from reactivex.testing import TestScheduler

from rx_agent import ExtensionPoint, MiddlewareBase, ModelCallStartEvent, ScriptedModel
from rx_agent.model.errors import ModelServerError
from rx_agent.testing import (
    CassetteMismatchError,
    HarnessResult,
    MiddlewareHarness,
    RecordingModel,
    ReplayModel,
    StepVerifier,
    Verified,
    assert_well_formed,
    attempts,
    text_round,
    thinking_round,
    tool_results,
    tool_round,
    verify,
)


def harness(mw: MiddlewareBase) -> list[float]:
    result: HarnessResult = MiddlewareHarness(mw, ExtensionPoint.ON_MODEL_CALL).run(
        text_round("a", "b"), starts=[0.0, 1.0], until=10.0)
    retried = MiddlewareHarness(mw, "on_model_call").run(
        attempts(ModelServerError("503"), thinking_round("hm", "ok")))
    assert retried.subscriptions >= 1 and result.error is None
    result.assert_well_formed()
    assert_well_formed(result.events, complete=False)
    return result.times(ModelCallStartEvent) + [t for t, _ in result.timeline]


def steps() -> Verified:
    chain: StepVerifier = verify(reactivex.of(1, 2), TestScheduler(), timeout=1.0)
    done = chain.expect_next(1).expect_next_matches(lambda x: x == 2, "two") \
        .expect_no_event(1.0).then_await(0.5).verify_complete()
    verify(reactivex.throw(KeyError())).expect_error(KeyError)
    verify(reactivex.never()).then_cancel().verify()
    return done


def sequences() -> int:
    return len(tool_round(("f", {"a": 1}), text="x")) + len(tool_results())


def cassette(path: Path) -> str:
    RecordingModel(ScriptedModel(["hi"]), path, append=True)
    model = ReplayModel(path)
    error: type[AssertionError] = CassetteMismatchError
    return f"{model.name} {model.remaining} {error.__name__}"
