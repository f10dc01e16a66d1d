"""The point table: one row per hook point, read by the plan, the layers, the forms,
the notifications and the harness; a new point is a row plus its step."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import reactivex
from reactivex import Observable
from reactivex import operators as ops

from rx_agent import (
    ExtensionPoint,
    MiddlewareBase,
    ModelCallStartEvent,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
)
from rx_agent.middleware import ExecutionPlan, PlanError, _notify
from rx_agent.middleware._points import OPT_IN, SPECS, PointKind, PointSpec
from rx_agent.middleware.base import OPT_IN as BASE_OPT_IN
from rx_agent.testing import MiddlewareHarness, text_round

# -- the table ---------------------------------------------------------------------------


def test_every_point_has_one_row_in_enum_order() -> None:
    assert list(SPECS) == list(ExtensionPoint)
    assert all(spec.point is point for point, spec in SPECS.items())


def test_the_public_kind_and_opt_in_come_from_the_rows() -> None:
    assert {p.value: p.kind for p in ExtensionPoint} == {
        "on_agent": "onion", "on_reasoning": "onion", "on_acting": "onion",
        "on_model_call": "onion", "on_system_prompt": "transformer",
        "on_agent_state_ready": "notification", "on_agent_finish": "notification",
        "on_compress_context": "onion",
    }
    assert SPECS[ExtensionPoint.ON_AGENT_FINISH].kind is PointKind.AWAITED_NOTIFICATION
    assert OPT_IN is BASE_OPT_IN == {ExtensionPoint.ON_COMPRESS_CONTEXT}


def test_each_row_names_the_parameters_of_the_default_hook() -> None:
    for point, spec in SPECS.items():
        default = getattr(MiddlewareBase, point.value)
        assert tuple(inspect.signature(default).parameters)[1:] == spec.params, point
        assert (spec.settle is None) == (spec.kind is PointKind.ONION), point


def test_every_java_name_of_the_table_is_refused() -> None:
    for spec in SPECS.values():
        cls = type("Port", (MiddlewareBase,), {spec.java: lambda self: None})
        with pytest.raises(PlanError, match=rf"Port\.{spec.java} is Java's name .* "
                                            rf"`{spec.point.value}`"):
            ExecutionPlan([cls()])


# -- a hypothetical new point: one row in the test, no other change -------------------------


@dataclasses.dataclass(frozen=True)
class ReviewInput:
    """The input record of the hypothetical point."""

    draft: str


def _new_point(name: str) -> ExtensionPoint:
    # Standing in for a new member of ExtensionPoint (one line in _points.py): an enum
    # cannot grow at run time, so the test makes an instance outside its members.
    point: ExtensionPoint = object.__new__(ExtensionPoint)
    point._name_ = name.upper()
    point._value_ = name
    return point


ON_PLAN_REVIEW = _new_point("on_plan_review")
ON_PLAN_SAVED = _new_point("on_plan_saved")

REVIEW = PointSpec(
    ON_PLAN_REVIEW, PointKind.ONION, "wraps the review of a plan", ReviewInput,
    ("agent", "ctx", "input", "next"), java="onPlanReview", python=None, opt_in=True,
    sample_input=lambda model, name: ReviewInput("draft"),
    sample_upstream=lambda inp, s: s.text_round(inp.draft),
)
SAVED = PointSpec(
    ON_PLAN_SAVED, PointKind.AWAITED_NOTIFICATION, "is told a plan was saved", str,
    ("agent", "ctx", "state", "plan_text"), java="onPlanSaved", python=None, opt_in=True,
    settle=_notify.settle_awaited, sample_input=lambda model, name: "the plan",
)


@pytest.fixture
def new_rows(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(SPECS, ON_PLAN_REVIEW, REVIEW)
    monkeypatch.setitem(SPECS, ON_PLAN_SAVED, SAVED)
    yield


class Reviewer(MiddlewareBase):
    def on_plan_review(self, agent: Any, ctx: Any, input: ReviewInput, next: Any) -> Any:
        return next(ReviewInput(input.draft.upper())).pipe(ops.filter(
            lambda e: not isinstance(e, ModelCallStartEvent)))


class Saver(MiddlewareBase):
    def __init__(self) -> None:
        self.saved: list[tuple[Any, str]] = []

    async def on_plan_saved(self, agent: Any, ctx: Any, state: Any, plan_text: str) -> None:
        await asyncio.sleep(0)
        self.saved.append((state, plan_text))


def _core(seen: list[Any]) -> Any:
    def core(inp: ReviewInput) -> Observable[Any]:
        seen.append(inp)
        return reactivex.from_iterable(text_round(inp.draft))
    return core


@pytest.mark.usefixtures("new_rows")
def test_the_plan_prints_a_new_opt_in_point_only_when_somebody_takes_part() -> None:
    assert "on_plan_review" not in ExecutionPlan([MiddlewareBase()]).describe()
    plan = ExecutionPlan([Reviewer(), Saver()])
    assert "on_plan_review        Reviewer(1)" in plan.describe().splitlines()
    assert "on_plan_saved         Saver(1)" in plan.describe().splitlines()
    assert "on_plan_review_core" in plan.to_mermaid()  # an onion point ends in the core
    assert "on_plan_saved_core" not in plan.to_mermaid()
    assert plan.participants(ON_PLAN_REVIEW) == (plan.middlewares[0],)
    assert {ON_PLAN_REVIEW, ON_PLAN_SAVED} <= plan.layered
    assert ON_PLAN_REVIEW in plan.hooked  # its step's stream is checked


@pytest.mark.usefixtures("new_rows")
def test_a_new_onion_point_wraps_its_core_with_its_input_checked() -> None:
    plan = ExecutionPlan([Reviewer()])
    seen: list[Any] = []
    chain = plan.wrap(ON_PLAN_REVIEW, None, RuntimeContext(), _core(seen))  # type: ignore[arg-type]
    events = chain(ReviewInput("ok")).pipe(ops.to_list()).run()
    assert seen == [ReviewInput("OK")]
    assert [e.delta for e in events if isinstance(e, TextBlockDeltaEvent)] == ["OK"]
    assert not any(isinstance(e, ModelCallStartEvent) for e in events)

    class Wrong(MiddlewareBase):
        def on_plan_review(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            return next("a str")

    wrong = ExecutionPlan([Wrong()]).wrap(ON_PLAN_REVIEW, None, RuntimeContext(),  # type: ignore[arg-type]
                                          _core([]))
    with pytest.raises(TypeError, match="on_plan_review: next\\(\\) was given str, "
                                        "expected ReviewInput"):
        wrong(ReviewInput("x")).run()
    error = plan.not_an_event(ON_PLAN_REVIEW, 42)
    assert str(error).startswith("Reviewer.on_plan_review() emitted int 42, not an AgentEvent")


@pytest.mark.usefixtures("new_rows")
def test_a_new_point_gets_the_forms_and_the_refusals() -> None:
    class JavaForm(MiddlewareBase):
        def on_plan_review(self, agent: Any, input: Any, next: Any) -> Any:
            return next(input)

    class Generator(MiddlewareBase):
        async def on_plan_review(self, agent: Any, ctx: Any, input: Any,
                                 next: Any) -> Any:
            async for event in next(input):
                yield event

    for mw in (JavaForm(), Generator()):
        chain = ExecutionPlan([mw]).wrap(ON_PLAN_REVIEW, None, RuntimeContext(),  # type: ignore[arg-type]
                                         _core([]))
        assert len(asyncio.run(_collect(chain(ReviewInput("x"))))) == 5, mw

    class TooFew(MiddlewareBase):
        def on_plan_saved(self, agent: Any) -> None: ...

    with pytest.raises(PlanError, match=r"the hook must be `def on_plan_saved\(self, agent, "
                                        r"ctx, state, plan_text\)`"):
        ExecutionPlan([TooFew()])

    class Yields(MiddlewareBase):
        async def on_plan_saved(self, agent: Any, ctx: Any, state: Any, plan_text: str) -> Any:
            yield None

    with pytest.raises(PlanError, match=r"only onion hooks yield events.*returning nothing"):
        ExecutionPlan([Yields()])

    Port = type("Port", (MiddlewareBase,), {"onPlanReview": lambda self: None})
    with pytest.raises(PlanError, match=r"Port\.onPlanReview is Java's name and would never be "
                                        "called; name the method `on_plan_review`"):
        ExecutionPlan([Port()])


async def _collect(source: Observable[Any]) -> list[Any]:
    done: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
    items: list[Any] = []
    source.subscribe(items.append, done.set_exception, lambda: done.set_result(items))
    return await done


@pytest.mark.usefixtures("new_rows")
def test_the_harness_runs_a_new_point_from_its_row() -> None:
    result = MiddlewareHarness(Reviewer(), ON_PLAN_REVIEW).run()
    assert result.completed and result.inputs == [ReviewInput("DRAFT")]
    assert [e.delta for e in result.events if isinstance(e, TextBlockDeltaEvent)] == ["DRAFT"]

    saver = Saver()
    saved = MiddlewareHarness(saver, ON_PLAN_SAVED).run()
    assert saved.completed and saver.saved == [(saved.state, "the plan")]

    class Wrong(MiddlewareBase):
        def on_plan_saved(self, agent: Any, ctx: Any, state: Any, plan_text: str) -> Any:
            return 42

    wrong = MiddlewareHarness(Wrong(), ON_PLAN_SAVED).run()
    assert str(wrong.error) == ("Wrong.on_plan_saved() returned int; expected None, an "
                                "Observable or an awaitable")


# -- the harness settles answers with the runtime's own code --------------------------------


class _NoPrompt(MiddlewareBase):
    def on_system_prompt(self, agent: Any, ctx: Any, current_prompt: str) -> Any:
        return None


class _AsyncObservablePrompt(MiddlewareBase):
    async def on_system_prompt(self, agent: Any, ctx: Any,  # type: ignore[override]
                               current_prompt: str) -> Any:
        return reactivex.timer(1.0).pipe(ops.map(lambda _: current_prompt + "!"))


def _runtime_prompt_error(mw: MiddlewareBase) -> str:
    agent = ReActAgent(name="a", model=ScriptedModel(["x"]), sys_prompt="Hi.",
                       middlewares=[mw])
    with pytest.raises(TypeError) as info:
        agent.call_sync("hi")
    return str(info.value)


def test_the_harness_reports_a_prompt_hooks_mistake_as_the_runtime_does() -> None:
    result = MiddlewareHarness(_NoPrompt(), ExtensionPoint.ON_SYSTEM_PROMPT).run(input="Hi.")
    assert str(result.error) == _runtime_prompt_error(_NoPrompt())
    assert "did it forget `return current_prompt`" in str(result.error)


def test_the_harness_settles_an_async_prompt_hooks_observable_as_the_runtime_does() -> None:
    capture: list[Any] = []

    class Seen(MiddlewareBase):
        def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            capture.append(input.messages[0].text)
            return next(input)

    agent = ReActAgent(name="a", model=ScriptedModel(["x"]), sys_prompt="Hi.",
                       middlewares=[_AsyncObservablePrompt(), Seen()])
    agent.call_sync("hi")
    result = MiddlewareHarness(_AsyncObservablePrompt(), "on_system_prompt").run(input="Hi.")
    assert result.completed and result.timeline == [(1.0, capture[0])] == [(1.0, "Hi.!")]
