"""Onion hooks (docs/concepts/hooks.md) (on_agent, on_reasoning, on_acting, on_model_call)."""

from __future__ import annotations

from collections import Counter

import pytest
import reactivex
import reactivex.operators as ops
from conftest import (
    ONION,
    PassThrough,
    RecordingMiddleware,
    add_toolkit,
    call_add,
    changed,
    entries,
    make_agent,
    of_type,
    result_msg,
    stream_events,
    tool_results,
    type_names,
)

from rx_agent import (
    ActingInput,
    AgentEndEvent,
    AgentInput,
    AgentResultEvent,
    AgentStartEvent,
    CustomEvent,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    Msg,
    ReasoningInput,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlock,
    ToolResultTextDeltaEvent,
    ToolUseBlock,
)


def _rich_script() -> list:
    return [
        [ThinkingBlock("plan"), "let me add", call_add("c1", 1, 2), call_add("c2", 3, 4)],
        [ThinkingBlock("ok"), "the sums are ", "3 and 7"],
    ]


# -- pre / event / post interleaving -----------------------------------------------------------


@pytest.mark.parametrize("point", ONION, ids=lambda p: p.name)
def test_pre_event_post_interleave_outer_to_inner_and_back(point: ExtensionPoint) -> None:
    log: list = []
    mw1 = RecordingMiddleware("mw1", log, order=2, points={point})
    mw2 = RecordingMiddleware("mw2", log, order=1, points={point})
    model = ScriptedModel([[call_add()], "done"])
    stream_events(make_agent(model, toolkit=add_toolkit(), middlewares=[mw2, mw1]))

    # Take the first invocation of the point: everything up to mw1's first post.
    first_post = next(i for i, e in enumerate(log) if e[0] == "mw1" and e[2] == "post")
    window = log[: first_post + 1]
    pre = [(e[0], e[2]) for e in window if e[2] == "pre"]
    assert pre == [("mw1", "pre"), ("mw2", "pre")]
    assert log.index(next(e for e in window if e[0] == "mw2" and e[2] == "pre")) < log.index(
        next(e for e in window if e[2] == "event")
    )
    events = [e for e in window if e[2] == "event"]
    assert events, "the point produced no events"
    # Each event: mw2 sees it, then mw1 sees the same object, before the next event.
    assert len(events) % 2 == 0
    for inner, outer in zip(events[::2], events[1::2], strict=True):
        assert (inner[0], outer[0]) == ("mw2", "mw1")
        assert inner[3] is outer[3]
    posts = [(e[0], e[2]) for e in window if e[2] == "post"]
    assert posts == [("mw2", "post"), ("mw1", "post")]
    assert window[-2:] == [("mw2", point.value, "post", None), ("mw1", point.value, "post", None)]


def test_full_interleaving_on_agent_matches_the_java_example() -> None:
    log: list = []
    mw1 = RecordingMiddleware("mw1", log, order=2, points={ExtensionPoint.ON_AGENT})
    mw2 = RecordingMiddleware("mw2", log, order=1, points={ExtensionPoint.ON_AGENT})
    events = stream_events(make_agent(ScriptedModel(["hi"]), middlewares=[mw1, mw2]))
    expected = [("mw1", "pre"), ("mw2", "pre")]
    for _ in events:
        expected += [("mw2", "event"), ("mw1", "event")]
    expected += [("mw2", "post"), ("mw1", "post")]
    assert [(e[0], e[2]) for e in log] == expected


# -- the stream that leaves the outermost hook is what the caller sees -------------------------


def test_on_agent_output_is_the_stream_returned_by_stream() -> None:
    class Appends(MiddlewareBase):
        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.start_with(CustomEvent(name="first", value=1)))

    events = stream_events(make_agent(ScriptedModel(["hi"]), middlewares=[Appends()]))
    assert isinstance(events[0], CustomEvent)
    assert isinstance(events[1], AgentStartEvent)


@pytest.mark.parametrize("point", ONION, ids=lambda p: p.name)
def test_a_hook_can_rewrite_events_the_caller_sees(point: ExtensionPoint) -> None:
    hook = point.value

    class Tags(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {point}

    def tag(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        def mark(event):  # type: ignore[no-untyped-def]
            return event.model_copy(update={"metadata": {**event.metadata, "tag": hook}})

        return next(input).pipe(ops.map(mark))

    setattr(Tags, hook, tag)
    model = ScriptedModel([[call_add()], "done"])
    events = stream_events(make_agent(model, toolkit=add_toolkit(), middlewares=[Tags()]))
    tagged = [e for e in events if e.metadata.get("tag") == hook]
    assert tagged, f"no event rewritten by {hook} reached the caller"
    if point is ExtensionPoint.ON_ACTING:
        results = of_type(events, ToolResultTextDeltaEvent)
        assert results and all(e.metadata.get("tag") == "on_acting" for e in results)


def test_on_acting_rewrite_replaces_the_original_event() -> None:
    class Redacts(MiddlewareBase):
        def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            def redact(event):  # type: ignore[no-untyped-def]
                if isinstance(event, ToolResultTextDeltaEvent):
                    return event.model_copy(update={"delta": "REDACTED"})
                return event

            return next(input).pipe(ops.map(redact))

    model = ScriptedModel([[call_add("c1", 20, 22)], "done"])
    events = stream_events(make_agent(model, toolkit=add_toolkit(), middlewares=[Redacts()]))
    deltas = [e.delta for e in of_type(events, ToolResultTextDeltaEvent)]
    assert deltas == ["REDACTED"]


def test_on_acting_filter_drops_events_before_the_caller_sees_them() -> None:
    class Drops(MiddlewareBase):
        def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(
                ops.filter(lambda e: not isinstance(e, ToolResultTextDeltaEvent))
            )

    model = ScriptedModel([[call_add()], "done"])
    events = stream_events(make_agent(model, toolkit=add_toolkit(), middlewares=[Drops()]))
    assert of_type(events, ToolResultTextDeltaEvent) == []
    assert result_msg(events).text == "done"


def test_every_event_reaches_the_caller_exactly_once() -> None:
    model = ScriptedModel(_rich_script())
    mws = [PassThrough(), PassThrough(order=5), PassThrough(order=-5)]
    events = stream_events(make_agent(model, toolkit=add_toolkit(), middlewares=mws))
    counts = Counter(e.id for e in events)
    assert max(counts.values()) == 1
    assert Counter(id(e) for e in events).most_common(1)[0][1] == 1


# -- pass-through middlewares change nothing ---------------------------------------------------


def _sequence(middlewares: list, script: list, **kwargs) -> list[str]:  # type: ignore[no-untyped-def]
    model = ScriptedModel(script)
    return type_names(
        stream_events(make_agent(model, toolkit=add_toolkit(), middlewares=middlewares, **kwargs))
    )


def test_pass_through_middlewares_emit_exactly_the_events_of_no_middleware() -> None:
    plain = _sequence([], _rich_script())
    wrapped = _sequence(
        [
            PassThrough(),
            PassThrough(order=3),
            MiddlewareBase(),
            PassThrough(points=set(ExtensionPoint), order=-1),
        ],
        _rich_script(),
    )
    assert wrapped == plain


def test_pass_through_middlewares_change_nothing_on_the_max_iters_path() -> None:
    script = [[call_add("c1")], [call_add("c2")], "summary"]
    plain = _sequence([], script, max_iters=2)
    wrapped = _sequence([PassThrough(), PassThrough(order=2)], script, max_iters=2)
    assert wrapped == plain


def test_pass_through_middlewares_keep_the_final_message() -> None:
    model = ScriptedModel(_rich_script())
    events = stream_events(make_agent(model, toolkit=add_toolkit(), middlewares=[PassThrough()]))
    assert result_msg(events).text == "the sums are 3 and 7"


# -- short-circuit, several next() calls, changed inputs ---------------------------------------


def test_on_model_call_can_short_circuit_without_calling_the_model() -> None:
    class Cached(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return reactivex.of(
                TextBlockStartEvent(reply_id="cache", block_id="text"),
                TextBlockDeltaEvent(reply_id="cache", block_id="text", delta="cached"),
                TextBlockEndEvent(reply_id="cache", block_id="text"),
            )

    model = ScriptedModel([])
    events = stream_events(make_agent(model, middlewares=[Cached()]))
    assert result_msg(events).text == "cached"
    assert model.calls == []


def test_on_model_call_can_call_next_twice_to_retry() -> None:
    class RetryOnce(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.catch(lambda err, _src: next(input)))

    model = ScriptedModel([RuntimeError("flaky"), "second try"])
    agent = make_agent(model, max_retries=1, middlewares=[RetryOnce()])
    events = stream_events(agent)
    assert result_msg(events).text == "second try"
    assert len(model.calls) == 2


def test_on_model_call_changed_input_reaches_the_model() -> None:
    class AddsNote(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            note = Msg("user", "note from middleware")
            return next(changed(input, messages=[*input.messages, note]))

    model = ScriptedModel(["ok"])
    stream_events(make_agent(model, middlewares=[AddsNote()]))
    assert model.calls[0].messages[-1].text == "note from middleware"


def test_on_model_call_can_swap_the_model() -> None:
    other = ScriptedModel(["from other"], name="other")

    class Swaps(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(changed(input, model=other))

    primary = ScriptedModel([])
    events = stream_events(make_agent(primary, middlewares=[Swaps()]))
    assert result_msg(events).text == "from other"
    assert primary.calls == []


def test_on_reasoning_changed_messages_reach_the_model_but_not_the_context() -> None:
    class Injects(MiddlewareBase):
        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(changed(input, messages=[*input.messages, Msg("user", "injected")]))

    model = ScriptedModel(["ok"])
    ctx = RuntimeContext(session_id="inj")
    stream_events(make_agent(model, middlewares=[Injects()]), "hi", ctx)
    assert model.calls[0].messages[-1].text == "injected"
    assert "injected" not in [m.text for m in ctx.agent_state.context]


def test_on_agent_changed_input_is_what_the_loop_uses() -> None:
    class Rewrites(MiddlewareBase):
        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(changed(input, msgs=[Msg("user", "rewritten")]))

    model = ScriptedModel(["ok"])
    stream_events(make_agent(model, middlewares=[Rewrites()]), "original")
    texts = [m.text for m in model.calls[0].messages]
    assert "rewritten" in texts and "original" not in texts


def test_on_acting_changed_tool_calls_are_what_runs() -> None:
    seen: list = []

    def record(a: int, b: int) -> int:
        """Records its arguments."""
        seen.append((a, b))
        return a + b

    class Doubles(MiddlewareBase):
        def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            calls = [
                ToolUseBlock(c.id, c.name, {k: v * 2 for k, v in c.input.items()})
                for c in input.tool_calls
            ]
            return next(changed(input, tool_calls=calls))

    from rx_agent import Toolkit

    toolkit = Toolkit()
    toolkit.register_tool(record)
    model = ScriptedModel([[ToolUseBlock("c1", "record", {"a": 1, "b": 2})], "done"])
    stream_events(make_agent(model, toolkit=toolkit, middlewares=[Doubles()]))
    assert seen == [(2, 4)]


def test_on_agent_short_circuit_returns_its_own_events() -> None:
    class Answers(MiddlewareBase):
        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return reactivex.of(CustomEvent(name="canned", value=None))

    model = ScriptedModel([])
    events = stream_events(make_agent(model, middlewares=[Answers()]))
    assert type_names(events) == ["CustomEvent"]
    assert model.calls == []


# -- what each point wraps ---------------------------------------------------------------------


def test_on_reasoning_and_on_model_call_run_once_per_round_and_on_acting_once_per_batch() -> None:
    log: list = []
    mw = RecordingMiddleware("r", log)
    model = ScriptedModel([[call_add("c1"), call_add("c2")], [call_add("c3")], "done"])
    stream_events(make_agent(model, toolkit=add_toolkit(), middlewares=[mw]))
    assert len(entries(log, "on_agent", "pre")) == 1
    assert len(entries(log, "on_reasoning", "pre")) == 3
    assert len(entries(log, "on_model_call", "pre")) == 3
    acting = entries(log, "on_acting", "pre")
    assert len(acting) == 2
    assert all(isinstance(e[3], ActingInput) for e in acting)
    assert [[c.id for c in e[3].tool_calls] for e in acting] == [["c1", "c2"], ["c3"]]


def test_hooks_receive_the_pinned_input_records() -> None:
    log: list = []
    mw = RecordingMiddleware("r", log)
    model = ScriptedModel([[call_add()], "done"])
    stream_events(make_agent(model, toolkit=add_toolkit(), middlewares=[mw]), "hello")
    (agent_in,) = [e[3] for e in entries(log, "on_agent", "pre")]
    assert isinstance(agent_in, AgentInput)
    assert [m.text for m in agent_in.msgs] == ["hello"]
    reasoning_in = entries(log, "on_reasoning", "pre")[0][3]
    assert isinstance(reasoning_in, ReasoningInput)
    assert [t["name"] for t in reasoning_in.tools] == ["add"]
    assert reasoning_in.messages[-1].text == "hello"
    model_in = entries(log, "on_model_call", "pre")[0][3]
    assert isinstance(model_in, ModelCallInput)
    assert model_in.model is model
    assert [t["name"] for t in model_in.tools] == ["add"]


def test_summary_call_goes_through_on_model_call_with_no_tools() -> None:
    log: list = []
    mw = RecordingMiddleware("r", log, points={ExtensionPoint.ON_MODEL_CALL})
    model = ScriptedModel([[call_add("c1")], "summary"])
    stream_events(make_agent(model, toolkit=add_toolkit(), max_iters=1, middlewares=[mw]))
    inputs = [e[3] for e in entries(log, "on_model_call", "pre")]
    assert len(inputs) == 2
    assert list(inputs[-1].tools) == []
    assert list(inputs[0].tools) != []


# -- on_model_call rewrites are persisted ------------------------------------------------------


def test_on_model_call_text_rewrite_is_what_the_context_stores() -> None:
    class Upper(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            def up(event):  # type: ignore[no-untyped-def]
                if isinstance(event, TextBlockDeltaEvent):
                    return event.model_copy(update={"delta": event.delta.upper()})
                return event

            return next(input).pipe(ops.map(up))

    ctx = RuntimeContext(session_id="upper")
    events = stream_events(
        make_agent(ScriptedModel([["hel", "lo"]]), middlewares=[Upper()]), "hi", ctx
    )
    assert [e.delta for e in of_type(events, TextBlockDeltaEvent)] == ["HEL", "LO"]
    assert result_msg(events).text == "HELLO"
    assert ctx.agent_state.context[-1].text == "HELLO"


def test_on_model_call_dropped_tool_call_is_not_executed_or_stored() -> None:
    from rx_agent import ToolCallDeltaEvent, ToolCallEndEvent, ToolCallStartEvent

    tool_events = (ToolCallStartEvent, ToolCallDeltaEvent, ToolCallEndEvent)

    class DropsTools(MiddlewareBase):
        def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.filter(lambda e: not isinstance(e, tool_events)))

    ctx = RuntimeContext(session_id="drop")
    model = ScriptedModel([["answer", call_add()]])
    events = stream_events(
        make_agent(model, toolkit=add_toolkit(), middlewares=[DropsTools()]), "hi", ctx
    )
    assert result_msg(events).text == "answer"
    assert all(not m.tool_calls for m in ctx.agent_state.context)
    assert tool_results(ctx.agent_state.context) == []
    assert len(model.calls) == 1


def test_on_reasoning_text_rewrite_reaches_the_caller() -> None:
    class Upper(MiddlewareBase):
        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            def up(event):  # type: ignore[no-untyped-def]
                if isinstance(event, TextBlockDeltaEvent):
                    return event.model_copy(update={"delta": event.delta.upper()})
                return event

            return next(input).pipe(ops.map(up))

    events = stream_events(make_agent(ScriptedModel(["quiet"]), middlewares=[Upper()]))
    assert [e.delta for e in of_type(events, TextBlockDeltaEvent)] == ["QUIET"]


def test_a_hook_that_raises_fails_the_call_with_that_error() -> None:
    from conftest import stream_error

    boom = LookupError("hook failed")

    class Raises(MiddlewareBase):
        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            raise boom

    agent = make_agent(ScriptedModel([]), middlewares=[Raises()])
    events, error = stream_error(agent.stream("hi"))
    assert error is boom
    assert of_type(events, AgentEndEvent) == []
    assert of_type(events, AgentResultEvent) == []


def test_on_acting_short_circuit_leaves_no_orphan_tool_call_and_the_loop_continues() -> None:
    from conftest import assert_no_orphan_tool_calls

    class Skips(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_ACTING}

        def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return reactivex.empty()

    model = ScriptedModel([[call_add("c1")], "went on"])
    ctx = RuntimeContext(session_id="skip")
    events = stream_events(
        make_agent(model, toolkit=add_toolkit(), middlewares=[Skips()]), "hi", ctx
    )
    assert result_msg(events).text == "went on"
    assert_no_orphan_tool_calls(list(model.calls[1].messages))
    assert_no_orphan_tool_calls(ctx.agent_state.context)


def test_on_agent_can_call_next_again_after_an_error() -> None:
    class RetryCall(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_AGENT}

        def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.catch(lambda err, _src: next(input)))

    model = ScriptedModel([RuntimeError("first attempt"), "second attempt"])
    events = stream_events(make_agent(model, max_retries=1, middlewares=[RetryCall()]))
    assert result_msg(events).text == "second attempt"


def test_on_reasoning_can_call_next_again_after_an_error() -> None:
    class RetryStep(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_REASONING}

        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input).pipe(ops.catch(lambda err, _src: next(input)))

    model = ScriptedModel([["half", RuntimeError("broke mid-way")], "whole answer"])
    ctx = RuntimeContext(session_id="retry")
    events = stream_events(make_agent(model, max_retries=1, middlewares=[RetryStep()]), "hi", ctx)
    assert result_msg(events).text == "whole answer"
    assert [m.text for m in ctx.agent_state.context] == ["hi", "whole answer"]
