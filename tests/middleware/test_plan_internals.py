"""Plan internals that users never see but that the hot path relies on."""

from __future__ import annotations

from typing import Any

from reactivex import Observable

from rx_agent import ExtensionPoint, MiddlewareBase, ReasoningInput, RuntimeContext
from rx_agent.middleware import ExecutionPlan


class DeclaresButKeepsDefault(MiddlewareBase):
    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_REASONING}


class Overrides(MiddlewareBase):
    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_REASONING}

    def on_reasoning(self, agent: Any, ctx: Any, input: Any, next: Any) -> Observable[Any]:
        return next(input)  # type: ignore[no-any-return]


def core(inp: ReasoningInput) -> Observable[Any]:
    raise AssertionError("not called")


def test_default_hooks_are_participants_but_build_no_layer() -> None:
    mw = DeclaresButKeepsDefault()
    plan = ExecutionPlan([mw])
    assert plan.participants(ExtensionPoint.ON_REASONING) == (mw,)
    assert plan.wrap(ExtensionPoint.ON_REASONING, None, RuntimeContext(), core) is core  # type: ignore[arg-type]


def test_overridden_hooks_build_a_layer() -> None:
    plan = ExecutionPlan([Overrides()])
    assert plan.wrap(ExtensionPoint.ON_REASONING, None, RuntimeContext(), core) is not core  # type: ignore[arg-type]


def test_a_point_without_participants_builds_no_wrapper() -> None:
    plan = ExecutionPlan([Overrides()])
    assert plan.wrap(ExtensionPoint.ON_ACTING, None, RuntimeContext(), core) is core  # type: ignore[arg-type]
