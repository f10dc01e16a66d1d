"""Continue after the end: a ``RequestContinueEvent`` from the reasoning step makes the
loop run another round instead of finishing (AgentScope Python's ``ContinueOnce``)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
import reactivex
import reactivex.operators as ops
from conftest import (
    add_toolkit,
    call_add,
    make_agent,
    of_type,
    result_msg,
    stream_error,
    stream_events,
)

from rx_agent import (
    ExceedMaxItersEvent,
    ExtensionPoint,
    GenerateReason,
    HintBlock,
    MiddlewareBase,
    Msg,
    RequestStopEvent,
    RuntimeContext,
    ScriptedModel,
)
from rx_agent.event import RequestContinueEvent, parse_event


class ContinueAt(MiddlewareBase):
    """Appends ``events`` to the output of ``point`` on the given rounds."""

    def __init__(
        self, *events: Any, rounds: set[int] = frozenset({1}),  # type: ignore[assignment]
        point: ExtensionPoint = ExtensionPoint.ON_REASONING, interrupt: bool = False,
    ) -> None:
        self.events = events or (RequestContinueEvent("check again"),)
        self.rounds = rounds
        self.point = point
        self.interrupt = interrupt
        self.round = 0

    def active_points(self) -> set[ExtensionPoint]:
        return {self.point}

    def _tail(self, agent: Any, ctx: RuntimeContext, source: Any) -> Any:
        self.round += 1
        if self.round not in self.rounds:
            return source

        def tail(_: Any) -> Any:
            if self.interrupt:
                agent.interrupt(ctx)
            return reactivex.from_iterable(self.events)

        return source.pipe(ops.concat(reactivex.defer(tail)))

    def on_reasoning(self, agent: Any, ctx: RuntimeContext, input: Any, next: Any) -> Any:
        return self._tail(agent, ctx, next(input))

    def on_model_call(self, agent: Any, ctx: RuntimeContext, input: Any, next: Any) -> Any:
        return self._tail(agent, ctx, next(input))

    def on_acting(self, agent: Any, ctx: RuntimeContext, input: Any, next: Any) -> Any:
        return self._tail(agent, ctx, next(input))


def _run(model: ScriptedModel, *mws: MiddlewareBase, max_iters: int = 10) -> tuple[list[Any],
                                                                                   list[Msg]]:
    ctx = RuntimeContext(session_id="s")
    agent = make_agent(model, toolkit=add_toolkit(), middlewares=list(mws), max_iters=max_iters)
    events = stream_events(agent, "hi", ctx)
    assert ctx.agent_state is not None
    return events, ctx.agent_state.context


def _hints(msg: Msg) -> list[str]:
    return [b.hint for b in msg.content if isinstance(b, HintBlock)]


@pytest.mark.parametrize("point", [ExtensionPoint.ON_REASONING, ExtensionPoint.ON_MODEL_CALL])
def test_continue_once_then_finish(point: ExtensionPoint) -> None:
    model = ScriptedModel(["draft", "checked"])
    events, context = _run(model, ContinueAt(point=point))
    assert len(model.calls) == 2
    msg = result_msg(events)
    assert msg.text == "checked"
    assert msg.generate_reason is GenerateReason.MODEL_STOP
    # The continued answer is stored but is not the reply's end.
    assert [m.text for m in context if m.role == "assistant"] == ["draft", "checked"]
    assert context[1].generate_reason is None
    assert _hints(context[2]) == ["check again"]


def test_hint_reaches_the_next_model_input() -> None:
    model = ScriptedModel(["draft", "checked"])
    _run(model, ContinueAt(RequestContinueEvent(hint="Double-check the sums.")))
    first, second = (call.messages for call in model.calls)
    assert not any(_hints(m) for m in first)
    assert _hints(second[-1]) == ["Double-check the sums."]
    assert second[-1].role == "user"
    assert second[-2].text == "draft"


def test_continue_without_a_hint_adds_no_message() -> None:
    model = ScriptedModel(["draft", "checked"])
    events, context = _run(model, ContinueAt(RequestContinueEvent()))
    assert result_msg(events).text == "checked"
    assert [m.role for m in context] == ["user", "assistant", "assistant"]


def test_a_continue_on_the_last_round_ends_with_the_summary() -> None:
    model = ScriptedModel(["draft", "summary"])
    events, context = _run(model, ContinueAt(), max_iters=1)
    assert len(model.calls) == 2
    (exceed,) = of_type(events, ExceedMaxItersEvent)
    assert (exceed.max_iters, exceed.current_iter) == (1, 1)
    msg = result_msg(events)
    assert msg.text == "summary"
    assert msg.generate_reason is GenerateReason.MAX_ITERATIONS
    assert model.calls[1].tools == ()  # the summary call, not another round
    assert _hints(context[2]) == ["check again"]  # the hint is kept before the summary


def test_extra_iters_grants_more_rounds() -> None:
    model = ScriptedModel(["draft", "checked"])
    events, _ = _run(model, ContinueAt(RequestContinueEvent("again", extra_iters=1)),
                     max_iters=1)
    assert not of_type(events, ExceedMaxItersEvent)
    assert result_msg(events).generate_reason is GenerateReason.MODEL_STOP
    assert model.calls[1].tools != ()  # a real round, tools offered


def test_extra_iters_never_exceed_twice_max_iters() -> None:
    model = ScriptedModel(["a", "b", "c", "d", "e", "summary"])
    greedy = ContinueAt(RequestContinueEvent("more", extra_iters=100), rounds=set(range(1, 9)))
    events, _ = _run(model, greedy, max_iters=2)
    assert len(model.calls) == 5  # four rounds (2 x max_iters), then the summary
    (exceed,) = of_type(events, ExceedMaxItersEvent)
    assert (exceed.max_iters, exceed.current_iter) == (2, 4)
    assert result_msg(events).text == "e"


def test_ignored_when_the_reply_is_interrupted() -> None:
    model = ScriptedModel(["draft", "never"])
    events, _ = _run(model, ContinueAt(interrupt=True))
    assert len(model.calls) == 1
    assert result_msg(events).generate_reason is GenerateReason.INTERRUPTED


@pytest.mark.parametrize("order", ["stop_first", "continue_first"])
def test_stop_beats_continue(order: str) -> None:
    pair = [RequestStopEvent("enough"), RequestContinueEvent("again")]
    if order == "continue_first":
        pair.reverse()
    model = ScriptedModel(["draft", "never"])
    events, _ = _run(model, ContinueAt(*pair))
    assert len(model.calls) == 1
    assert result_msg(events).generate_reason is GenerateReason.MIDDLEWARE_STOP_REQUESTED


def test_ignored_on_a_round_that_calls_tools_and_from_acting() -> None:
    # A tool round goes on anyway: its continue grants nothing, adds no hint; on_acting's
    # request is not heard at all.
    model = ScriptedModel([[call_add("c1")], "done"])
    events, context = _run(model, ContinueAt(), ContinueAt(point=ExtensionPoint.ON_ACTING))
    assert len(model.calls) == 2
    assert result_msg(events).generate_reason is GenerateReason.MODEL_STOP
    assert not any(_hints(m) for m in context)


def test_only_the_round_that_asked_continues() -> None:
    # The request is reset per round: round 2 finishes although round 1 asked.
    model = ScriptedModel(["draft", "checked", "never"])
    _run(model, ContinueAt(rounds={1}))
    assert len(model.calls) == 2


def test_the_event_reaches_the_caller_and_round_trips() -> None:
    sent = RequestContinueEvent("look again", extra_iters=2, source="mw")
    events, _ = _run(ScriptedModel(["draft", "checked"]), ContinueAt(sent))
    (seen,) = of_type(events, RequestContinueEvent)
    assert seen is sent
    back = parse_event(sent.model_dump_json())
    assert type(back) is RequestContinueEvent and back == sent
    bare = parse_event({"type": "request_continue"})
    assert isinstance(bare, RequestContinueEvent) and bare.hint is None


def test_defaults_and_bad_values() -> None:
    event = RequestContinueEvent()
    assert (event.hint, event.extra_iters) == (None, 0)
    with pytest.raises(pydantic.ValidationError, match="extra_iters"):
        RequestContinueEvent(extra_iters=-1)


def test_a_hint_with_bad_text_is_refused() -> None:
    model = ScriptedModel(["draft", "never"])
    bad = RequestContinueEvent.make(None, hint="\ud800")
    agent = make_agent(model, middlewares=[ContinueAt(bad)])
    _, error = stream_error(agent.stream("hi"))
    assert "RequestContinueEvent.hint" in str(error)
