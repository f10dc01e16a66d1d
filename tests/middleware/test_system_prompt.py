"""The on_system_prompt transformer pipeline (docs/concepts/hooks.md)."""

from __future__ import annotations

import reactivex
from conftest import add_toolkit, call_add, make_agent, role_of, stream_events

from rx_agent import ExtensionPoint, MiddlewareBase, ScriptedModel


class Suffix(MiddlewareBase):
    def __init__(self, suffix: str, order: int = 1, as_observable: bool = False) -> None:
        self.suffix = suffix
        self._order = order
        self.as_observable = as_observable
        self.calls = 0

    def order(self) -> int:
        return self._order

    def active_points(self):  # type: ignore[no-untyped-def]
        return {ExtensionPoint.ON_SYSTEM_PROMPT}

    def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def]
        self.calls += 1
        value = current_prompt + self.suffix
        return reactivex.just(value) if self.as_observable else value


def _system_texts(call) -> list[str]:  # type: ignore[no-untyped-def]
    return [m.text for m in call.messages if role_of(m) == "system"]


def test_pipeline_runs_left_to_right_in_plan_order() -> None:
    model = ScriptedModel(["ok"])
    # registered B first; A has the higher order so it runs first
    agent = make_agent(
        model, sys_prompt="base", middlewares=[Suffix("|B", order=1), Suffix("|A", order=2)]
    )
    stream_events(agent)
    assert _system_texts(model.calls[0]) == ["base|A|B"]


def test_pipeline_ties_keep_registration_order() -> None:
    model = ScriptedModel(["ok"])
    agent = make_agent(model, sys_prompt="base", middlewares=[Suffix("|A"), Suffix("|B")])
    stream_events(agent)
    assert _system_texts(model.calls[0]) == ["base|A|B"]


def test_base_prompt_is_stripped() -> None:
    model = ScriptedModel(["ok"])
    stream_events(make_agent(model, sys_prompt="  \n base \t\n"))
    assert _system_texts(model.calls[0]) == ["base"]


def test_hooks_receive_the_stripped_base() -> None:
    seen: list[str] = []

    class Spy(MiddlewareBase):
        def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def]
            seen.append(current_prompt)
            return current_prompt

    stream_events(make_agent(ScriptedModel(["ok"]), sys_prompt="  base  ", middlewares=[Spy()]))
    assert seen == ["base"]


def test_system_message_comes_first() -> None:
    model = ScriptedModel(["ok"])
    stream_events(make_agent(model, sys_prompt="be brief"))
    first = model.calls[0].messages[0]
    assert role_of(first) == "system"
    assert first.text == "be brief"


def test_empty_prompt_sends_no_system_message() -> None:
    model = ScriptedModel(["ok"])
    stream_events(make_agent(model, sys_prompt=""))
    assert _system_texts(model.calls[0]) == []
    assert role_of(model.calls[0].messages[0]) == "user"


def test_blank_prompt_sends_no_system_message() -> None:
    model = ScriptedModel(["ok"])
    stream_events(make_agent(model, sys_prompt="   \n\t "))
    assert [role_of(m) for m in model.calls[0].messages] == ["user"]


def test_hook_returning_empty_prompt_removes_the_system_message() -> None:
    class Clears(MiddlewareBase):
        def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def]
            return ""

    model = ScriptedModel(["ok"])
    stream_events(make_agent(model, sys_prompt="base", middlewares=[Clears()]))
    assert _system_texts(model.calls[0]) == []


def test_hook_can_add_a_prompt_when_the_base_is_empty() -> None:
    model = ScriptedModel(["ok"])
    stream_events(make_agent(model, sys_prompt="", middlewares=[Suffix("added")]))
    assert _system_texts(model.calls[0]) == ["added"]


def test_hook_returning_a_one_item_observable_works() -> None:
    model = ScriptedModel(["ok"])
    agent = make_agent(
        model,
        sys_prompt="base",
        middlewares=[Suffix("|O", order=2, as_observable=True), Suffix("|S")],
    )
    stream_events(agent)
    assert _system_texts(model.calls[0]) == ["base|O|S"]


def test_runs_once_per_call_and_is_reused_by_every_round() -> None:
    class Counting(MiddlewareBase):
        calls = 0

        def on_system_prompt(self, agent, ctx, current_prompt):  # type: ignore[no-untyped-def]
            Counting.calls += 1
            return f"{current_prompt}#{Counting.calls}"

    model = ScriptedModel([[call_add("c1")], [call_add("c2")], "done"])
    stream_events(
        make_agent(model, sys_prompt="base", toolkit=add_toolkit(), middlewares=[Counting()])
    )
    assert Counting.calls == 1
    assert [_system_texts(c) for c in model.calls] == [["base#1"]] * 3


def test_prompt_is_reused_by_the_summary_call() -> None:
    mw = Suffix("|once")
    model = ScriptedModel([[call_add("c1")], [call_add("c2")], "summary"])
    stream_events(
        make_agent(model, sys_prompt="base", toolkit=add_toolkit(), max_iters=2, middlewares=[mw])
    )
    assert mw.calls == 1
    assert len(model.calls) == 3
    assert [_system_texts(c) for c in model.calls] == [["base|once"]] * 3


def test_runs_again_for_each_call() -> None:
    mw = Suffix("|x")
    agent = make_agent(ScriptedModel(["a", "b"]), sys_prompt="base", middlewares=[mw])
    stream_events(agent)
    stream_events(agent)
    assert mw.calls == 2


def test_runs_after_state_ready_and_before_the_first_reasoning_round() -> None:
    from conftest import RecordingMiddleware

    log: list = []
    stream_events(make_agent(ScriptedModel(["ok"]), middlewares=[RecordingMiddleware("r", log)]))
    order = [(e[1], e[2]) for e in log if e[2] in ("pre", "call")]
    assert order.index(("on_agent_state_ready", "call")) < order.index(("on_system_prompt", "call"))
    assert order.index(("on_system_prompt", "call")) < order.index(("on_reasoning", "pre"))
