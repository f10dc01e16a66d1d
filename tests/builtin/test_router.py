"""ModelRouterMiddleware: one routed model per reply, through a real agent loop."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rx_agent import (
    AgentEvent,
    ChatModelCandidate,
    ConfirmResult,
    CustomEvent,
    ExtensionPoint,
    ModelCallStartEvent,
    ModelRouterMiddleware,
    Msg,
    OtelTracingMiddleware,
    RequireUserConfirmEvent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    UserConfirmResultEvent,
    tool,
)
from rx_agent.builtin.router import CHOOSE_TOOL, ROUTE_EVENT

from .conftest import add, call, events_of, make_agent


def pick(name: str) -> list[Any]:
    """A routing model's answer: the forced choose_model call."""
    return [ToolUseBlock("route-1", CHOOSE_TOOL, {"name": name})]


def models(fast: Sequence[Any] = ("fast answer",), strong: Sequence[Any] = ("strong answer",)
           ) -> tuple[ScriptedModel, ScriptedModel]:
    return ScriptedModel(list(fast), name="fast-m"), ScriptedModel(list(strong), name="strong-m")


def router(classifier: Any, fast: ScriptedModel, strong: ScriptedModel,
           **kwargs: Any) -> ModelRouterMiddleware:
    return ModelRouterMiddleware(
        classifier,
        [ChatModelCandidate("fast", fast, "everyday questions"),
         ChatModelCandidate("strong", strong, "multi-step reasoning, code and maths")],
        **kwargs,
    )


def routes(events: list[AgentEvent]) -> list[dict[str, Any]]:
    return [e.value for e in events if isinstance(e, CustomEvent) and e.name == ROUTE_EVENT]


def kinds(events: list[AgentEvent]) -> list[str]:
    return [type(e).__name__ for e in events]


# -- construction ---------------------------------------------------------------------


def test_active_points_are_the_three_it_hooks() -> None:
    fast, strong = models()
    assert set(router(ScriptedModel([]), fast, strong).active_points()) == {
        ExtensionPoint.ON_AGENT, ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_AGENT_FINISH}


def test_candidate_names_must_be_unique() -> None:
    fast, strong = models()
    with pytest.raises(ValueError, match="unique: 'fast' is repeated"):
        ModelRouterMiddleware(ScriptedModel([]), [ChatModelCandidate("fast", fast),
                                                  ChatModelCandidate("fast", strong)])


@pytest.mark.parametrize(("candidates", "error", "match"), [
    ([], ValueError, "at least one candidate"),
    ("fast", TypeError, "list of ChatModelCandidate"),
    ([object()], TypeError, "candidate #0 must be a ChatModelCandidate"),
])
def test_bad_candidates_are_refused(candidates: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ModelRouterMiddleware(ScriptedModel([]), candidates)


def test_bad_candidate_fields_and_routing_models_are_refused() -> None:
    fast, _ = models()
    with pytest.raises(ValueError, match="non-blank str"):
        ChatModelCandidate(" ", fast)
    with pytest.raises(TypeError, match="must be a ChatModel"):
        ChatModelCandidate("x", "gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="classifier_model must be a ChatModel, a "
                       "ClassifierModelBase or have a classify"):
        ModelRouterMiddleware(object(), [ChatModelCandidate("fast", fast)])
    with pytest.raises(ValueError, match="timeout must be > 0"):
        ModelRouterMiddleware(ScriptedModel([]), [ChatModelCandidate("fast", fast)], timeout=0)


# -- routing with a chat model --------------------------------------------------------


async def test_the_reply_runs_on_the_chosen_model_and_the_routing_call_stays_hidden() -> None:
    fast, strong = models()
    routing = ScriptedModel([pick("strong")], name="router-m")
    agent = make_agent(fast, middlewares=[router(routing, fast, strong)])

    events = await events_of(agent, [Msg(role="user", content="earlier"),
                                     Msg(role="user", content="Prove that sqrt(2) is irrational")])

    assert events[-2].result.text == "strong answer"  # type: ignore[attr-defined]
    assert fast.calls == [] and len(strong.calls) == 1
    # The routing model saw the candidates and the latest user text, and had to answer
    # through the choose_model tool with an enum of the names.
    [asked] = routing.calls
    system, user = asked.messages
    assert "- strong: multi-step reasoning, code and maths" in system.text
    assert user.text == "Prove that sqrt(2) is irrational"
    assert asked.options.tool_choice == CHOOSE_TOOL
    assert asked.tools[0]["parameters"]["properties"]["name"]["enum"] == ["fast", "strong"]
    # Its events never reach the reply: one model call, announced by the route event.
    assert kinds(events) == [
        "AgentStartEvent", "CustomEvent", "ModelCallStartEvent", "TextBlockStartEvent",
        "TextBlockDeltaEvent", "TextBlockEndEvent", "ModelCallEndEvent", "AgentResultEvent",
        "AgentEndEvent",
    ]
    assert routes(events) == [{"candidate": "strong", "model": "strong-m", "fallback": None,
                               "resumed": False}]
    start = next(e for e in events if isinstance(e, ModelCallStartEvent))
    assert start.model_name == "strong-m"
    assert agent.model is fast


async def test_one_choice_per_reply_covers_every_model_call_and_the_next_reply_routes_again(
) -> None:
    fast, strong = models(fast=["quick one"],
                          strong=[[ToolUseBlock("c1", "add", {"a": 1, "b": 2})], "3"])
    routing = ScriptedModel([pick("strong"), pick("fast")])
    agent = make_agent(fast, middlewares=[router(routing, fast, strong)])
    ctx = RuntimeContext(session_id="s")

    first = await events_of(agent, "add 1 and 2", ctx)
    second = await events_of(agent, "hello", ctx)

    assert first[-2].result.text == "3" and second[-2].result.text == "quick one"  # type: ignore[attr-defined]
    assert len(strong.calls) == 2 and len(fast.calls) == 1  # both rounds of reply 1
    assert len(routing.calls) == 2  # once per reply
    assert [r["candidate"] for r in routes(first) + routes(second)] == ["strong", "fast"]
    # The stored choice is gone once the reply ended.
    assert ctx.agent_state is not None and "rx_agent.router" not in ctx.agent_state.data


async def test_the_max_iterations_summary_call_runs_on_the_chosen_model_too() -> None:
    fast, strong = models(strong=[[ToolUseBlock("c1", "add", {"a": 1, "b": 1})], "summary"])
    agent = make_agent(fast, max_iters=1,
                       middlewares=[router(ScriptedModel([pick("strong")]), fast, strong)])
    events = await events_of(agent, "go")
    assert events[-2].result.text == "summary"  # type: ignore[attr-defined]
    assert fast.calls == [] and len(strong.calls) == 2 and strong.calls[1].tools == ()


@pytest.mark.parametrize("answer", [
    "strong", " Strong. ", '{"name": "strong"}', "I would pick **strong** for this.",
])
async def test_a_text_answer_is_read_when_the_model_does_not_call_the_tool(answer: str) -> None:
    fast, strong = models()
    agent = make_agent(fast, middlewares=[router(ScriptedModel([answer]), fast, strong)])
    events = await events_of(agent, "hard question")
    assert routes(events)[0]["candidate"] == "strong" and len(strong.calls) == 1


# -- fallbacks ------------------------------------------------------------------------


async def fallback_of(routing: Any, msgs: Any = "question", **kwargs: Any
                      ) -> tuple[list[AgentEvent], ScriptedModel, ScriptedModel]:
    fast, strong = models()
    agent = make_agent(fast, middlewares=[router(routing, fast, strong, **kwargs)])
    events = await events_of(agent, msgs)
    assert events[-2].result.text == "fast answer"  # type: ignore[attr-defined]
    assert strong.calls == [] and len(fast.calls) == 1
    [route] = routes(events)
    assert route["candidate"] is None and route["model"] == "fast-m"
    return events, fast, strong


async def test_an_unknown_name_falls_back_to_the_agent_model() -> None:
    events, _, _ = await fallback_of(ScriptedModel([pick("medium")]))
    assert routes(events)[0]["fallback"] == (
        "the routing model chose an unknown candidate: 'medium'")


async def test_a_failing_routing_model_falls_back_without_failing_the_reply(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events, _, _ = await fallback_of(ScriptedModel([RuntimeError("router is down")]))
    assert routes(events)[0]["fallback"] == "routing failed: RuntimeError: router is down"
    assert "router is down" in caplog.text


async def test_no_user_text_falls_back_without_asking_the_routing_model() -> None:
    routing = ScriptedModel([])  # any call would fail the script
    events, _, _ = await fallback_of(routing, [Msg(role="user", content="   ")])
    assert routes(events)[0]["fallback"] == "the input has no user text"
    assert routing.calls == []


async def test_a_slow_routing_model_times_out_into_the_fallback() -> None:
    events, _, _ = await fallback_of(ScriptedModel([pick("strong")], delay=2.0), timeout=0.05)
    assert routes(events)[0]["fallback"] == "routing timed out after 0.05s"


# -- classifiers ----------------------------------------------------------------------


class KeywordClassifier:
    """Picks "strong" for inputs that mention proofs; records where it ran."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.seen: list[tuple[str, list[str]]] = []

    def classify(self, text: str, candidates: Sequence[ChatModelCandidate]) -> str:
        self.threads.append(threading.get_ident())
        self.seen.append((text, [c.name for c in candidates]))
        return "strong" if "prove" in text.lower() else "fast"


async def test_a_sync_classifier_runs_off_the_event_loop() -> None:
    fast, strong = models()
    classifier = KeywordClassifier()
    agent = make_agent(fast, middlewares=[router(classifier, fast, strong)])
    events = await events_of(agent, "Prove it")
    assert routes(events)[0]["candidate"] == "strong"
    assert classifier.seen == [("Prove it", ["fast", "strong"])]
    assert classifier.threads[0] != threading.get_ident()  # it may block: not on the loop


async def test_an_async_classifier_may_return_the_candidate_itself() -> None:
    fast, strong = models()

    class Async:
        async def classify(self, text: str, candidates: Sequence[ChatModelCandidate]) -> Any:
            await asyncio.sleep(0)
            return candidates[1]

    agent = make_agent(fast, middlewares=[router(Async(), fast, strong)])
    assert routes(await events_of(agent, "x"))[0]["candidate"] == "strong"


async def test_a_classifier_that_raises_falls_back() -> None:
    class Broken:
        def classify(self, text: str, candidates: Sequence[ChatModelCandidate]) -> str:
            raise LookupError("no label")

    events, _, _ = await fallback_of(Broken())
    assert routes(events)[0]["fallback"] == "routing failed: LookupError: no label"


# -- human in the loop ----------------------------------------------------------------


@tool
def deploy(target: str) -> str:
    """Deploy to a target."""
    return f"deployed to {target}"


async def test_the_choice_is_kept_across_a_pause_and_resume() -> None:
    fast, strong = models(strong=[[ToolUseBlock("c1", "deploy", {"target": "prod"})], "deployed"])
    routing = ScriptedModel([pick("strong")])  # a second routing would fail the script
    toolkit = Toolkit()
    toolkit.register_tool(deploy, permission="ask")
    agent = make_agent(fast, toolkit=toolkit, middlewares=[router(routing, fast, strong)])
    ctx = RuntimeContext(session_id="hitl")

    paused = await events_of(agent, "deploy to prod", ctx)
    ask = next(e for e in paused if isinstance(e, RequireUserConfirmEvent))
    assert ctx.agent_state is not None
    assert ctx.agent_state.data["rx_agent.router"] == {"candidate": "strong", "fallback": None}
    json.dumps(ctx.agent_state.data)  # persisted with the state: plain JSON

    resume = UserConfirmResultEvent(reply_id=ask.reply_id,
                                    confirm_results=[ConfirmResult(ask.tool_calls[0], True)])
    resumed = await events_of(agent, resume, ctx)

    assert resumed[-2].result.text == "deployed"  # type: ignore[attr-defined]
    assert len(routing.calls) == 1 and fast.calls == [] and len(strong.calls) == 2
    assert routes(resumed) == [{"candidate": "strong", "model": "strong-m", "fallback": None,
                                "resumed": True}]
    assert "rx_agent.router" not in ctx.agent_state.data


async def test_a_resumed_reply_without_a_stored_choice_uses_the_agent_model() -> None:
    fast, strong = models(fast=[[ToolUseBlock("c1", "deploy", {"target": "x"})], "done"])
    toolkit = Toolkit()
    toolkit.register_tool(deploy, permission="ask")
    ctx = RuntimeContext(session_id="late")
    # The pause happens without the router; the router is added before the resume.
    before = make_agent(fast, toolkit=toolkit, name="a")
    ask = next(e for e in await events_of(before, "go", ctx)
               if isinstance(e, RequireUserConfirmEvent))
    after = make_agent(fast, toolkit=toolkit, name="a",
                       middlewares=[router(ScriptedModel([]), fast, strong)],
                       session_store=before.session_store)
    resume = UserConfirmResultEvent(reply_id=ask.reply_id,
                                    confirm_results=[ConfirmResult(ask.tool_calls[0], True)])
    events = await events_of(after, resume, ctx)
    assert events[-2].result.text == "done"  # type: ignore[attr-defined]
    assert routes(events)[0]["fallback"] == "the resumed reply has no stored choice"


# -- sharing and tracing --------------------------------------------------------------


async def test_one_instance_serves_two_agents_and_concurrent_replies() -> None:
    classifier = KeywordClassifier()
    fast = ScriptedModel([f"fast {i}" for i in range(10)], name="fast-m", delay=0.002)
    strong = ScriptedModel([f"strong {i}" for i in range(10)], name="strong-m", delay=0.002)
    shared = router(classifier, fast, strong)
    agents = [make_agent(fast, name=f"agent{i}", middlewares=[shared]) for i in range(2)]

    async def reply(i: int) -> tuple[str, str]:
        text = f"prove claim {i}" if i % 2 else f"hello {i}"
        msg = await call(agents[i % 2], text, RuntimeContext(session_id=f"s{i}"))
        return text, msg.text

    answers = await asyncio.gather(*(reply(i) for i in range(10)))

    for text, answer in answers:
        assert answer.startswith("strong" if text.startswith("prove") else "fast"), answers
    assert len(fast.calls) == 5 and len(strong.calls) == 5


async def test_tracing_records_the_route_and_the_chat_span_names_the_routed_model() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    fast, strong = models(fast=["fallback answer"])
    agent = make_agent(fast, middlewares=[
        OtelTracingMiddleware(provider),
        router(ScriptedModel([pick("strong"), pick("nope")]), fast, strong),
    ])

    await events_of(agent, "hard one")
    await events_of(agent, "another")

    agents = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert [dict(s.attributes or {}).get("rx_agent.router.candidate") for s in agents] == [
        "strong", None]
    assert dict(agents[1].attributes or {})["rx_agent.router.fallback"] == (
        "the routing model chose an unknown candidate: 'nope'")
    assert [dict(s.attributes or {})["gen_ai.request.model"] for s in chats] == [
        "strong-m", "fast-m"]
    assert [s.name for s in chats] == ["chat strong-m", "chat fast-m"]
    provider.shutdown()


def test_repr_lists_the_candidates() -> None:
    fast, strong = models()
    assert repr(router(ScriptedModel([]), fast, strong)) == (
        "ModelRouterMiddleware(candidates=[fast, strong])")


_ = add  # the default toolkit of make_agent
