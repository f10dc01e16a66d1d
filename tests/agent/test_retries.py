"""max_retries, fallback_model and failover_listener (docs/models.md)."""

from __future__ import annotations

import pytest
from conftest import (
    add_toolkit,
    builder,
    call_add,
    make_agent,
    result_msg,
    stream_error,
    stream_events,
)

from rx_agent import ReActAgent, RuntimeContext, ScriptedModel


class Flaky(Exception):
    pass


def test_default_is_three_total_attempts() -> None:
    model = ScriptedModel([Flaky("1"), Flaky("2"), Flaky("3"), "never"])
    _, error = stream_error(make_agent(model).stream("hi"))
    assert isinstance(error, Flaky)
    assert len(model.calls) == 3


def test_retries_until_success_within_the_budget() -> None:
    model = ScriptedModel([Flaky("1"), Flaky("2"), "third time"])
    events = stream_events(make_agent(model))
    assert result_msg(events).text == "third time"
    assert len(model.calls) == 3


def test_max_retries_counts_total_attempts() -> None:
    model = ScriptedModel([Flaky("1"), Flaky("2"), "never"])
    agent = builder(model).max_retries(2).build()
    _, error = stream_error(agent.stream("hi"))
    assert str(error) == "2"
    assert len(model.calls) == 2


def test_max_retries_one_means_no_retry() -> None:
    model = ScriptedModel([Flaky("only"), "never"])
    agent = builder(model).max_retries(1).build()
    stream_error(agent.stream("hi"))
    assert len(model.calls) == 1


@pytest.mark.parametrize("n", [0, -3])
def test_keyword_max_retries_non_positive_is_a_value_error(n: int) -> None:
    with pytest.raises(ValueError):
        ReActAgent(name="a", model=ScriptedModel([]), max_retries=n)


def test_retry_attempts_get_the_same_input() -> None:
    model = ScriptedModel([Flaky("1"), "ok"])
    stream_events(make_agent(model, sys_prompt="sys"))
    first, second = model.calls
    assert [m.text for m in first.messages] == [m.text for m in second.messages]
    assert list(first.tools) == list(second.tools)


def test_retries_apply_to_each_model_call() -> None:
    model = ScriptedModel([Flaky("a"), [call_add()], Flaky("b"), "done"])
    events = stream_events(make_agent(model, toolkit=add_toolkit(), max_retries=2))
    assert result_msg(events).text == "done"
    assert len(model.calls) == 4


def test_a_retry_emits_one_model_call_start_per_model_call() -> None:
    from conftest import of_type

    from rx_agent import ModelCallStartEvent

    events = stream_events(make_agent(ScriptedModel([Flaky("1"), "ok"])))
    assert len(of_type(events, ModelCallStartEvent)) == 1


# -- fallback ----------------------------------------------------------------------------------


def test_fallback_is_used_when_the_primary_fails_before_its_first_chunk() -> None:
    primary = ScriptedModel([Flaky("p1"), Flaky("p2")], name="primary")
    fallback = ScriptedModel(["from fallback"], name="fallback")
    agent = builder(primary).max_retries(2).fallback_model(fallback).build()
    events = stream_events(agent)
    assert result_msg(events).text == "from fallback"
    assert len(primary.calls) == 2
    assert len(fallback.calls) == 1


def test_fallback_gets_the_same_input() -> None:
    primary = ScriptedModel([Flaky("p1")], name="primary")
    fallback = ScriptedModel(["fb"], name="fallback")
    agent = builder(primary).max_retries(1).fallback_model(fallback).sys_prompt("sys").build()
    stream_events(agent)
    texts = [m.text for m in primary.calls[0].messages]
    assert [m.text for m in fallback.calls[0].messages] == texts


def test_error_after_the_first_chunk_is_not_failed_over() -> None:
    primary = ScriptedModel([["partial", Flaky("mid")]], name="primary")
    fallback = ScriptedModel(["never"], name="fallback")
    agent = builder(primary).max_retries(1).fallback_model(fallback).build()
    _, error = stream_error(agent.stream("hi"))
    assert str(error) == "mid"
    assert fallback.calls == []


def test_failing_fallback_errors_the_stream() -> None:
    primary = ScriptedModel([Flaky("p")], name="primary")
    fallback = ScriptedModel([Flaky("f1"), Flaky("f2")], name="fallback")
    agent = builder(primary).max_retries(1).fallback_model(fallback).build()
    _, error = stream_error(agent.stream("hi"))
    assert isinstance(error, Flaky)


def test_each_model_call_starts_on_the_primary_again() -> None:
    primary = ScriptedModel([Flaky("round 1 fails"), "primary answers round 2"], name="primary")
    fallback = ScriptedModel([[call_add("c1")]], name="fallback")
    agent = builder(primary).toolkit(add_toolkit()).max_retries(1).fallback_model(fallback).build()
    events = stream_events(agent)
    assert result_msg(events).text == "primary answers round 2"
    assert len(primary.calls) == 2
    assert len(fallback.calls) == 1


def test_each_call_starts_on_the_primary_again() -> None:
    primary = ScriptedModel([Flaky("call 1 fails"), "primary again"], name="primary")
    fallback = ScriptedModel(["fallback once"], name="fallback")
    agent = builder(primary).max_retries(1).fallback_model(fallback).build()
    ctx = RuntimeContext(session_id="s")
    assert result_msg(stream_events(agent, "one", ctx)).text == "fallback once"
    assert result_msg(stream_events(agent, "two", ctx)).text == "primary again"


# -- failover listener -------------------------------------------------------------------------


def test_failover_listener_is_called_with_the_primary_and_the_error() -> None:
    error = Flaky("primary down")
    primary = ScriptedModel([error], name="primary")
    fallback = ScriptedModel(["fb"], name="fallback")
    seen: list = []
    agent = (
        builder(primary)
        .max_retries(1)
        .fallback_model(fallback)
        .failover_listener(lambda model, err: seen.append((model, err)))
        .build()
    )
    stream_events(agent)
    assert seen == [(primary, error)]


def test_failover_listener_is_not_called_without_a_switch() -> None:
    seen: list = []
    agent = (
        builder(ScriptedModel([Flaky("x"), "ok"]))
        .max_retries(2)
        .fallback_model(ScriptedModel(["fb"]))
        .failover_listener(lambda m, e: seen.append(e))
        .build()
    )
    assert result_msg(stream_events(agent)).text == "ok"
    assert seen == []


def test_failover_listener_exception_is_ignored() -> None:
    primary = ScriptedModel([Flaky("down")], name="primary")
    fallback = ScriptedModel(["still works"], name="fallback")

    def listener(model, error) -> None:  # type: ignore[no-untyped-def]
        raise RuntimeError("listener bug")

    agent = (
        builder(primary).max_retries(1).fallback_model(fallback).failover_listener(listener).build()
    )
    assert result_msg(stream_events(agent)).text == "still works"
