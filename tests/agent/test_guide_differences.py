"""Where the three designs (AgentScope Java, AgentScope Python, the Blade SDK) differ
and rx_agent chose (issue 24, item 6). Each test pins one choice written down in
docs/porting.md ("Differences from the three designs")."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest
import reactivex
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from reactivex import Observable
from reactivex import abc as rxabc
from reactivex import operators as ops
from reactivex.disposable import Disposable

from rx_agent import (
    ChatModel,
    ChatModelCandidate,
    CompactionMiddleware,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    ModelRouterMiddleware,
    Msg,
    OtelTracingMiddleware,
    PermissionRule,
    Plugin,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    Toolkit,
    ToolResultState,
    ToolUseBlock,
    tool,
)
from rx_agent.model.base import ModelChunk, TextChunk

RUNS: list[int] = []


@tool
def echo(x: int) -> str:
    """Echo a number."""
    RUNS.append(x)
    return str(x)


FAIL_ONCE: list[bool] = []


@tool
def flaky(x: int) -> str:
    """Echo a number; the first run after FAIL_ONCE is set fails."""
    RUNS.append(x)
    if FAIL_ONCE:
        FAIL_ONCE.pop()
        raise RuntimeError("flaky")
    return str(x)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


class ModelCalls(MiddlewareBase):
    """Records the model of every call that passes through ``on_model_call``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL}

    def order(self) -> int:
        return 0  # inside the others: sees the model that is really called

    def on_model_call(self, agent: Any, ctx: RuntimeContext, input: ModelCallInput,
                      next: Any) -> Observable[Any]:
        self.seen.append((input.model.name, len(input.tools)))
        return next(input)


def test_overriding_only_on_model_call_lists_it_at_every_point_and_layers_it_once() -> None:
    # Java: active_points() None means every point ("default is active everywhere"),
    # overridden or not; AgentScope Python assigns a middleware only where it overrides.
    class Timing(MiddlewareBase):
        def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            return next(input)

    agent = ReActAgent(name="a", model=ScriptedModel([]), middlewares=[Timing()])
    lines = agent.plan.describe().splitlines()
    assert len(lines) == 7 and all(line.endswith("Timing(1)") for line in lines)
    for point in ExtensionPoint:
        if point is not ExtensionPoint.ON_COMPRESS_CONTEXT:  # opt-in (AgentScope Python's)
            assert [type(m) for m in agent.plan.participants(point)] == [Timing]
    # Where it kept the default onion hook it builds no layer: listed, but free.
    onion = {ExtensionPoint.ON_AGENT, ExtensionPoint.ON_REASONING, ExtensionPoint.ON_ACTING,
             ExtensionPoint.ON_MODEL_CALL}
    assert agent.plan.layered & onion == {ExtensionPoint.ON_MODEL_CALL}


def test_a_raising_on_agent_state_ready_still_records_the_invoke_agent_span() -> None:
    # Java records no span (the notification runs before its tracing envelope); here
    # on_agent wraps the whole call, so the failed call is an ERROR span.
    class Boom(MiddlewareBase):
        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_AGENT_STATE_READY}

        def on_agent_state_ready(self, agent: Any, ctx: Any, state: Any, msgs: Any) -> None:
            raise ValueError("no user profile")

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(["never"])
    agent = ReActAgent(name="bot", model=model,
                       middlewares=[OtelTracingMiddleware(tracer_provider=provider), Boom()])
    with pytest.raises(ValueError, match="no user profile"):
        agent.call_sync("hi")
    [span] = exporter.get_finished_spans()
    assert span.name == "invoke_agent bot"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "no user profile"
    assert model.calls == []  # the call never reached the model


def test_next_twice_at_on_acting_runs_a_call_again_only_while_it_has_no_result() -> None:
    # Java (and the spec) let an onion hook call next more than once (retry); Blade's
    # composer throws "next() called multiple times". Here a second next runs a call
    # again only when the first attempt's result was held back; the session keeps one
    # result per tool call either way.
    class Twice(MiddlewareBase):
        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_ACTING}

        def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            return reactivex.concat(next(input), next(input))

    class RetryOnError(MiddlewareBase):
        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_ACTING}

        def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
            def again(events: list[Any]) -> Any:
                failed = any(getattr(e, "state", None) is ToolResultState.ERROR
                             for e in events)
                return next(input) if failed else reactivex.from_iterable(events)

            return next(input).pipe(ops.to_list(), ops.flat_map(again))

    for middleware, runs in ((Twice(), [7]), (RetryOnError(), [7, 7])):
        RUNS.clear()
        FAIL_ONCE[:] = [True]
        ctx = RuntimeContext(session_id="s")
        agent = ReActAgent(name="a", model=ScriptedModel(
            [[ToolUseBlock("c1", "flaky", {"x": 7})], "done"]),
            toolkit=Toolkit([flaky]), middlewares=[middleware])
        assert agent.call_sync("go", ctx).text == "done"
        assert runs == RUNS, type(middleware).__name__
        assert ctx.agent_state is not None
        results = [b for m in ctx.agent_state.context for b in m.tool_results]
        assert [b.id for b in results] == ["c1"]
        # Twice forwards the failed first result; the retry stores the second attempt's.
        expected = ToolResultState.ERROR if runs == [7] else ToolResultState.SUCCESS
        assert results[0].state is expected


def test_one_on_model_call_wraps_every_reply_call_and_side_calls_bypass_it() -> None:
    # Blade has four model wrappers (chat, side query, stream, chat with retry events);
    # here one streaming on_model_call wraps each of the reply's model calls, the
    # max-iterations summary included, and the built-ins' own calls (compaction
    # summaries, routing) go to their model directly.
    counted = ModelCalls()
    summary = ScriptedModel(["the summary"], name="summarizer")
    routing = ScriptedModel([[ToolUseBlock("r", "choose_model", {"name": "main"})]],
                            name="router")
    main = ScriptedModel([[ToolUseBlock("c1", "echo", {"x": 1})], "wrapped up"], name="main")
    agent = ReActAgent(
        name="a", model=main, toolkit=Toolkit([echo]), max_iters=1,
        middlewares=[counted,
                     CompactionMiddleware(trigger_tokens=1, keep_last=1, summary_model=summary),
                     ModelRouterMiddleware(routing, [ChatModelCandidate("main", main)])],
    )
    ctx = RuntimeContext(session_id="s")
    agent.call_sync([Msg("user", "earlier question"), Msg("assistant", "earlier answer"),
                     Msg("user", "now this")], ctx)
    assert len(summary.calls) == 1 and len(routing.calls) == 1  # the side calls happened
    # on_model_call saw the reasoning round (with tools) and the summary call (none).
    assert counted.seen == [("main", 1), ("main", 0)]


class Watched(ChatModel):
    """One text chunk, then silence until disposed; records the disposal."""

    name = "watched"

    def __init__(self) -> None:
        self.disposed = threading.Event()

    def stream(self, messages: Any, tools: Any = (), options: Any = None
               ) -> Observable[ModelChunk]:
        def subscribe(observer: rxabc.ObserverBase[ModelChunk],
                      scheduler: rxabc.SchedulerBase | None = None) -> rxabc.DisposableBase:
            observer.on_next(TextChunk("partial"))
            return Disposable(self.disposed.set)

        return reactivex.create(subscribe)


def test_a_hook_may_swap_the_model_and_disposal_is_the_abort_signal() -> None:
    # Blade forbids swapping the model (and the abort signal) at a model middleware
    # boundary; Java's own fallback example swaps it, so it is allowed. There is no
    # AbortSignal to pass on: disposing the subscription cancels the swapped model's
    # stream.
    watched = Watched()

    class Swap(MiddlewareBase):
        def active_points(self) -> set[ExtensionPoint]:
            return {ExtensionPoint.ON_MODEL_CALL}

        def on_model_call(self, agent: Any, ctx: Any, input: ModelCallInput,
                          next: Any) -> Any:
            return next(input.with_(model=watched))

    primary = ScriptedModel([])
    agent = ReActAgent(name="a", model=primary, middlewares=[Swap()])
    got = threading.Event()
    subscription = agent.stream("hi").subscribe(
        lambda e: got.set() if isinstance(e, TextBlockDeltaEvent) else None)
    assert got.wait(5)
    subscription.dispose()
    assert watched.disposed.wait(5)
    assert primary.calls == []
    assert [f.name for f in dataclasses.fields(ModelCallInput)] == \
        ["messages", "tools", "options", "model"]  # no signal among the fields


def test_plugin_tools_have_no_trust_level_and_obey_the_permission_rules() -> None:
    # Blade registers plugin tools with trustLevel "workspace" and a source policy can
    # filter by it; here a plugin tool is a tool like any other: its source is recorded,
    # the permission rules are the one gate.
    ctx = RuntimeContext(session_id="s")
    agent = ReActAgent(name="a", model=ScriptedModel([[ToolUseBlock("c1", "echo", {"x": 1})],
                                                       "done"]),
                       plugins=[Plugin("numbers", tools=[echo])],
                       permission_rules=[PermissionRule("echo", "deny", reason="no echoes")])
    spec = agent.toolkit.get("echo")
    assert spec is not None and spec.source == "plugin numbers"
    assert not hasattr(spec, "trust_level")
    agent.call_sync("go", ctx)
    assert RUNS == []
    assert ctx.agent_state is not None
    [result] = [b for m in ctx.agent_state.context for b in m.tool_results]
    assert result.state is ToolResultState.DENIED and result.text == "no echoes"
