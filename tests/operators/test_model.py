"""retry_model and fallback_to: calling next again with a new ModelCallInput."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex
from reactivex.testing import TestScheduler

from rx_agent import (
    ExtensionPoint,
    GenerateOptions,
    ModelCallInput,
    ReasoningInput,
    ScriptedModel,
)
from rx_agent import operators as aops
from rx_agent.model.errors import (
    ModelAuthenticationError,
    ModelRateLimitError,
    ModelServerError,
    ModelTimeoutError,
)

from .conftest import collect, ending, hook_agent, on_error, text_round, timed, values

PRIMARY = ScriptedModel([], name="primary")
BACKUP = ScriptedModel([], name="backup")
INPUT = ModelCallInput(messages=(), tools=(), options=GenerateOptions(), model=PRIMARY)


class Next:
    """A scripted ``next``: attempt k gets ``outcomes[k]`` (an exception: the attempt fails
    5 virtual seconds after its subscription; ``"ok"``: a text round)."""

    def __init__(self, scheduler: TestScheduler, outcomes: list[Any]) -> None:
        self.scheduler = scheduler
        self.outcomes = outcomes
        self.inputs: list[ModelCallInput] = []
        self.sources: list[Any] = []

    def __call__(self, inp: ModelCallInput) -> Any:
        outcome = self.outcomes[len(self.inputs)]
        self.inputs.append(inp)
        if isinstance(outcome, Exception):
            source = self.scheduler.create_cold_observable(on_error(5, outcome))
        elif outcome == "content then error":
            source = self.scheduler.create_cold_observable(
                [*timed(text_round(["partial"])[:3], start=1, step=1, complete=False),
                 on_error(5, ModelServerError("cut"))])
        else:
            source = self.scheduler.create_cold_observable(timed(text_round(["ok"]), start=1,
                                                                 step=1))
        self.sources.append(source)
        return source


def _starts(nxt: Next) -> list[int]:
    return [s.subscriptions[0].subscribe for s in nxt.sources]


def test_retry_model_counts_total_attempts_and_backs_off_doubling() -> None:
    scheduler = TestScheduler()
    nxt = Next(scheduler, [ModelServerError("503")] * 2 + ["ok"])
    result = scheduler.start(lambda: aops.retry_model(3, backoff=3)(nxt, INPUT))
    assert ending(result.messages).kind == "C"
    # Fails at +5, waits 3, fails at +5, waits 6.
    assert _starts(nxt) == [200, 208, 219]
    assert "".join(e.delta for e in values(result.messages) if hasattr(e, "delta")) == "ok"


def test_retry_model_gives_up_after_n_attempts_with_the_last_error() -> None:
    scheduler = TestScheduler()
    errors = [ModelTimeoutError(f"t{i}") for i in range(3)]
    nxt = Next(scheduler, [*errors, "ok"])
    result = scheduler.start(lambda: aops.retry_model(3, backoff=0)(nxt, INPUT))
    assert len(nxt.inputs) == 3
    assert ending(result.messages).exception is errors[2]


def test_retry_model_does_not_retry_a_non_retryable_error() -> None:
    scheduler = TestScheduler()
    nxt = Next(scheduler, [ModelAuthenticationError("401"), "ok"])
    result = scheduler.start(lambda: aops.retry_model(3)(nxt, INPUT))
    assert len(nxt.inputs) == 1 and ending(result.messages).kind == "E"


def test_retry_model_does_not_retry_after_content_reached_the_caller() -> None:
    scheduler = TestScheduler()
    nxt = Next(scheduler, ["content then error", "ok"])
    result = scheduler.start(lambda: aops.retry_model(3, backoff=0)(nxt, INPUT))
    assert len(nxt.inputs) == 1 and ending(result.messages).kind == "E"


def test_the_backoff_is_capped_by_max_backoff() -> None:
    scheduler = TestScheduler()
    nxt = Next(scheduler, [ModelServerError("503")] * 2 + ["ok"])
    scheduler.start(lambda: aops.retry_model(3, backoff=10, max_backoff=12)(nxt, INPUT))
    assert _starts(nxt) == [200, 215, 232]  # 10, then 20 capped to 12


def test_retry_model_honours_retry_after_and_a_backoff_function() -> None:
    scheduler = TestScheduler()
    nxt = Next(scheduler, [ModelRateLimitError("429", retry_after=30), ModelServerError("x"),
                           "ok"])
    scheduler.start(lambda: aops.retry_model(3, backoff=lambda attempt: attempt * 2.0)(
        nxt, INPUT))
    assert _starts(nxt) == [200, 235, 244]  # max(2, 30) then 4


def test_disposal_during_the_backoff_cancels_the_next_attempt() -> None:
    scheduler = TestScheduler()
    nxt = Next(scheduler, [ModelServerError("503"), "ok"])
    result = scheduler.start(lambda: aops.retry_model(3, backoff=100, max_backoff=100)(nxt, INPUT),
                             disposed=250)
    assert len(nxt.inputs) == 1 and result.messages == []


def test_disposal_reaches_the_running_attempt() -> None:
    scheduler = TestScheduler()
    nxt = Next(scheduler, ["ok"])
    scheduler.start(lambda: aops.retry_model(3)(nxt, INPUT), disposed=202)
    assert nxt.sources[0].subscriptions[0].unsubscribe == 202


def test_retry_model_wraps_next_for_composition() -> None:
    scheduler = TestScheduler()
    nxt = Next(scheduler, [ModelServerError("503"), "ok"])
    wrapped = aops.retry_model(2, backoff=0)(nxt)
    result = scheduler.start(lambda: wrapped(INPUT))
    assert ending(result.messages).kind == "C" and len(nxt.inputs) == 2


@pytest.mark.parametrize(("args", "exc"), [((0,), ValueError), ((1.5,), TypeError),
                                           ((True,), TypeError), ((2, -1.0), ValueError)])
def test_retry_model_refuses_bad_arguments(args: tuple, exc: type) -> None:
    with pytest.raises(exc, match="retry_model"):
        aops.retry_model(*args)


def test_retry_model_is_for_model_calls_only() -> None:
    with pytest.raises(TypeError, match="on_model_call"):
        aops.retry_model(2)(lambda i: reactivex.empty(), ReasoningInput(messages=()))
    with pytest.raises(TypeError, match="wraps the hook's next"):
        aops.retry_model(2)("next")  # type: ignore[call-overload]


# -- fallback_to --------------------------------------------------------------------------


def test_fallback_to_calls_next_with_each_backup_model_in_turn() -> None:
    scheduler = TestScheduler()
    other = ScriptedModel([], name="other")
    nxt = Next(scheduler, [ModelAuthenticationError("401"), ModelServerError("503"), "ok"])
    result = scheduler.start(lambda: aops.fallback_to(BACKUP, other)(nxt, INPUT))
    assert ending(result.messages).kind == "C"
    assert [i.model.name for i in nxt.inputs] == ["primary", "backup", "other"]
    assert nxt.inputs[1].messages is INPUT.messages  # only the model changed


def test_fallback_to_ends_with_the_last_models_error() -> None:
    scheduler = TestScheduler()
    last = ModelServerError("backup down")
    nxt = Next(scheduler, [ModelServerError("primary down"), last])
    result = scheduler.start(lambda: aops.fallback_to(BACKUP)(nxt, INPUT))
    assert ending(result.messages).exception is last


def test_fallback_to_does_not_switch_after_content() -> None:
    scheduler = TestScheduler()
    nxt = Next(scheduler, ["content then error", "ok"])
    result = scheduler.start(lambda: aops.fallback_to(BACKUP)(nxt, INPUT))
    assert len(nxt.inputs) == 1 and ending(result.messages).kind == "E"


def test_fallback_to_refuses_what_is_not_a_model() -> None:
    with pytest.raises(TypeError, match="at least one"):
        aops.fallback_to()
    with pytest.raises(TypeError, match="not a chat model"):
        aops.fallback_to("gpt-4o")


def test_composed_retries_on_the_primary_then_on_the_backup() -> None:
    scheduler = TestScheduler()
    nxt = Next(scheduler, [ModelServerError("p1"), ModelServerError("p2"), ModelServerError("b1"),
                           "ok"])
    handler = aops.fallback_to(BACKUP)(aops.retry_model(2, backoff=0)(nxt))
    result = scheduler.start(lambda: handler(INPUT))
    assert ending(result.messages).kind == "C"
    assert [i.model.name for i in nxt.inputs] == ["primary", "primary", "backup", "backup"]


# -- in a real agent -----------------------------------------------------------------------


def test_fallback_to_in_on_model_call_answers_from_the_backup() -> None:
    primary = ScriptedModel([ModelServerError("503")], name="primary")
    backup = ScriptedModel(["from the backup"], name="backup")
    agent = hook_agent(ExtensionPoint.ON_MODEL_CALL,
                       lambda inp, next: aops.fallback_to(backup)(next, inp), primary,
                       max_retries=1)
    items, error = collect(agent.stream("hi"))
    assert error is None and items[-2].result.text == "from the backup"
    assert (len(primary.calls), len(backup.calls)) == (1, 1)


def test_retry_model_in_on_model_call_multiplies_the_built_in_attempts() -> None:
    model = ScriptedModel([ModelServerError("a"), ModelServerError("b"), "third time"])
    agent = hook_agent(ExtensionPoint.ON_MODEL_CALL,
                       lambda inp, next: aops.retry_model(3, backoff=0)(next, inp), model,
                       max_retries=1)
    items, error = collect(agent.stream("hi"))
    assert error is None and items[-2].result.text == "third time"
    assert len(model.calls) == 3
    # Each attempt is a model call of its own; the stored message is the last one's.
    starts = [e for e in items if type(e).__name__ == "ModelCallStartEvent"]
    assert len(starts) == 3


def test_fallback_to_tells_the_listener_which_model_failed_and_why() -> None:
    scheduler = TestScheduler()
    other = ScriptedModel([], name="other")
    first, second = ModelServerError("p"), ModelServerError("b")
    heard: list[tuple[str, Exception]] = []
    nxt = Next(scheduler, [first, second, "ok"])
    scheduler.start(lambda: aops.fallback_to(
        BACKUP, other, listener=lambda m, e: heard.append((m.name, e)))(nxt, INPUT))
    assert heard == [("primary", first), ("backup", second)]


def test_a_raising_listener_fails_the_call_with_its_error() -> None:
    scheduler = TestScheduler()
    boom = RuntimeError("listener")

    def listener(model: Any, error: Exception) -> None:
        raise boom

    nxt = Next(scheduler, [ModelServerError("p"), "ok"])
    result = scheduler.start(lambda: aops.fallback_to(BACKUP, listener=listener)(nxt, INPUT))
    assert ending(result.messages).exception is boom and len(nxt.inputs) == 1
    with pytest.raises(TypeError, match="listener"):
        aops.fallback_to(BACKUP, listener="print")  # type: ignore[arg-type]
