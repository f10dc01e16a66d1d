"""The execution plan (docs/concepts/plan.md) (built once, frozen)."""

from __future__ import annotations

import re

import pytest
from conftest import (
    ONION,
    Ordered,
    RecordingMiddleware,
    add_toolkit,
    builder,
    call_add,
    entries,
    make_agent,
    points_hit,
    stream_events,
    type_names,
)

from rx_agent import ExtensionPoint, MiddlewareBase, ReActAgent, ScriptedModel

ALL_POINTS = tuple(ExtensionPoint)
# Java's seven: what ``active_points() -> None`` means (ON_COMPRESS_CONTEXT is opt-in).
JAVA_POINTS = tuple(p for p in ExtensionPoint if p is not ExtensionPoint.ON_COMPRESS_CONTEXT)


def _tool_round_model() -> ScriptedModel:
    return ScriptedModel([[call_add()], "done"])


# -- registration and ordering -----------------------------------------------------------------


def test_order_sorts_descending_and_keeps_registration_order_for_ties() -> None:
    o1a, o, o2, o1b = Ordered("o1a", 1), Ordered("o", -1), Ordered("o2", 2), Ordered("o1b", 1)
    agent = builder(ScriptedModel([])).middlewares([o1a, o, o2, o1b]).build()
    assert agent.middlewares == (o2, o1a, o1b, o)


@pytest.mark.parametrize("point", JAVA_POINTS, ids=lambda p: p.name)
def test_participants_follow_the_sorted_order_at_every_point(point: ExtensionPoint) -> None:
    o1a, o, o2, o1b = Ordered("o1a", 1), Ordered("o", -1), Ordered("o2", 2), Ordered("o1b", 1)
    agent = builder(ScriptedModel([])).middlewares([o1a, o, o2, o1b]).build()
    assert tuple(agent.plan.participants(point)) == (o2, o1a, o1b, o)


def test_keyword_construction_sorts_like_the_builder() -> None:
    o1a, o, o2, o1b = Ordered("o1a", 1), Ordered("o", -1), Ordered("o2", 2), Ordered("o1b", 1)
    agent = ReActAgent(name="a", model=ScriptedModel([]), middlewares=[o1a, o, o2, o1b])
    assert agent.middlewares == (o2, o1a, o1b, o)


def test_middleware_and_middlewares_append_in_call_order() -> None:
    a, b, c, d = (Ordered(x) for x in "abcd")
    agent = builder(ScriptedModel([])).middleware(a).middlewares([b, c]).middleware(d).build()
    assert agent.middlewares == (a, b, c, d)


def test_onion_runs_in_sorted_order() -> None:
    log: list = []
    mws = [
        RecordingMiddleware("o1a", log, 1),
        RecordingMiddleware("o", log, -1),
        RecordingMiddleware("o2", log, 2),
        RecordingMiddleware("o1b", log, 1),
    ]
    stream_events(make_agent(ScriptedModel(["hi"]), middlewares=mws))
    assert [e[0] for e in entries(log, "on_agent", "pre")] == ["o2", "o1a", "o1b", "o"]


def test_same_instance_registered_twice_is_two_layers() -> None:
    log: list = []
    mw = RecordingMiddleware("twice", log)
    agent = builder(ScriptedModel(["hi"])).middleware(mw).middleware(mw).build()
    assert agent.middlewares == (mw, mw)
    assert agent.plan.participants(ExtensionPoint.ON_MODEL_CALL) == (mw, mw)
    stream_events(agent)
    assert len(entries(log, "on_agent", "pre")) == 2
    assert len(entries(log, "on_model_call", "pre")) == 2
    assert len(entries(log, "on_system_prompt")) == 2
    assert len(entries(log, "on_agent_state_ready")) == 2
    assert len(entries(log, "on_agent_finish")) == 2


# -- active points -----------------------------------------------------------------------------


def test_none_active_points_means_every_point() -> None:
    log: list = []
    mw = RecordingMiddleware("all", log, points=None)
    agent = make_agent(_tool_round_model(), toolkit=add_toolkit(), middlewares=[mw])
    stream_events(agent)
    assert points_hit(log) == {p.value for p in JAVA_POINTS}
    for point in JAVA_POINTS:
        assert agent.plan.participants(point) == (mw,)
    assert agent.plan.participants(ExtensionPoint.ON_COMPRESS_CONTEXT) == ()


def test_omitted_point_is_never_invoked_even_if_overridden() -> None:
    log: list = []
    mw = RecordingMiddleware("only_model", log, points={ExtensionPoint.ON_MODEL_CALL})
    stream_events(make_agent(_tool_round_model(), toolkit=add_toolkit(), middlewares=[mw]))
    assert points_hit(log) == {"on_model_call"}


@pytest.mark.parametrize("point", JAVA_POINTS, ids=lambda p: p.name)
def test_single_declared_point_is_the_only_one_invoked(point: ExtensionPoint) -> None:
    log: list = []
    mw = RecordingMiddleware("one", log, points=[point])
    stream_events(make_agent(_tool_round_model(), toolkit=add_toolkit(), middlewares=[mw]))
    assert points_hit(log) == {point.value}


def test_declared_point_that_is_not_overridden_runs_the_default() -> None:
    class Declares(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return set(ExtensionPoint)

    model_a, model_b = _tool_round_model(), _tool_round_model()
    plain = stream_events(make_agent(model_a, toolkit=add_toolkit()))
    declared = stream_events(make_agent(model_b, toolkit=add_toolkit(), middlewares=[Declares()]))
    assert type_names(declared) == type_names(plain)
    assert declared[-2].result.text == "done"


def test_empty_active_points_is_registered_but_never_runs() -> None:
    log: list = []
    mw = RecordingMiddleware("silent", log, points=set())
    agent = make_agent(_tool_round_model(), toolkit=add_toolkit(), middlewares=[mw])
    assert agent.middlewares == (mw,)
    for point in ExtensionPoint:
        assert agent.plan.participants(point) == ()
    stream_events(agent)
    assert log == []


def test_mutating_the_returned_set_after_build_changes_nothing() -> None:
    log: list = []
    points = {ExtensionPoint.ON_MODEL_CALL}

    class Mutable(RecordingMiddleware):
        def active_points(self):  # type: ignore[no-untyped-def]
            return points

    mw = Mutable("m", log)
    agent = make_agent(_tool_round_model(), toolkit=add_toolkit(), middlewares=[mw])
    points.add(ExtensionPoint.ON_AGENT)
    points.add(ExtensionPoint.ON_ACTING)
    points.discard(ExtensionPoint.ON_MODEL_CALL)
    assert agent.plan.participants(ExtensionPoint.ON_AGENT) == ()
    assert agent.plan.participants(ExtensionPoint.ON_MODEL_CALL) == (mw,)
    stream_events(agent)
    assert points_hit(log) == {"on_model_call"}


def test_active_points_is_read_exactly_once_per_middleware_at_build() -> None:
    counts = {"a": 0, "b": 0}

    class Counting(MiddlewareBase):
        def __init__(self, key: str) -> None:
            self.key = key

        def active_points(self):  # type: ignore[no-untyped-def]
            counts[self.key] += 1
            return [ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_AGENT]

    agent = make_agent(ScriptedModel(["one", "two"]), middlewares=[Counting("a"), Counting("b")])
    assert counts == {"a": 1, "b": 1}
    stream_events(agent)
    stream_events(agent)
    assert counts == {"a": 1, "b": 1}


def test_active_points_may_be_any_collection() -> None:
    log: list = []
    mw = RecordingMiddleware("t", log, points=(ExtensionPoint.ON_AGENT,))
    agent = make_agent(ScriptedModel(["x"]), middlewares=[mw])
    assert agent.plan.participants(ExtensionPoint.ON_AGENT) == (mw,)
    assert agent.plan.participants(ExtensionPoint.ON_REASONING) == ()


def test_participation_is_orthogonal_to_order() -> None:
    log: list = []
    inner = RecordingMiddleware("inner", log, order=0, points={ExtensionPoint.ON_MODEL_CALL})
    outer = RecordingMiddleware("outer", log, order=9, points={ExtensionPoint.ON_MODEL_CALL})
    other = RecordingMiddleware("other", log, order=5, points={ExtensionPoint.ON_AGENT})
    agent = make_agent(ScriptedModel(["x"]), middlewares=[inner, other, outer])
    assert agent.plan.participants(ExtensionPoint.ON_MODEL_CALL) == (outer, inner)
    assert agent.plan.participants(ExtensionPoint.ON_AGENT) == (other,)
    assert agent.middlewares == (outer, other, inner)


# -- no participants: no wrapper ---------------------------------------------------------------


@pytest.mark.parametrize("point", ONION, ids=lambda p: p.name)
def test_point_without_participants_has_empty_tuple_and_other_hooks_are_not_invoked(
    point: ExtensionPoint,
) -> None:
    others = [p for p in ONION if p is not point]
    log: list = []
    mw = RecordingMiddleware("elsewhere", log, points=others)
    agent = make_agent(_tool_round_model(), toolkit=add_toolkit(), middlewares=[mw])
    assert agent.plan.participants(point) == ()
    events = stream_events(agent)
    assert point.value not in points_hit(log)
    assert events[-2].result.text == "done"


def test_participants_is_read_only() -> None:
    mw = Ordered("a")
    agent = make_agent(ScriptedModel([]), middlewares=[mw])
    participants = agent.plan.participants(ExtensionPoint.ON_AGENT)
    assert isinstance(participants, tuple)


def test_plan_is_frozen_against_builder_reuse() -> None:
    a, b = Ordered("a"), Ordered("b")
    bld = builder(ScriptedModel([])).middleware(a)
    agent = bld.build()
    bld.middleware(b)
    assert agent.middlewares == (a,)


# -- printable ---------------------------------------------------------------------------------


class OuterMw(MiddlewareBase):
    def order(self) -> int:
        return 7


class InnerMw(MiddlewareBase):
    def order(self) -> int:
        return -3

    def active_points(self):  # type: ignore[no-untyped-def]
        return {ExtensionPoint.ON_REASONING}


def _line_for(text: str, point: ExtensionPoint) -> str:
    pattern = re.compile(rf"(?<![A-Za-z_])({point.name}|{point.value})(?![A-Za-z_])", re.I)
    lines = [line for line in text.splitlines() if pattern.search(line)]
    assert len(lines) == 1, f"expected one line for {point.name} in:\n{text}"
    return lines[0]


def test_str_of_plan_has_one_line_per_point_with_participants_and_orders() -> None:
    agent = make_agent(ScriptedModel([]), middlewares=[InnerMw(), OuterMw()])
    text = str(agent.plan)
    reasoning = _line_for(text, ExtensionPoint.ON_REASONING)
    assert "OuterMw" in reasoning and "InnerMw" in reasoning
    assert reasoning.index("OuterMw") < reasoning.index("InnerMw")
    assert "7" in reasoning and "-3" in reasoning
    acting = _line_for(text, ExtensionPoint.ON_ACTING)
    assert "OuterMw" in acting and "InnerMw" not in acting
    for point in JAVA_POINTS:
        _line_for(text, point)


def test_str_of_plan_without_middleware_lists_every_java_point() -> None:
    text = str(make_agent(ScriptedModel([])).plan)
    for point in JAVA_POINTS:
        _line_for(text, point)
    # the opt-in point shows only when somebody takes part (a Java port's plan prints as before)
    assert "on_compress_context" not in text
    assert "on_compress_context" not in make_agent(ScriptedModel([])).plan.to_mermaid()


# -- telling two instances of one class apart (issue 10, item 19) -------------------------------


class Mw(MiddlewareBase):
    def __init__(self, order: int = 5) -> None:
        self._order = order

    def order(self) -> int:
        return self._order


def test_describe_numbers_instances_of_one_class_by_registration() -> None:
    first, second = Mw(5), Mw(5)
    agent = make_agent(ScriptedModel([]), middlewares=[first, second, OuterMw()])
    line = _line_for(agent.plan.describe(), ExtensionPoint.ON_MODEL_CALL)
    assert line.split(None, 1)[1] == "OuterMw(7) -> Mw#1(5) -> Mw#2(5)"


def test_numbers_follow_registration_even_when_the_order_flips_them() -> None:
    low, high = Mw(1), Mw(9)
    plan = make_agent(ScriptedModel([]), middlewares=[low, high]).plan
    assert plan.labels(ExtensionPoint.ON_AGENT) == ("Mw#2", "Mw#1")
    assert plan.orders(ExtensionPoint.ON_AGENT) == (9, 1)
    assert plan.labels() == ("Mw#2", "Mw#1")


def test_the_same_instance_twice_is_two_numbered_layers() -> None:
    mw = Mw()
    plan = builder(ScriptedModel([])).middleware(mw).middleware(mw).build().plan
    assert plan.labels(ExtensionPoint.ON_REASONING) == ("Mw#1", "Mw#2")
    mermaid = plan.to_mermaid()
    assert '["Mw#1 (order 5)"]' in mermaid and '["Mw#2 (order 5)"]' in mermaid


def test_a_class_registered_once_keeps_its_plain_name() -> None:
    plan = make_agent(ScriptedModel([]), middlewares=[Mw(), OuterMw()]).plan
    assert plan.labels() == ("OuterMw", "Mw")


def test_errors_name_the_numbered_instance() -> None:
    class Forgetful(MiddlewareBase):
        def __init__(self, forget: bool) -> None:
            self.forget = forget

        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return None if self.forget else next(input)

    agent = make_agent(ScriptedModel(["x"]), middlewares=[Forgetful(False), Forgetful(True)])
    with pytest.raises(TypeError, match=r"Forgetful#2\.on_model_call\(\) returned NoneType"):
        agent.call_sync("hi")
