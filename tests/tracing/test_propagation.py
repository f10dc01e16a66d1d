"""Parent/child links survive thread and scheduler hops."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import reactivex
import reactivex.operators as ops
from opentelemetry import trace
from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.scheduler import ThreadPoolScheduler

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    GenerateOptions,
    MiddlewareBase,
    Msg,
    OtelTracingMiddleware,
    ReActAgent,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.model.base import ModelChunk

from .conftest import Recorder, attrs

POOL = ThreadPoolScheduler(4)


class Hop(MiddlewareBase):
    """Outer middleware that moves work to pool threads: the inner chain is subscribed
    on one (when ``subscribe_on``) and its events are observed on them."""

    def __init__(self, points: set[ExtensionPoint], *, subscribe_on: bool) -> None:
        self.points = points
        self.subscribe_on = subscribe_on
        self.subscribed_on: list[str] = []  # threads the inner chain was subscribed on
        self.observed_on: list[str] = []  # threads events were delivered on

    def active_points(self) -> set[ExtensionPoint]:
        return self.points

    def order(self) -> int:
        return 10  # outside the tracing middleware

    def _hop(self, source: Observable[AgentEvent]) -> Observable[AgentEvent]:
        def probe(_: Any) -> Observable[AgentEvent]:
            self.subscribed_on.append(threading.current_thread().name)
            return source

        hops: list[Callable[[Observable[Any]], Observable[Any]]] = []
        if self.subscribe_on:
            hops.append(ops.subscribe_on(POOL))
        hops += [
            ops.observe_on(POOL),
            ops.do_action(lambda e: self.observed_on.append(threading.current_thread().name)),
        ]
        return reactivex.defer(probe).pipe(*hops)

    def on_agent(self, agent: Any, ctx: Any, input: Any, next: Any) -> Observable[AgentEvent]:
        return self._hop(next(input))

    def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Observable[AgentEvent]:
        return self._hop(next(input))

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Observable[AgentEvent]:
        return self._hop(next(input))


class SpyModel(ScriptedModel):
    """Records the current span and thread when a call is subscribed."""

    def __init__(self, responses: Sequence[Any]) -> None:
        super().__init__(responses)
        self.seen: list[tuple[trace.Span, str]] = []

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        inner = super().stream(messages, tools, options)

        def subscribe(observer: rxabc.ObserverBase[ModelChunk], scheduler: Any = None) -> Any:
            self.seen.append((trace.get_current_span(), threading.current_thread().name))
            return inner.subscribe(observer, scheduler=scheduler)

        return Observable(subscribe)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def assert_children_of_root(recorder: Recorder) -> None:
    """Chat and batch spans are children of the agent span; call spans of a batch."""
    root = recorder.one("invoke_agent")
    calls = {s.context.span_id for s in recorder.tool_calls()}
    batches = {s.context.span_id for s in recorder.batches()}
    others = [s for s in recorder.spans if s is not root]
    assert others
    for span in others:
        assert span.parent is not None, f"{span.name} has no parent"
        expected = batches if span.context.span_id in calls else {root.context.span_id}
        assert span.parent.span_id in expected, span.name
        assert span.context.trace_id == root.context.trace_id, span.name


def assert_children_of_root_except(recorder: Recorder, skip: set[str]) -> None:
    root = recorder.one("invoke_agent")
    calls = {s.context.span_id for s in recorder.tool_calls()}
    batches = {s.context.span_id for s in recorder.batches()}
    for span in recorder.spans:
        if span is root or span.name in skip:
            continue
        expected = batches if span.context.span_id in calls else {root.context.span_id}
        assert span.parent is not None and span.parent.span_id in expected, span.name


@pytest.mark.parametrize("subscribe_on", [True, False], ids=["subscribe_on", "observe_on"])
async def test_model_and_tool_spans_stay_children_across_pool_hops(
    recorder: Recorder, subscribe_on: bool
) -> None:
    model = SpyModel([[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "three"])
    hop = Hop({ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_ACTING}, subscribe_on=subscribe_on)
    agent = ReActAgent(name="helper", model=model, toolkit=Toolkit([add]),
                       middlewares=[hop, OtelTracingMiddleware(recorder.provider)])

    assert (await asyncio.wait_for(agent.acall("hi"), 5)).text == "three"

    here = threading.current_thread().name
    assert hop.observed_on and all(name != here for name in hop.observed_on)
    if subscribe_on:  # the tracing hooks' streams were subscribed off the loop thread
        assert len(hop.subscribed_on) == 3 and all(n != here for n in hop.subscribed_on)
    assert sorted(s.name for s in recorder.spans) == [
        "chat scripted", "chat scripted", "execute_tool add", "execute_tool add",
        "invoke_agent helper",
    ]
    assert len(recorder.tool_calls()) == 1
    assert_children_of_root(recorder)
    # The model is subscribed with its chat span current, wherever that happens.
    chats = recorder.named("chat")
    for (span, _thread), chat in zip(model.seen, chats, strict=True):
        assert span.get_span_context().span_id == chat.context.span_id


async def test_agent_span_subscribed_on_a_pool_keeps_the_callers_parent(
    recorder: Recorder,
) -> None:
    tracer = recorder.provider.get_tracer("app")
    hop = Hop({ExtensionPoint.ON_AGENT}, subscribe_on=True)
    model = ScriptedModel([[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "three"])
    agent = ReActAgent(name="helper", model=model, toolkit=Toolkit([add]),
                       middlewares=[hop, OtelTracingMiddleware(recorder.provider)])
    with tracer.start_as_current_span("http.request") as request:
        assert (await asyncio.wait_for(agent.acall("hi"), 5)).text == "three"

    assert hop.subscribed_on and hop.subscribed_on[0] != threading.current_thread().name
    root = recorder.one("invoke_agent")
    assert root.parent is not None
    assert root.parent.span_id == request.get_span_context().span_id
    assert_children_of_root_except(recorder, {"http.request"})


async def test_a_span_started_in_a_sync_tool_nests_under_its_call_span(
    recorder: Recorder,
) -> None:
    tracer = recorder.provider.get_tracer("user-code")
    threads: list[str] = []

    @tool
    def lookup(key: str) -> str:
        """Look a key up (blocking I/O, so it runs in a worker thread)."""
        threads.append(threading.current_thread().name)
        with tracer.start_as_current_span("db.query"):
            return key.upper()

    model = ScriptedModel([[ToolUseBlock("c1", "lookup", {"key": "k"})], "done"])
    agent = ReActAgent(name="helper", model=model, toolkit=Toolkit([lookup]),
                       middlewares=[OtelTracingMiddleware(recorder.provider)])

    await asyncio.wait_for(agent.acall("hi"), 5)

    assert threads and threads[0] != threading.current_thread().name
    query = recorder.one("db.query")
    (call,) = recorder.tool_calls()
    assert query.parent is not None and query.parent.span_id == call.context.span_id
    assert_children_of_root_except(recorder, {"db.query"})


async def test_the_callers_current_span_parents_the_agent_span(recorder: Recorder) -> None:
    tracer = recorder.provider.get_tracer("app")
    agent = ReActAgent(name="helper", model=ScriptedModel(["ok"]),
                       middlewares=[OtelTracingMiddleware(recorder.provider)])
    with tracer.start_as_current_span("http.request") as request:
        await asyncio.wait_for(agent.acall("hi"), 5)
    root = recorder.one("invoke_agent")
    assert root.parent is not None
    assert root.parent.span_id == request.get_span_context().span_id


def test_call_sync_from_a_plain_thread_keeps_the_callers_span(recorder: Recorder) -> None:
    # No loop in this thread: the call runs on the runtime's own loop thread.
    tracer = recorder.provider.get_tracer("app")
    model = ScriptedModel([[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "three"])
    agent = ReActAgent(name="helper", model=model, toolkit=Toolkit([add]),
                       middlewares=[OtelTracingMiddleware(recorder.provider)])
    with tracer.start_as_current_span("job") as job:
        assert agent.call_sync("hi").text == "three"
    root = recorder.one("invoke_agent")
    assert root.parent is not None and root.parent.span_id == job.get_span_context().span_id
    assert_children_of_root_except(recorder, {"job"})


async def test_an_agent_called_from_a_tool_nests_under_that_tool(recorder: Recorder) -> None:
    tracing = OtelTracingMiddleware(recorder.provider)  # one instance, shared
    expert = ReActAgent(name="expert", model=ScriptedModel(["42"]), middlewares=[tracing])

    @tool
    async def ask_expert(question: str) -> str:
        """Ask the expert agent."""
        return (await expert.acall(question)).text

    model = ScriptedModel([[ToolUseBlock("c1", "ask_expert", {"question": "?"})], "it is 42"])
    lead = ReActAgent(name="lead", model=model, toolkit=Toolkit([ask_expert]),
                      middlewares=[tracing])

    assert (await asyncio.wait_for(lead.acall("hi"), 5)).text == "it is 42"

    assert sorted(recorder.tree()) == sorted([
        ("chat scripted", "invoke_agent lead"),
        ("chat scripted", "invoke_agent expert"),
        ("invoke_agent expert", "execute_tool ask_expert"),  # the call's span
        ("execute_tool ask_expert", "execute_tool ask_expert"),  # call under batch
        ("execute_tool ask_expert", "invoke_agent lead"),  # the batch
        ("chat scripted", "invoke_agent lead"),
        ("invoke_agent lead", None),
    ])
    assert len({s.context.trace_id for s in recorder.spans}) == 1
    (call,) = [s for s in recorder.named("execute_tool") if s.parent
               and s.parent.span_id != recorder.one("invoke_agent lead").context.span_id]
    expert = recorder.one("invoke_agent expert")
    assert expert.parent is not None and expert.parent.span_id == call.context.span_id


async def test_spans_a_tool_starts_nest_under_that_call_in_a_batch(recorder: Recorder) -> None:
    tracer = recorder.provider.get_tracer("user-code")

    @tool(concurrency_safe=True)
    async def fetch(key: str) -> str:
        """Fetch a key (concurrently with the batch's other calls)."""
        await asyncio.sleep(0.01)
        with tracer.start_as_current_span(f"work {key}"):
            await asyncio.sleep(0.01)
        return key

    @tool
    def store(key: str) -> str:
        """Store a key (a sync tool, so the batch runs in sequence)."""
        with tracer.start_as_current_span(f"work {key}"):
            return key

    concurrent = [ToolUseBlock(k, "fetch", {"key": k}) for k in "ab"]
    sequential = [ToolUseBlock(k, "store", {"key": k}) for k in "cd"]
    model = ScriptedModel([concurrent, sequential, "done"])
    agent = ReActAgent(name="helper", model=model, toolkit=Toolkit([fetch, store]),
                       middlewares=[OtelTracingMiddleware(recorder.provider)])

    await asyncio.wait_for(agent.acall("hi"), 5)

    calls = {attrs(s)["gen_ai.tool.call.id"]: s for s in recorder.tool_calls()}
    assert sorted(calls) == ["a", "b", "c", "d"]
    for key, call in calls.items():
        work = recorder.one(f"work {key}")
        assert work.parent is not None and work.parent.span_id == call.context.span_id, key
    # Attaching a call's span never leaks: the next chat span is still the agent's child.
    assert_children_of_root_except(recorder, {f"work {k}" for k in "abcd"})
    assert trace.get_current_span() is trace.INVALID_SPAN
