"""ModelRouterMiddleware with AgentScope Python's classifier models (issue 24, item 4):
the candidates are one choice question; the most probable choice routes the reply.
Ported from AgentScope Python's router tests, through a real agent loop."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from rx_agent import (
    AgentEvent,
    ChatModelCandidate,
    CustomEvent,
    DataBlock,
    ModelCallStartEvent,
    ModelRouterMiddleware,
    Msg,
    RuntimeContext,
    ScriptedModel,
)
from rx_agent.builtin.router import ROUTE_EVENT, ROUTE_QUESTION
from rx_agent.model.classifier import (
    BinaryAnswer,
    ChoiceAnswer,
    ChoiceQuestion,
    ClassifierModelBase,
    ClassifierResponse,
    ClassifierState,
    RefusalAnswer,
)

from .conftest import events_of, make_agent

INSTRUCTIONS = "Select the most suitable chat model for responding to the user input."


class MockClassifier(ClassifierModelBase):
    """Answers the routing question with the configured choices in turn."""

    def __init__(self, outcomes: list[Any]) -> None:
        super().__init__("mock-classifier")
        self.outcomes = outcomes
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, state: ClassifierState, questions: Mapping[str, Any],
                       **kwargs: Any) -> ClassifierResponse:
        self.calls.append({"state": state,
                           "questions": {k: v.model_dump() for k, v in questions.items()}})
        outcome = self.outcomes[len(self.calls) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        if not isinstance(outcome, str):  # a ready answer (a refusal, another kind)
            return ClassifierResponse(model=self.model, content={ROUTE_QUESTION: outcome})
        return ClassifierResponse(model=self.model, content={ROUTE_QUESTION: ChoiceAnswer(
            choice=outcome, confidence=0.9, probabilities={outcome: 0.9, "other": 0.1})})


@pytest.fixture
def trio() -> tuple[ScriptedModel, ScriptedModel, ScriptedModel]:
    return (ScriptedModel(["ok"] * 3, name="primary"),
            ScriptedModel(["ok"] * 3, name="fast-model"),
            ScriptedModel(["ok"] * 3, name="reasoning-model"))


def candidates(fast: ScriptedModel, reasoning: ScriptedModel) -> list[ChatModelCandidate]:
    return [ChatModelCandidate("fast", fast, "Short and simple requests."),
            ChatModelCandidate("reasoning", reasoning, "Complex reasoning is required.")]


async def replies(router: ModelRouterMiddleware, primary: ScriptedModel, *inputs: Any
                  ) -> tuple[list[str | None], list[list[AgentEvent]]]:
    """One reply per input on one session; the model each model call ran on."""
    agent = make_agent(primary, name="Friday", middlewares=[router])
    ctx = RuntimeContext(session_id="s")
    called: list[str | None] = []
    streams = []
    for msgs in inputs:
        events = await events_of(agent, msgs, ctx)
        called += [e.model_name for e in events if isinstance(e, ModelCallStartEvent)]
        streams.append(events)
    assert agent.model is primary  # the agent's own model is never replaced
    return called, streams


def route_of(events: list[AgentEvent]) -> dict[str, Any]:
    [route] = [e.value for e in events if isinstance(e, CustomEvent) and e.name == ROUTE_EVENT]
    return route  # type: ignore[no-any-return]


async def test_the_classifier_routes_each_reply(trio: Any) -> None:
    primary, fast, reasoning = trio
    classifier = MockClassifier(["reasoning", "fast"])
    router = ModelRouterMiddleware(classifier, candidates(fast, reasoning))

    called, streams = await replies(router, primary, "Prove this theorem.", "Say hello.")

    assert called == ["reasoning-model", "fast-model"]
    question = {"type": "choice", "instructions": INSTRUCTIONS,
                "criteria": {"fast": "Short and simple requests.",
                             "reasoning": "Complex reasoning is required."}}
    assert classifier.calls == [
        {"state": "Prove this theorem.", "questions": {"chat_model": question}},
        {"state": "Say hello.", "questions": {"chat_model": question}},
    ]
    # The route event reports the classifier's confidence and probabilities.
    assert route_of(streams[0]) == {
        "candidate": "reasoning", "model": "reasoning-model", "fallback": None,
        "resumed": False, "confidence": 0.9,
        "probabilities": {"reasoning": 0.9, "other": 0.1}}


async def test_instructions_reach_the_choice_question(trio: Any) -> None:
    primary, fast, reasoning = trio
    classifier = MockClassifier(["fast"])
    router = ModelRouterMiddleware(classifier, candidates(fast, reasoning),
                                   instructions="Pick the cheapest model that can answer.")
    await replies(router, primary, "Hi.")
    question = ChoiceQuestion.model_validate(classifier.calls[0]["questions"]["chat_model"])
    assert question.instructions == "Pick the cheapest model that can answer."


async def test_failures_keep_the_agents_model(trio: Any) -> None:
    # A routing error, an unknown candidate and an input without text all keep the
    # agent's own model; the input without text never reaches the classifier.
    primary, fast, reasoning = trio
    classifier = MockClassifier([RuntimeError("boom"), "unknown", "reasoning"])
    router = ModelRouterMiddleware(classifier, candidates(fast, reasoning))

    image = Msg("user", [DataBlock("image/png", "AA==")])
    called, streams = await replies(router, primary, "Error.", "Unknown.", image)

    assert called == ["primary", "primary", "primary"]
    assert [c["state"] for c in classifier.calls] == ["Error.", "Unknown."]
    assert [route_of(s)["fallback"] for s in streams] == [
        "routing failed: RuntimeError: boom",
        "the routing model chose an unknown candidate: 'unknown'",
        "the input has no user text",
    ]
    assert "confidence" not in route_of(streams[1])  # only a routed reply reports it


@pytest.mark.parametrize(("answer", "fallback"), [
    (RefusalAnswer(), "the classifier refused to choose"),
    (BinaryAnswer(probability=0.7),
     "the classifier answered 'chat_model' with BinaryAnswer, not a ChoiceAnswer"),
])
async def test_an_answer_without_a_choice_falls_back(trio: Any, answer: Any,
                                                     fallback: str) -> None:
    primary, fast, reasoning = trio
    router = ModelRouterMiddleware(MockClassifier([answer]), candidates(fast, reasoning))
    called, streams = await replies(router, primary, "Hello.")
    assert called == ["primary"]
    assert route_of(streams[0])["fallback"] == fallback


async def test_a_slow_classifier_times_out_into_the_fallback(trio: Any) -> None:
    class Slow(MockClassifier):
        async def __call__(self, state: ClassifierState, questions: Mapping[str, Any],
                           **kwargs: Any) -> ClassifierResponse:
            await asyncio.sleep(5)
            raise AssertionError("not reached")

    primary, fast, reasoning = trio
    router = ModelRouterMiddleware(Slow([]), candidates(fast, reasoning), timeout=0.05)
    called, streams = await replies(router, primary, "Hello.")
    assert called == ["primary"]
    assert route_of(streams[0])["fallback"] == "routing timed out after 0.05s"


def test_duplicate_candidates_are_rejected(trio: Any) -> None:
    _, fast, reasoning = trio
    with pytest.raises(ValueError, match="unique: 'fast' is repeated"):
        ModelRouterMiddleware(MockClassifier([]),
                              [*candidates(fast, reasoning), candidates(fast, reasoning)[0]])


def test_a_classifier_model_must_implement_call() -> None:
    class Incomplete(ClassifierModelBase):
        pass

    with pytest.raises(TypeError, match="abstract"):
        Incomplete("m")  # type: ignore[abstract]
    with pytest.raises(ValueError, match="non-blank model name"):
        ClassifierModelBase.__init__(MockClassifier([]), " ")
