"""Sub-agents (issue 14, item 4): ``agent.as_tool(name=..., description=...)`` turns an
agent into a tool of another: its own session slot derived from the parent call, the
parent's context visible, events nested in the parent's stream, interrupt and
disposal both ways, and optionally the parent's model and tool middlewares."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
import reactivex
import reactivex.operators as ops
from conftest import WAIT, make_agent, of_type, stream_events, wait_until
from reactivex import Observable
from reactivex.disposable import Disposable

from rx_agent import (
    AgentEndEvent,
    AgentResultEvent,
    AgentStartEvent,
    ChatModel,
    ConfirmResult,
    ExtensionPoint,
    GenerateOptions,
    GenerateReason,
    InMemorySessionStore,
    MiddlewareBase,
    Msg,
    NestedEvent,
    PermissionRule,
    RequireUserConfirmEvent,
    RuntimeContext,
    ScriptedModel,
    SessionKey,
    TextBlockDeltaEvent,
    Tool,
    Toolkit,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultState,
    ToolUseBlock,
    UserConfirmResultEvent,
    parse_event,
)


def ask(task: str, call_id: str = "c1", name: str = "researcher") -> ToolUseBlock:
    return ToolUseBlock(call_id, name, {"task": task})


def parent_with(sub: Any, model: Any, **kwargs: Any) -> Any:
    toolkit = Toolkit()
    toolkit.register_tool(sub.as_tool() if not isinstance(sub, Tool) else sub)
    return make_agent(model, name="lead", toolkit=toolkit, **kwargs)


def results(events: Sequence[Any]) -> list[Any]:
    return [e.result for e in events if isinstance(e, AgentResultEvent)]


def test_the_sub_agent_answers_the_parents_tool_call() -> None:
    sub_model = ScriptedModel(["x is 42"])
    store = InMemorySessionStore()
    sub = make_agent(sub_model, name="researcher", session_store=store,
                     sys_prompt="You research things.")
    parent_model = ScriptedModel([[ask("find x")], "x is 42, says the researcher"])
    parent = parent_with(sub, parent_model)
    events = stream_events(parent, "what is x?", RuntimeContext(session_id="p1"))

    assert events[-2].result.text == "x is 42, says the researcher"
    # the sub-agent got the task as its user message, with its own system prompt
    assert [m.text for m in sub_model.calls[0].messages] == ["You research things.", "find x"]
    # the parent's model read the sub-agent's final text as the tool result
    result_msg = parent_model.calls[1].messages[-1]
    assert result_msg.content[0].output == "x is 42"
    assert result_msg.content[0].state is ToolResultState.SUCCESS
    # the sub-agent's session slot is derived from the parent call
    state = store.load(SessionKey("__anon__", "p1/researcher/c1"))
    assert state is not None and [m.text for m in state.context] == ["find x", "x is 42"]


def test_its_events_are_nested_inside_the_tool_result_and_never_the_parents_text() -> None:
    sub = make_agent(ScriptedModel(["inner words"]), name="researcher")
    parent = parent_with(sub, ScriptedModel([[ask("go")], "outer words"]))
    events = stream_events(parent)

    start = next(i for i, e in enumerate(events) if isinstance(e, ToolResultStartEvent))
    end = next(i for i, e in enumerate(events) if isinstance(e, ToolResultEndEvent))
    nested = [(i, e) for i, e in enumerate(events) if isinstance(e, NestedEvent)]
    assert nested and all(start < i < end for i, _ in nested)
    assert all(e.scope == "sub_agent" and e.agent == "researcher" and e.tool_call_id == "c1"
               and e.source == "lead" for _, e in nested)
    inner = [e.event for _, e in nested]
    assert isinstance(inner[0], AgentStartEvent) and inner[0].session_id.endswith("/researcher/c1")
    assert isinstance(inner[-1], AgentEndEvent)
    assert "".join(e.delta for e in inner if isinstance(e, TextBlockDeltaEvent)) == "inner words"
    # the parent's own text stream holds only the parent's words
    assert "".join(e.delta for e in of_type(events, TextBlockDeltaEvent)) == "outer words"
    # filtering the nested events out leaves a valid stream; each round-trips through JSON
    own = [e for e in events if not isinstance(e, NestedEvent)]
    assert [type(e) for e in own if isinstance(e, (ToolResultStartEvent, ToolResultEndEvent))] \
        == [ToolResultStartEvent, ToolResultEndEvent]
    for _, e in nested:
        assert parse_event(e.model_dump_json()) == e


def test_a_sub_agent_of_a_sub_agent_nests_twice() -> None:
    leaf = make_agent(ScriptedModel(["leaf answer"]), name="leaf")
    middle_tools = Toolkit()
    middle_tools.register_tool(leaf.as_tool())
    middle = make_agent(ScriptedModel([[ask("deeper", "m1", "leaf")], "middle answer"]),
                        name="middle", toolkit=middle_tools)
    parent = parent_with(middle.as_tool(), ScriptedModel([[ask("go", "p1", "middle")], "top"]))
    events = stream_events(parent)
    deep = [e for e in of_type(events, NestedEvent) if isinstance(e.event, NestedEvent)]
    assert deep and all(e.event.agent == "leaf" for e in deep)
    texts = [e.innermost() for e in deep if isinstance(e.innermost(), TextBlockDeltaEvent)]
    assert "".join(t.delta for t in texts) == "leaf answer"
    assert events[-2].result.text == "top"


def test_the_parents_context_attributes_are_visible_and_its_writes_stay_its_own() -> None:
    seen: list[Any] = []

    class Reads(MiddlewareBase):
        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            seen.append((ctx.get("tenant"), ctx.user_id))
            ctx.put("scratch", "sub wrote this")
            return next(input)

    sub = make_agent(ScriptedModel(["ok"]), name="researcher", middlewares=[Reads()])
    parent = parent_with(sub, ScriptedModel([[ask("go")], "done"]))
    ctx = RuntimeContext(session_id="p", user_id="alice", attributes={"tenant": "acme"})
    stream_events(parent, "hi", ctx)
    assert seen == [("acme", "alice")]
    assert ctx.get("scratch") is None


def test_name_and_description_and_schema() -> None:
    sub = make_agent(ScriptedModel([]), name="researcher", sys_prompt="Digs into sources.\nMore.")
    tool = sub.as_tool()
    assert tool.name == "researcher"
    assert "researcher" in tool.description and "Digs into sources." in tool.description
    assert list(tool.schema["parameters"]["properties"]) == ["task"]
    named = sub.as_tool(name="dig", description="Dig deeper.")
    assert (named.name, named.description) == ("dig", "Dig deeper.")
    with pytest.raises(ValueError, match="tool name"):
        sub.as_tool(name="not a name!")
    with pytest.raises(TypeError, match="inherit_middlewares"):
        sub.as_tool(inherit_middlewares="yes")  # type: ignore[arg-type]


class ModelLog(MiddlewareBase):
    """A parent middleware at on_model_call and on_agent, logging who ran it."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_AGENT}

    def on_agent(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        self.log.append(f"on_agent:{agent.name}")
        return next(input)

    async def on_model_call(self, agent, input, next):  # type: ignore[no-untyped-def]
        self.log.append(f"on_model_call:{agent.name}")
        return next(input)


@pytest.mark.parametrize("inherit", [False, True])
def test_inherit_middlewares_runs_the_parents_model_and_tool_middlewares(inherit: bool) -> None:
    log: list[str] = []
    sub = make_agent(ScriptedModel(["ok"]), name="researcher")
    toolkit = Toolkit()
    toolkit.register_tool(sub.as_tool(inherit_middlewares=inherit))
    parent = make_agent(ScriptedModel([[ask("go")], "done"]), name="lead", toolkit=toolkit,
                        middlewares=[ModelLog(log)])
    stream_events(parent)
    expected = ["on_agent:lead", "on_model_call:lead", "on_model_call:lead"]
    if inherit:  # the async, ctx-less hook runs in the sub-agent too; on_agent does not
        expected.insert(2, "on_model_call:researcher")
    assert log == expected
    assert sub.plan.participants(ExtensionPoint.ON_MODEL_CALL) == ()  # the sub is unchanged


class SlowModel(ChatModel):
    """Streams nothing until disposed; records the disposal."""

    name = "slow"

    def __init__(self) -> None:
        self.subscribed = threading.Event()
        self.disposed = threading.Event()

    def stream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]] = (),
               options: GenerateOptions | None = None) -> Observable[Any]:
        def subscribe(observer: Any, scheduler: Any = None) -> Disposable:
            self.subscribed.set()
            return Disposable(self.disposed.set)

        return reactivex.create(subscribe)


def test_interrupting_the_parent_disposes_the_sub_agent() -> None:
    slow = SlowModel()
    sub = make_agent(slow, name="researcher")
    parent = parent_with(sub, ScriptedModel([[ask("go")]]))
    ctx = RuntimeContext(session_id="p")
    out: list[Any] = []
    done = threading.Event()
    parent.stream("hi", ctx).subscribe(out.append, lambda e: done.set(), done.set)
    assert slow.subscribed.wait(WAIT)
    assert parent.interrupt(ctx)
    assert done.wait(WAIT) and slow.disposed.wait(WAIT)
    final = results(out)[-1]
    assert final.generate_reason is GenerateReason.INTERRUPTED
    wait_until(lambda: sub._slots.active(SessionKey("__anon__", "p/researcher/c1")) is None)


def test_disposing_the_parent_disposes_the_sub_agent() -> None:
    slow = SlowModel()
    parent = parent_with(make_agent(slow, name="researcher"), ScriptedModel([[ask("go")]]))
    subscription = parent.stream("hi").subscribe(lambda e: None)
    assert slow.subscribed.wait(WAIT)
    subscription.dispose()
    assert slow.disposed.wait(WAIT)


def test_a_sub_agent_interrupted_interrupts_the_parent() -> None:
    class InterruptsItself(MiddlewareBase):
        def on_reasoning(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
            agent.interrupt(ctx, "stop everything")
            return next(input)

    sub = make_agent(ScriptedModel(["never"]), name="researcher",
                     middlewares=[InterruptsItself()])
    parent_model = ScriptedModel([[ask("go")], "never either"])
    parent = parent_with(sub, parent_model)
    events = stream_events(parent)
    ended = list(of_type(events, ToolResultEndEvent))
    assert ended[0].state is ToolResultState.INTERRUPTED
    assert events[-2].result.generate_reason is GenerateReason.INTERRUPTED
    assert len(parent_model.calls) == 1  # the parent never reasoned again


def test_a_failing_sub_agent_is_an_error_result_and_the_parent_goes_on() -> None:
    sub = make_agent(ScriptedModel([RuntimeError("sub model down")]), name="researcher",
                     max_retries=1)
    parent_model = ScriptedModel([[ask("go")], "I could not research it"])
    parent = parent_with(sub, parent_model)
    events = stream_events(parent)
    output = parent_model.calls[1].messages[-1].content[0]
    assert output.state is ToolResultState.ERROR and "sub model down" in output.text
    assert events[-2].result.text == "I could not research it"


def test_a_sub_agent_that_asks_for_confirmation_is_an_error_result() -> None:
    def wipe() -> str:
        """Wipe everything."""
        return "wiped"

    sub_tools = Toolkit()
    sub_tools.register_tool(Tool(wipe, permission="ask"))
    sub = make_agent(ScriptedModel([[ToolUseBlock("s1", "wipe", {})]]), name="researcher",
                     toolkit=sub_tools)
    parent_model = ScriptedModel([[ask("go")], "it needs a human"])
    parent = parent_with(sub, parent_model)
    stream_events(parent)
    output = parent_model.calls[1].messages[-1].content[0]
    assert output.state is ToolResultState.ERROR and "PERMISSION_ASKING" in output.text


def test_parent_hitl_pause_and_resume_runs_the_sub_agent_after_confirmation() -> None:
    sub_model = ScriptedModel(["researched"])
    sub = make_agent(sub_model, name="researcher")
    parent = parent_with(sub, ScriptedModel([[ask("go")], "done"]),
                         permission_rules=[PermissionRule("researcher", "ask")])
    ctx = RuntimeContext(session_id="hitl")
    first = stream_events(parent, "hi", ctx)
    confirm = of_type(first, RequireUserConfirmEvent)[0]
    assert sub_model.calls == []  # paused before the sub-agent ran
    resume = UserConfirmResultEvent(confirm.reply_id,
                                    [ConfirmResult(confirm.tool_calls[0], True)])
    second = stream_events(parent, resume, RuntimeContext(session_id="hitl"))
    assert len(sub_model.calls) == 1
    assert of_type(second, NestedEvent)
    assert second[-2].result.text == "done"


def test_on_agent_finish_fires_per_sub_reply_and_once_for_the_parent() -> None:
    finished: list[str] = []

    class Finish(MiddlewareBase):
        def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def]
            finished.append(f"{agent.name}:{outcome.result.text}")

    sub = make_agent(ScriptedModel(["a", "b"]), name="researcher", middlewares=[Finish()])
    parent = parent_with(sub, ScriptedModel([[ask("one", "c1"), ask("two", "c2")], "done"]),
                         middlewares=[Finish()])
    stream_events(parent)
    assert finished == ["researcher:a", "researcher:b", "lead:done"]


def test_the_tool_used_outside_an_agent_still_runs() -> None:
    sub = make_agent(ScriptedModel(["plain"]), name="researcher")
    import asyncio

    block = asyncio.run(sub.as_tool().fn(task="go"))
    assert block.output == "plain"


def test_events_filter_cleanly_with_rx_operators() -> None:
    sub = make_agent(ScriptedModel(["inner"]), name="researcher")
    parent = parent_with(sub, ScriptedModel([[ask("go")], "outer"]))
    own = []
    done = threading.Event()
    parent.stream("hi").pipe(ops.filter(lambda e: not isinstance(e, NestedEvent))).subscribe(
        own.append, lambda e: done.set(), done.set)
    assert done.wait(WAIT)
    assert not of_type(own, NestedEvent) and own[-2].result.text == "outer"
    time.sleep(0)
