"""``ModelRouterMiddleware``: pick the chat model of each reply from the user's input.

Port of AgentScope Python's middleware of the same name. At the first model call of a
reply the latest user text of the reply's input goes to a routing model, which picks
one of the :class:`ChatModelCandidate` s; every model call of that reply then runs on
the candidate's model (``ModelCallInput.model`` is swapped; the agent's own model is
never changed). The choice is kept in ``AgentState.data`` while the reply is paused
for a human-in-the-loop answer, so the resumed reply runs on the same model.

The routing model is a chat model (it answers through a forced ``choose_model`` tool
call whose argument is an enum of the candidate names; a plain-text answer is read as
a fallback), a classifier model (:class:`~rx_agent.model.classifier.ClassifierModelBase`,
as in AgentScope Python: the candidates are one ``ChoiceQuestion`` and its most
probable choice wins), or any object with a ``classify(text, candidates) -> name``
method, plain or ``async``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import reactivex
from opentelemetry import trace
from reactivex import Observable
from reactivex import abc as rxabc
from reactivex import operators as ops

from .._rx import await_observable, from_coroutine, running_loop, runtime_loop
from ..context import RuntimeContext
from ..event import AgentEvent, CustomEvent
from ..message import Msg, Role
from ..middleware import (
    Agent,
    AgentFinishOutcome,
    AgentInput,
    ExtensionPoint,
    Handler,
    MiddlewareBase,
    ModelCallInput,
    ModelLike,
)
from ..middleware.types import check_model_like
from ..model.base import TextChunk, ToolCallChunk
from ..model.classifier import ChoiceAnswer, ChoiceQuestion, ClassifierModelBase, RefusalAnswer
from ..model.errors import ModelError
from ..options import GenerateOptions

__all__ = [
    "CHOOSE_TOOL",
    "DEFAULT_ROUTER_INSTRUCTIONS",
    "ROUTE_EVENT",
    "ROUTE_QUESTION",
    "ChatModelCandidate",
    "ModelRouterMiddleware",
    "RoutingClassifier",
]

logger = logging.getLogger("rx_agent.router")

DEFAULT_ROUTER_INSTRUCTIONS = (
    "Select the most suitable chat model for responding to the user input."
)
CHOOSE_TOOL = "choose_model"
"""The tool a chat routing model is made to call."""
ROUTE_EVENT = "model_route"
"""``CustomEvent.name`` of the event that reports each reply's routing."""
ROUTE_QUESTION = "chat_model"
"""The name of the choice question a classifier model is asked (AgentScope's)."""

_POINTS = frozenset(
    {ExtensionPoint.ON_AGENT, ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_AGENT_FINISH}
)
# Span attributes (set on the span current when the routing is decided).
ATTR_CANDIDATE = "rx_agent.router.candidate"
ATTR_MODEL = "rx_agent.router.model"
ATTR_FALLBACK = "rx_agent.router.fallback"


@dataclass(frozen=True, slots=True)
class ChatModelCandidate:
    """One model the router may choose.

    Args:
        name: what the routing model answers to choose it (unique in a router).
        model: the chat model a reply then runs on.
        description: when to choose it (shown to the routing model).
    """

    name: str
    model: ModelLike
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"ChatModelCandidate name must be a non-blank str, got {self.name!r}")
        check_model_like(f"ChatModelCandidate {self.name!r}: model", self.model)
        if not isinstance(self.description, str):
            raise TypeError(f"ChatModelCandidate {self.name!r}: description must be a str")


@runtime_checkable
class RoutingClassifier(Protocol):
    """A routing model that is not a chat model.

    ``classify`` gets the user text and the candidates and returns the chosen
    candidate's name (or the candidate itself); it may be a coroutine function. A
    plain function runs in a worker thread, so it may block.
    """

    def classify(self, text: str, candidates: Sequence[ChatModelCandidate]) -> Any: ...


class _Route:
    """One call's routing: what ``on_agent`` saw, then the decision."""

    __slots__ = ("decided", "details", "event", "model", "resumed", "text")

    def __init__(self, text: str | None, resumed: bool) -> None:
        self.text = text
        self.resumed = resumed
        self.decided = False
        self.model: ModelLike | None = None  # None: the agent's own model
        self.event: CustomEvent | None = None
        self.details: dict[str, Any] = {}  # a classifier's confidence and probabilities


class _Choice:
    """A classifier model's answer: the candidate name and what to report with it."""

    __slots__ = ("details", "name")

    def __init__(self, name: str, details: dict[str, Any]) -> None:
        self.name = name
        self.details = details


class _NoChoice(Exception):
    """A classifier model answered without a choice (it refused, or answered another
    kind of question): the reply falls back, for this reason."""


class ModelRouterMiddleware(MiddlewareBase):
    """Run each reply on the candidate model a routing model picks for its input.

    Points: ``ON_AGENT`` (reads the reply's input), ``ON_MODEL_CALL`` (routes at the
    reply's first model call, then swaps ``ModelCallInput.model``) and
    ``ON_AGENT_FINISH`` (forgets the choice unless the reply is paused).

    Each reply is routed once, at its first model call; the choice is emitted as a
    ``CustomEvent(name="model_route", value={"candidate", "model", "fallback",
    "resumed"})`` before that call's ``ModelCallStartEvent`` and set as span
    attributes (``rx_agent.router.*``) on the span current there. A routing error, a
    timeout, an unknown name or an input without user text falls back to the agent's
    own model: ``candidate`` is then ``None`` and ``fallback`` says why. The routing
    model's own call is made directly: none of its events reach the reply's stream.

    Args:
        classifier_model: a chat model, a classifier model
            (:class:`~rx_agent.model.classifier.ClassifierModelBase`; its route event
            also carries the answer's ``confidence`` and ``probabilities``), or an
            object with a ``classify`` method (see :class:`RoutingClassifier`).
        candidates: the models to choose from (names unique).
        instructions: what the routing model is asked (default
            :data:`DEFAULT_ROUTER_INSTRUCTIONS`).
        timeout: seconds the routing may take before the reply falls back to the
            agent's model (``None``: no limit).
        state_key: the ``AgentState.data`` key that keeps a paused reply's choice (give
            two routers on one agent different keys).
        order: the middleware's order; high by default so that every other
            ``on_model_call`` middleware (the tracing ``chat`` span included) sees the
            routed model.
    """

    def __init__(
        self,
        classifier_model: Any,
        candidates: Sequence[ChatModelCandidate],
        instructions: str | None = None,
        *,
        timeout: float | None = 30.0,
        state_key: str = "rx_agent.router",
        order: int = 50,
    ) -> None:
        if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Sequence):
            raise TypeError("ModelRouterMiddleware candidates must be a list of ChatModelCandidate")
        if not candidates:
            raise ValueError("ModelRouterMiddleware needs at least one candidate")
        by_name: dict[str, ChatModelCandidate] = {}
        for i, candidate in enumerate(candidates):
            if not isinstance(candidate, ChatModelCandidate):
                raise TypeError(
                    f"candidate #{i} must be a ChatModelCandidate, not {type(candidate).__name__}"
                )
            if candidate.name in by_name:
                raise ValueError(f"candidate names must be unique: {candidate.name!r} is repeated")
            by_name[candidate.name] = candidate
        self._classify = getattr(classifier_model, "classify", None)
        self._classifier = isinstance(classifier_model, ClassifierModelBase)
        if not (self._classifier or callable(self._classify)
                or callable(getattr(classifier_model, "stream", None))):
            raise TypeError(
                "classifier_model must be a ChatModel, a ClassifierModelBase or have a "
                f"classify(text, candidates) method, not {type(classifier_model).__name__}"
            )
        if instructions is not None and (not isinstance(instructions, str)
                                         or not instructions.strip()):
            raise ValueError("instructions must be a non-blank str (or None for the default)")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be > 0 or None, got {timeout}")
        if not isinstance(state_key, str) or not state_key:
            raise ValueError("state_key must be a non-empty str")
        self.classifier_model = classifier_model
        self.candidates: tuple[ChatModelCandidate, ...] = tuple(candidates)
        self.instructions = instructions or DEFAULT_ROUTER_INSTRUCTIONS
        self.timeout = timeout
        self.state_key = state_key
        self._order = order
        self._by_name = by_name
        # One key per instance: two routers on one agent keep separate routes.
        self._ctx_key = f"rx_agent.router.{id(self):x}"
        self._tool = _choice_tool(self.candidates)
        self._question = ChoiceQuestion(
            instructions=self.instructions,
            criteria={c.name: c.description for c in self.candidates},
        )

    def order(self) -> int:
        return self._order

    def active_points(self) -> Collection[ExtensionPoint]:
        return _POINTS

    # -- hooks ---------------------------------------------------------------------

    def on_agent(
        self, agent: Agent, ctx: RuntimeContext, input: AgentInput, next: Handler[AgentInput]
    ) -> Observable[AgentEvent]:
        # Only remember what the reply asks; the routing waits for the first model call
        # (the session is bound by then, and nothing is routed for a reply that never
        # reaches the model).
        ctx.put(self._ctx_key, _Route(_latest_user_text(input.msgs), input.resume is not None))
        return next(input)

    def on_model_call(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ModelCallInput,
        next: Handler[ModelCallInput],
    ) -> Observable[AgentEvent]:
        route = ctx.get(self._ctx_key)
        if not isinstance(route, _Route):
            return next(input)
        if route.decided:
            return next(input) if route.model is None else next(input.with_(model=route.model))
        span = trace.get_current_span()  # read now: the decision may land on another thread

        async def decide(observer: rxabc.ObserverBase[AgentEvent]) -> None:
            if route.decided:  # an outer middleware subscribed this call again
                return
            self._settle(agent, ctx, route, *await self._choose(ctx, route))
            _annotate(span, route)
            assert route.event is not None
            observer.on_next(route.event)

        def call(_: Any = None) -> Observable[AgentEvent]:
            return next(input) if route.model is None else next(input.with_(model=route.model))

        return reactivex.concat(from_coroutine(decide, running_loop() or runtime_loop()),
                                reactivex.defer(call))

    def on_agent_finish(
        self, agent: Agent, ctx: RuntimeContext, outcome: AgentFinishOutcome
    ) -> None:
        state = ctx.agent_state
        # A paused reply resumes in a later call: keep its choice until then.
        if state is not None and state.pending is None:
            state.data.pop(self.state_key, None)

    # -- routing -------------------------------------------------------------------

    async def _choose(self, ctx: RuntimeContext, route: _Route) -> tuple[str | None, str | None]:
        """``(candidate name, None)`` or ``(None, why the reply falls back)``."""
        if route.resumed:
            state = ctx.agent_state
            stored = state.data.get(self.state_key) if state is not None else None
            if not isinstance(stored, dict):
                return None, "the resumed reply has no stored choice"
            name = stored.get("candidate")
            if name is None:
                return None, str(stored.get("fallback") or "fallback")
            if name not in self._by_name:
                return None, f"the stored candidate {name!r} is no longer configured"
            return str(name), None
        if route.text is None:
            return None, "the input has no user text"
        try:
            answer = await asyncio.wait_for(self._ask(route.text), self.timeout)
        except _NoChoice as exc:
            return None, str(exc)
        except TimeoutError:
            return None, f"routing timed out after {self.timeout}s"
        except Exception as exc:
            # Clients see this (the route event): a model error without its endpoint.
            why = exc.public_message if isinstance(exc, ModelError) else str(exc)
            return None, f"routing failed: {type(exc).__name__}: {why}"
        if isinstance(answer, _Choice):
            route.details, answer = answer.details, answer.name
        if isinstance(answer, ChatModelCandidate):
            answer = answer.name
        if not isinstance(answer, str) or answer not in self._by_name:
            shown = repr(answer)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            return None, f"the routing model chose an unknown candidate: {shown}"
        return answer, None

    async def _ask(self, text: str) -> Any:
        if self._classifier:
            return await self._ask_classifier(text)
        classify = self._classify
        if callable(classify):
            if inspect.iscoroutinefunction(classify):
                return await classify(text, self.candidates)
            answer = await asyncio.to_thread(classify, text, self.candidates)
            return await answer if inspect.isawaitable(answer) else answer
        messages = [
            Msg(role=Role.SYSTEM, content=self._prompt()),
            Msg(role=Role.USER, content=text),
        ]
        chunks = await await_observable(
            self.classifier_model.stream(messages, [self._tool],
                                         GenerateOptions(tool_choice=CHOOSE_TOOL))
            .pipe(ops.to_list()),
            [],
        )
        return _read_choice(chunks, self._by_name)

    async def _ask_classifier(self, text: str) -> _Choice:
        response = await self.classifier_model(text, {ROUTE_QUESTION: self._question})
        content = getattr(response, "content", None)
        answer = content.get(ROUTE_QUESTION) if isinstance(content, dict) else None
        if isinstance(answer, RefusalAnswer):
            raise _NoChoice("the classifier refused to choose")
        if not isinstance(answer, ChoiceAnswer):
            what = type(answer).__name__ if answer is not None else "nothing"
            raise _NoChoice(f"the classifier answered {ROUTE_QUESTION!r} with {what}, "
                            "not a ChoiceAnswer")
        return _Choice(answer.choice, {"confidence": answer.confidence,
                                       "probabilities": dict(answer.probabilities)})

    def _prompt(self) -> str:
        lines = [self.instructions, "", "Candidates:"]
        lines += [f"- {c.name}: {c.description}" if c.description else f"- {c.name}"
                  for c in self.candidates]
        lines += ["", f"Call {CHOOSE_TOOL} with the name of the one candidate to use."]
        return "\n".join(lines)

    def _settle(self, agent: Agent, ctx: RuntimeContext, route: _Route,
                name: str | None, fallback: str | None) -> None:
        chosen = self._by_name[name] if name is not None else None
        route.model = chosen.model if chosen is not None else None
        route.decided = True
        model_name = (chosen.model if chosen is not None else agent.model).name
        route.event = CustomEvent(
            name=ROUTE_EVENT,
            value={"candidate": name, "model": model_name, "fallback": fallback,
                   "resumed": route.resumed, **(route.details if name is not None else {})},
            source=agent.name,
        )
        state = ctx.agent_state
        if state is not None:
            state.data[self.state_key] = {"candidate": name, "fallback": fallback}
        if fallback is not None:
            logger.warning("model routing fell back to the agent's model %s: %s",
                           model_name, fallback)

    def __repr__(self) -> str:
        names = ", ".join(c.name for c in self.candidates)
        return f"ModelRouterMiddleware(candidates=[{names}])"


# -- helpers -----------------------------------------------------------------------


def _latest_user_text(msgs: Sequence[Msg]) -> str | None:
    for msg in reversed(msgs):
        if msg.role == Role.USER:
            text = msg.text
            if text.strip():
                return text
    return None


def _choice_tool(candidates: Sequence[ChatModelCandidate]) -> dict[str, Any]:
    return {
        "name": CHOOSE_TOOL,
        "description": "Choose the chat model that answers the user input.",
        "parameters": {
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "enum": [c.name for c in candidates],
                    "description": "The name of the chosen candidate.",
                },
            },
            "required": ["name"],
        },
    }


def _read_choice(chunks: Sequence[Any], by_name: dict[str, ChatModelCandidate]) -> str | None:
    """The candidate name in a routing model's answer: its ``choose_model`` call, else
    its text (JSON or a bare name)."""
    calls: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    text: list[str] = []
    for chunk in chunks:
        if isinstance(chunk, ToolCallChunk):
            calls.setdefault(chunk.index, []).append(chunk.arguments)
            if chunk.name:
                names[chunk.index] = chunk.name
        elif isinstance(chunk, TextChunk):
            text.append(chunk.text)
    # The forced tool first; a model that named its tool differently still counts.
    for index in sorted(calls, key=lambda i: names.get(i) != CHOOSE_TOOL):
        found = _name_in_json("".join(calls[index]))
        if found is not None:
            return found
    return _name_in_text("".join(text), by_name)


def _name_in_json(raw: str) -> str | None:
    try:
        data = json.loads(raw) if raw.strip() else None
    except ValueError:
        return None
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        for key in ("name", "candidate", "model"):
            if isinstance(data.get(key), str):
                return str(data[key])
    return None


def _name_in_text(text: str, by_name: dict[str, ChatModelCandidate]) -> str | None:
    stripped = text.strip()
    if not stripped:
        return None
    found = _name_in_json(stripped)
    if found is not None:
        return found
    bare = stripped.strip("\"'`*. \n").lower()
    for name in by_name:
        if name.lower() == bare:
            return name
    # A sentence that names exactly one candidate ("I pick strong.").
    mentioned = [n for n in by_name
                 if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", stripped, re.IGNORECASE)]
    return mentioned[0] if len(mentioned) == 1 else stripped


def _annotate(span: trace.Span, route: _Route) -> None:
    if not span.is_recording():
        return
    event = route.event
    assert event is not None
    value = event.value
    span.set_attribute(ATTR_MODEL, value["model"])
    if value["candidate"] is not None:
        span.set_attribute(ATTR_CANDIDATE, value["candidate"])
    if value["fallback"] is not None:
        span.set_attribute(ATTR_FALLBACK, value["fallback"])
