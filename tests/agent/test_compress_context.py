"""``on_compress_context`` (issue 14, item 1): an opt-in onion point at the top of every
ReAct round, before ``on_reasoning``, that may replace the session context."""

from __future__ import annotations

from typing import Any

import pytest
import reactivex
import reactivex.operators as ops
from conftest import add_toolkit, call_add, make_agent, of_type, stream_error, stream_events

from rx_agent import (
    CompressContextInput,
    ContextCompressedEvent,
    ExtensionPoint,
    GenerateReason,
    InMemorySessionStore,
    MiddlewareBase,
    Msg,
    RequestStopEvent,
    RuntimeContext,
    ScriptedModel,
    SessionKey,
    TextBlock,
    ToolResultBlock,
)
from rx_agent.event import parse_event


class Compress(MiddlewareBase):
    """Logs every call and replaces the context with ``rewrite(messages)`` when given."""

    def __init__(self, log: list[Any], rewrite: Any = None, extra: Any = ()) -> None:
        self.log = log
        self.rewrite = rewrite
        self.extra = extra

    def on_compress_context(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        self.log.append(("compress", input.iteration, len(input.messages)))
        inp = input if self.rewrite is None else input.with_(messages=self.rewrite(input))
        return reactivex.concat(reactivex.from_iterable(self.extra), next(inp))

    def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        self.log.append(("reasoning", input.iteration, len(input.messages)))
        return next(input)


def _tool_model() -> ScriptedModel:
    return ScriptedModel([[call_add()], "three"])


def test_fires_at_the_top_of_every_round_before_reasoning() -> None:
    log: list[Any] = []
    agent = make_agent(_tool_model(), toolkit=add_toolkit(), middlewares=[Compress(log)])
    stream_events(agent)
    assert log == [("compress", 1, 1), ("reasoning", 1, 1),
                   ("compress", 2, 3), ("reasoning", 2, 3)]


def test_input_carries_model_system_message_and_tools() -> None:
    seen: list[CompressContextInput] = []

    class Spy(MiddlewareBase):
        def on_compress_context(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            seen.append(input)
            return next(input)

    model = _tool_model()
    agent = make_agent(model, toolkit=add_toolkit(), sys_prompt="be brief", middlewares=[Spy()])
    stream_events(agent)
    first = seen[0]
    assert first.model is model
    assert first.system is not None and first.system.text == "be brief"
    assert [t["name"] for t in first.tools] == ["add"]
    assert isinstance(first.messages, tuple) and first.messages[0].text == "hi"


def test_inactive_unless_a_middleware_takes_part() -> None:
    class Java(MiddlewareBase):  # active_points() is None: all of Java's seven
        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            return next(input)

    agent = make_agent(ScriptedModel(["x"]), middlewares=[Java()])
    assert agent.plan.participants(ExtensionPoint.ON_COMPRESS_CONTEXT) == ()
    assert "on_compress_context" not in agent.plan.describe()
    log: list[Any] = []
    listed = make_agent(ScriptedModel(["x"]), middlewares=[Compress(log)])
    assert listed.plan.participants(ExtensionPoint.ON_COMPRESS_CONTEXT) != ()
    assert "on_compress_context" in listed.plan.describe()
    assert "on_compress_context" in listed.plan.to_mermaid()


def test_named_in_active_points_with_the_default_hook_changes_nothing() -> None:
    class Declares(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_COMPRESS_CONTEXT}

    agent = make_agent(_tool_model(), toolkit=add_toolkit(), middlewares=[Declares()])
    assert agent.plan.participants(ExtensionPoint.ON_COMPRESS_CONTEXT) != ()
    events = stream_events(agent)
    assert not of_type(events, ContextCompressedEvent)
    assert events[-2].result.text == "three"


def _drop_all_but_last(inp: CompressContextInput) -> tuple[Msg, ...]:
    return inp.messages[-1:]


def test_replacing_the_context_stores_it_and_emits_an_event() -> None:
    store = InMemorySessionStore()
    ctx = RuntimeContext(session_id="s1")
    log: list[Any] = []
    agent = make_agent(ScriptedModel(["one", "two"]), session_store=store,
                       middlewares=[Compress(log, _drop_all_but_last)])
    stream_events(agent, "first", ctx)
    events = stream_events(agent, "second", RuntimeContext(session_id="s1"))
    compressed = of_type(events, ContextCompressedEvent)
    assert len(compressed) == 1
    assert (compressed[0].messages_before, compressed[0].messages_after) == (3, 1)
    assert compressed[0].iteration == 1
    # before on_reasoning saw the messages, and the state saved the replacement
    assert ("reasoning", 1, 1) in log
    state = store.load(SessionKey("__anon__", "s1"))
    assert state is not None
    assert [m.text for m in state.context] == ["second", "two"]
    assert parse_event(compressed[0].model_dump_json()) == compressed[0]


def test_unchanged_context_emits_nothing() -> None:
    log: list[Any] = []
    agent = make_agent(_tool_model(), toolkit=add_toolkit(),
                       middlewares=[Compress(log, lambda inp: tuple(inp.messages))])
    events = stream_events(agent)
    assert not of_type(events, ContextCompressedEvent)


def test_splitting_a_tool_call_from_its_result_fails_naming_the_middleware() -> None:
    def drop_results(inp: CompressContextInput) -> tuple[Msg, ...]:
        return tuple(m for m in inp.messages
                     if not any(isinstance(b, ToolResultBlock) for b in m.content))

    agent = make_agent(_tool_model(), toolkit=add_toolkit(),
                       middlewares=[Compress([], drop_results)])
    _events, error = stream_error(agent.stream("hi"))
    assert isinstance(error, ValueError)
    assert "Compress.on_compress_context()" in str(error)
    assert "split tool call 'c1'" in str(error)


def test_a_non_message_in_the_new_context_fails() -> None:
    agent = make_agent(ScriptedModel(["x"]),
                       middlewares=[Compress([], lambda inp: ("not a message",))])
    _events, error = stream_error(agent.stream("hi"))
    assert isinstance(error, TypeError) and "not a Msg" in str(error)


def test_summarizing_a_whole_pair_is_allowed() -> None:
    def summarize(inp: CompressContextInput) -> tuple[Msg, ...]:
        if inp.iteration == 1:
            return inp.messages
        return (Msg(role="user", content="summary: 1 + 2 was asked"),)

    agent = make_agent(_tool_model(), toolkit=add_toolkit(),
                       middlewares=[Compress([], summarize)])
    events = stream_events(agent)
    assert of_type(events, ContextCompressedEvent)[0].messages_after == 1
    assert events[-2].result.text == "three"


def test_events_of_the_step_reach_the_caller_and_non_events_fail() -> None:
    note = RequestStopEvent("context too big")
    agent = make_agent(_tool_model(), toolkit=add_toolkit(),
                       middlewares=[Compress([], extra=[note])])
    events = stream_events(agent)
    # a stop request from the compression step ends the reply before reasoning
    assert note in events
    assert events[-2].result.generate_reason is GenerateReason.MIDDLEWARE_STOP_REQUESTED

    agent = make_agent(ScriptedModel(["x"]), middlewares=[Compress([], extra=[0])])
    _events, error = stream_error(agent.stream("hi"))
    assert isinstance(error, TypeError) and "on_compress_context" in str(error)


def test_interrupt_during_compression_ends_the_reply_interrupted() -> None:
    class Interrupting(MiddlewareBase):
        def on_compress_context(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            agent.interrupt(ctx)
            return next(input)

    model = ScriptedModel(["never"])
    agent = make_agent(model, middlewares=[Interrupting()])
    events = stream_events(agent)
    assert events[-2].result.generate_reason is GenerateReason.INTERRUPTED
    assert model.calls == []


def test_an_error_in_the_hook_fails_the_call() -> None:
    class Broken(MiddlewareBase):
        def on_compress_context(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            raise RuntimeError("boom")

    agent = make_agent(ScriptedModel(["x"]), middlewares=[Broken()])
    _events, error = stream_error(agent.stream("hi"))
    assert "boom" in str(error)


def test_async_hook_and_ctx_less_form_work() -> None:
    log: list[Any] = []

    class AsyncForm(MiddlewareBase):
        async def on_compress_context(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            log.append("async")
            return next(input)

    class NoCtx(MiddlewareBase):
        def on_compress_context(self, agent, input, next):  # type: ignore[no-untyped-def]
            log.append("noctx")
            return next(input).pipe(ops.map(lambda e: e))

    agent = make_agent(ScriptedModel(["x"]), middlewares=[AsyncForm(), NoCtx()])
    assert stream_events(agent)[-2].result.text == "x"
    assert log == ["async", "noctx"]


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_two_participants_nest_like_any_onion(order: tuple[int, int]) -> None:
    log: list[Any] = []

    class Tag(MiddlewareBase):
        def __init__(self, tag: str, rank: int) -> None:
            self.tag, self.rank = tag, rank

        def order(self) -> int:
            return self.rank

        def on_compress_context(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            log.append(self.tag)
            extra = Msg(role="user", content=[TextBlock(self.tag)])
            return next(input.with_(messages=(*input.messages, extra)))

    a, b = Tag("a", order[0]), Tag("b", order[1])
    model = ScriptedModel(["x"])
    stream_events(make_agent(model, middlewares=[a, b]))
    outer, inner = ("b", "a") if order == (0, 1) else ("a", "b")
    assert log == [outer, inner]
    assert [m.text for m in model.calls[0].messages] == ["hi", outer, inner]


def test_hitl_pause_and_resume_compress_at_the_rounds_after_the_resume() -> None:
    from rx_agent import (
        ConfirmResult,
        PermissionRule,
        RequireUserConfirmEvent,
        UserConfirmResultEvent,
    )

    log: list[Any] = []
    agent = make_agent(_tool_model(), toolkit=add_toolkit(), middlewares=[Compress(log)],
                       permission_rules=[PermissionRule("add", "ask")])
    ctx = RuntimeContext(session_id="h")
    first = stream_events(agent, "hi", ctx)
    ask = of_type(first, RequireUserConfirmEvent)[0]
    assert [e for e in log if e[0] == "compress"] == [("compress", 1, 1)]
    resume = UserConfirmResultEvent(ask.reply_id, [ConfirmResult(ask.tool_calls[0], True)])
    second = stream_events(agent, resume, RuntimeContext(session_id="h"))
    assert second[-2].result.text == "three"
    # the resumed batch ran first; the next round compressed the context with its result
    assert [e for e in log if e[0] == "compress"][-1] == ("compress", 1, 3)


def test_on_agent_finish_sees_the_compacted_context() -> None:
    seen: list[int] = []

    class Finish(MiddlewareBase):
        def active_points(self):  # type: ignore[no-untyped-def]
            return {ExtensionPoint.ON_AGENT_FINISH}

        def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def]
            seen.append(len(ctx.agent_state.context))

    store = InMemorySessionStore()
    agent = make_agent(ScriptedModel(["one", "two"]), session_store=store,
                       middlewares=[Compress([], _drop_all_but_last), Finish()])
    stream_events(agent, "first", RuntimeContext(session_id="f"))
    stream_events(agent, "second", RuntimeContext(session_id="f"))
    assert seen == [2, 2]  # [first, one], then [second, two]
