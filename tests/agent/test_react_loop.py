"""The ReAct loop and its stop reasons (docs/concepts/events.md, docs/porting.md)."""

from __future__ import annotations

import reactivex
import reactivex.operators as ops
from conftest import (
    add_toolkit,
    assert_no_orphan_tool_calls,
    call_add,
    make_agent,
    of_type,
    result_msg,
    role_of,
    stream_events,
    tool_results,
)

from rx_agent import (
    AgentEndEvent,
    AgentResultEvent,
    ExceedMaxItersEvent,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    RequestStopEvent,
    RuntimeContext,
    ScriptedModel,
    ThinkingBlock,
)


def _run(model: ScriptedModel, ctx: RuntimeContext | None = None, **kwargs):  # type: ignore[no-untyped-def]
    kwargs.setdefault("toolkit", add_toolkit())
    agent = make_agent(model, **kwargs)
    return stream_events(agent, "hi", ctx)


# -- normal endings ----------------------------------------------------------------------------


def test_text_answer_ends_with_model_stop() -> None:
    ctx = RuntimeContext(session_id="s")
    events = _run(ScriptedModel(["hello"]), ctx)
    msg = result_msg(events)
    assert msg.text == "hello"
    assert msg.generate_reason is GenerateReason.MODEL_STOP
    assert [role_of(m) for m in ctx.agent_state.context] == ["user", "assistant"]
    assert ctx.agent_state.context[-1].text == "hello"


def test_tool_round_then_answer() -> None:
    model = ScriptedModel([[call_add("c1", 20, 22)], "it is 42"])
    ctx = RuntimeContext(session_id="s")
    events = _run(model, ctx)
    assert result_msg(events).text == "it is 42"
    assert len(model.calls) == 2
    (result,) = tool_results(model.calls[1].messages)
    assert result.id == "c1"
    assert "42" in str(result.output)
    context = ctx.agent_state.context
    assert [m.tool_calls[0].id for m in context if m.tool_calls] == ["c1"]
    assert [r.id for r in tool_results(context)] == ["c1"]
    assert context[-1].text == "it is 42"


def test_tool_call_message_is_stored_before_its_result() -> None:
    ctx = RuntimeContext(session_id="s")
    _run(ScriptedModel([[call_add("c1")], "done"]), ctx)
    context = ctx.agent_state.context
    call_index = next(i for i, m in enumerate(context) if m.tool_calls)
    result_index = next(i for i, m in enumerate(context) if tool_results([m]))
    assert call_index < result_index


def test_model_sees_tool_schemas() -> None:
    model = ScriptedModel(["ok"])
    _run(model)
    (schema,) = model.calls[0].tools
    assert schema["name"] == "add"
    assert set(schema["parameters"]["properties"]) == {"a", "b"}


# -- max_iters ---------------------------------------------------------------------------------


def test_max_iters_defaults_to_ten_then_summarizes_without_tools() -> None:
    model = ScriptedModel([[call_add(f"c{i}")] for i in range(10)] + ["summary"])
    events = _run(model)
    assert len(model.calls) == 11
    (exceeded,) = of_type(events, ExceedMaxItersEvent)
    assert exceeded.max_iters == 10
    assert list(model.calls[-1].tools) == []
    assert all(list(c.tools) for c in model.calls[:-1])
    msg = result_msg(events)
    assert msg.text == "summary"
    assert msg.generate_reason is GenerateReason.MAX_ITERATIONS


def test_custom_max_iters() -> None:
    model = ScriptedModel([[call_add("c1")], [call_add("c2")], "summary"])
    events = _run(model, max_iters=2)
    assert len(model.calls) == 3
    assert of_type(events, ExceedMaxItersEvent)[0].max_iters == 2
    assert result_msg(events).generate_reason is GenerateReason.MAX_ITERATIONS


def test_exceed_event_comes_before_the_summary_call() -> None:
    from rx_agent import ModelCallStartEvent

    events = _run(ScriptedModel([[call_add("c1")], "summary"]), max_iters=1)
    exceeded = events.index(of_type(events, ExceedMaxItersEvent)[0])
    last_model_start = events.index(of_type(events, ModelCallStartEvent)[-1])
    assert exceeded < last_model_start


def test_summary_is_stored_in_the_context_and_every_tool_call_has_a_result() -> None:
    ctx = RuntimeContext(session_id="s")
    _run(ScriptedModel([[call_add("c1")], "summary"]), ctx, max_iters=1)
    assert ctx.agent_state.context[-1].text == "summary"
    assert_no_orphan_tool_calls(ctx.agent_state.context)


def test_summary_call_sees_the_tool_results() -> None:
    model = ScriptedModel([[call_add("c1", 2, 2)], "summary"])
    _run(model, max_iters=1)
    assert [r.id for r in tool_results(model.calls[-1].messages)] == ["c1"]


# -- answers without visible text --------------------------------------------------------------


def test_thinking_only_answer_adds_a_reminder_and_continues() -> None:
    model = ScriptedModel([[ThinkingBlock("hmm")], "real answer"])
    events = _run(model)
    assert result_msg(events).text == "real answer"
    assert result_msg(events).generate_reason is GenerateReason.MODEL_STOP
    assert len(model.calls) == 2
    second = model.calls[1].messages
    assert role_of(second[-1]) != "assistant", "no reminder after the thinking-only answer"


def test_blank_answer_adds_a_reminder_and_continues() -> None:
    model = ScriptedModel(["   \n ", "real answer"])
    events = _run(model)
    assert result_msg(events).text == "real answer"
    assert len(model.calls) == 2
    assert role_of(model.calls[1].messages[-1]) != "assistant"


def test_empty_answer_continues() -> None:
    model = ScriptedModel([[], "real answer"])
    events = _run(model)
    assert result_msg(events).text == "real answer"
    assert len(model.calls) == 2


def test_answers_without_visible_text_are_bounded_by_max_iters() -> None:
    model = ScriptedModel([[ThinkingBlock("a")], "  ", "summary"])
    events = _run(model, max_iters=2)
    assert len(model.calls) == 3
    assert of_type(events, ExceedMaxItersEvent)
    assert result_msg(events).generate_reason is GenerateReason.MAX_ITERATIONS


# -- stop requests -----------------------------------------------------------------------------


class StopAfter(MiddlewareBase):
    """Appends a RequestStopEvent to the output of ``point``."""

    def __init__(self, point: ExtensionPoint, *events: RequestStopEvent) -> None:
        self.point = point
        self.events = events or (RequestStopEvent("stop please"),)

    def active_points(self):  # type: ignore[no-untyped-def]
        return {self.point}

    def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return next(input).pipe(ops.concat(reactivex.from_iterable(self.events)))

    def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return next(input).pipe(ops.concat(reactivex.from_iterable(self.events)))


def test_stop_from_on_reasoning_ends_with_the_default_reason() -> None:
    model = ScriptedModel(["partial answer", "never"])
    events = _run(model, middlewares=[StopAfter(ExtensionPoint.ON_REASONING)])
    assert len(model.calls) == 1
    assert result_msg(events).generate_reason is GenerateReason.MIDDLEWARE_STOP_REQUESTED
    assert isinstance(events[-1], AgentEndEvent)


def test_stop_from_on_reasoning_prevents_acting_and_keeps_the_context_consistent() -> None:
    model = ScriptedModel([[call_add("c1")], "never"])
    ctx = RuntimeContext(session_id="s")
    ran: list = []

    class Spy(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_ACTING}

        def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            ran.append(1)
            return next(input)

    events = _run(model, ctx, middlewares=[StopAfter(ExtensionPoint.ON_REASONING), Spy()])
    assert len(model.calls) == 1
    assert ran == []
    assert result_msg(events).generate_reason is GenerateReason.MIDDLEWARE_STOP_REQUESTED
    assert_no_orphan_tool_calls(ctx.agent_state.context)


def test_stop_from_on_reasoning_carries_its_generate_reason() -> None:
    stop = RequestStopEvent("policy", GenerateReason.REASONING_STOP_REQUESTED)
    events = _run(
        ScriptedModel(["x", "never"]), middlewares=[StopAfter(ExtensionPoint.ON_REASONING, stop)]
    )
    assert result_msg(events).generate_reason is GenerateReason.REASONING_STOP_REQUESTED


def test_stop_from_on_acting_ends_after_the_tools_ran() -> None:
    model = ScriptedModel([[call_add("c1")], "never"])
    ctx = RuntimeContext(session_id="s")
    events = _run(model, ctx, middlewares=[StopAfter(ExtensionPoint.ON_ACTING)])
    assert len(model.calls) == 1
    assert result_msg(events).generate_reason is GenerateReason.MIDDLEWARE_STOP_REQUESTED
    assert [r.id for r in tool_results(ctx.agent_state.context)] == ["c1"]
    assert_no_orphan_tool_calls(ctx.agent_state.context)


def test_stop_from_on_acting_carries_its_generate_reason() -> None:
    stop = RequestStopEvent("denied", GenerateReason.ALL_TOOLS_DENIED)
    events = _run(
        ScriptedModel([[call_add("c1")], "never"]),
        middlewares=[StopAfter(ExtensionPoint.ON_ACTING, stop)],
    )
    assert result_msg(events).generate_reason is GenerateReason.ALL_TOOLS_DENIED


def test_first_stop_request_wins() -> None:
    first = RequestStopEvent("first", GenerateReason.ACTING_STOP_REQUESTED)
    second = RequestStopEvent("second", GenerateReason.ALL_TOOLS_DENIED)
    events = _run(
        ScriptedModel(["x", "never"]),
        middlewares=[StopAfter(ExtensionPoint.ON_REASONING, first, second)],
    )
    assert result_msg(events).generate_reason is GenerateReason.ACTING_STOP_REQUESTED


def test_stop_is_applied_after_the_stream_is_drained() -> None:
    from rx_agent import CustomEvent

    class StopThenMore(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_REASONING}

        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return reactivex.concat(
                reactivex.of(RequestStopEvent("early")),
                next(input),
                reactivex.of(CustomEvent(name="after", value=None)),
            )

    model = ScriptedModel(["streamed anyway", "never"])
    events = _run(model, middlewares=[StopThenMore()])
    assert len(model.calls) == 1
    assert [e.name for e in of_type(events, CustomEvent)] == ["after"]
    assert result_msg(events).generate_reason is GenerateReason.MIDDLEWARE_STOP_REQUESTED


def test_stop_before_the_model_produced_anything_still_ends_with_a_stored_result() -> None:
    class StopsImmediately(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_REASONING}

        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return reactivex.of(RequestStopEvent("nothing to do"))

    model = ScriptedModel([])
    ctx = RuntimeContext(session_id="s")
    events = _run(model, ctx, middlewares=[StopsImmediately()])
    assert model.calls == []
    (result_event,) = of_type(events, AgentResultEvent)
    msg = result_event.result
    assert msg.generate_reason is GenerateReason.MIDDLEWARE_STOP_REQUESTED
    assert role_of(msg) == "assistant"
    assert ctx.agent_state.context[-1] == msg
    assert isinstance(events[-1], AgentEndEvent)


def test_stop_before_anything_with_custom_reason() -> None:
    class StopsImmediately(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_REASONING}

        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return reactivex.of(RequestStopEvent("budget", GenerateReason.REASONING_STOP_REQUESTED))

    events = _run(ScriptedModel([]), middlewares=[StopsImmediately()])
    assert result_msg(events).generate_reason is GenerateReason.REASONING_STOP_REQUESTED


def test_next_call_after_a_stop_works_on_the_same_session() -> None:
    model = ScriptedModel([[call_add("c1")], "second call answer"])
    ctx = RuntimeContext(session_id="s")
    agent = make_agent(
        model, toolkit=add_toolkit(), middlewares=[StopAfter(ExtensionPoint.ON_REASONING)]
    )
    stream_events(agent, "one", ctx)
    events = stream_events(agent, "two", ctx)
    assert result_msg(events).generate_reason is GenerateReason.MIDDLEWARE_STOP_REQUESTED
    assert_no_orphan_tool_calls(list(model.calls[-1].messages))


def test_stop_request_emitted_inside_on_model_call_stops_the_loop() -> None:
    class StopInModelCall(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_MODEL_CALL}

        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.concat(reactivex.of(RequestStopEvent("from model call"))))

    model = ScriptedModel([[call_add("c1")], "never"])
    ctx = RuntimeContext(session_id="s")
    events = _run(model, ctx, middlewares=[StopInModelCall()])
    assert len(model.calls) == 1
    assert result_msg(events).generate_reason is GenerateReason.MIDDLEWARE_STOP_REQUESTED
    assert_no_orphan_tool_calls(ctx.agent_state.context)
