"""The agent behind ``rx-agent demo`` (and the tools of ``rx-agent chat``).

Everything here runs offline: the model is a :class:`~rx_agent.ScriptedModel` that
plays back a fixed conversation, and the tools are local functions. The point is to
show the runtime, not a model: a ReAct run with thinking and two tool calls, seen
through three small middlewares that each use a different kind of hook:

* :class:`RunLogMiddleware` (order 100, outermost): ``on_agent`` + ``on_reasoning``,
  narrates the run by adding :class:`~rx_agent.CustomEvent` s to the stream;
* :class:`DynamicPromptMiddleware` (order 1): ``on_system_prompt``, appends today's
  date and the preferred units to the system prompt;
* :class:`TimingMiddleware` (order 0, innermost): ``on_model_call``, measures each
  model call and stamps the latency onto its ``ModelCallEndEvent``.

The module is importable on its own (``rx-agent plan rx_agent._demo:build_demo_agent``).
"""

from __future__ import annotations

import ast
import datetime as _dt
import math
import operator
import re
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

import reactivex
from reactivex import Observable
from reactivex import operators as ops

from .agent import ReActAgent
from .context import RuntimeContext
from .event import (
    AgentEndEvent,
    AgentEvent,
    CustomEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
)
from .message import ChatUsage, Role, ThinkingBlock, ToolUseBlock
from .middleware import (
    AgentInput,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    ReasoningInput,
)
from .middleware.base import Agent
from .middleware.types import Handler
from .model import ChatModel, ScriptedModel
from .session import SessionStore
from .tool import Toolkit, tool

__all__ = [
    "DEMO_QUESTION",
    "DynamicPromptMiddleware",
    "RunLogMiddleware",
    "TimingMiddleware",
    "build_chat_agent",
    "build_demo_agent",
    "calculate",
    "current_time",
    "demo_script",
    "get_weather",
]

DEMO_QUESTION = "What's the weather like in Paris right now? Give me Fahrenheit too."
"""The user message the demo sends."""

DEFAULT_DELAY = 0.02
"""Seconds before each scripted chunk: slow enough to watch, fast enough to finish
the demo in about two seconds."""

LOG_EVENT = "log"
"""Name of the :class:`CustomEvent` s :class:`RunLogMiddleware` adds to the stream."""


# -- tools -------------------------------------------------------------------------

# Canned, so that the demo never touches the network and always tells the same story.
_WEATHER: dict[str, tuple[str, int]] = {
    "paris": ("sunny with a light breeze", 21),
    "london": ("overcast with drizzle", 14),
    "tokyo": ("clear skies", 24),
    "new york": ("partly cloudy", 18),
    "beijing": ("hazy sunshine", 26),
    "sydney": ("showers", 16),
}
_SKIES = ("sunny", "cloudy", "light rain", "windy", "clear skies")


@tool
def get_weather(city: str) -> str:
    """Today's weather for a city (canned demo data, no network).

    Args:
        city: The city name, e.g. "Paris".
    """
    key = city.strip().lower()
    if not key:
        raise ValueError("city must not be empty")
    sky, celsius = _WEATHER.get(key, ("", 0))
    if not sky:
        # Unknown cities still get a stable answer: derived from the name, not random.
        seed = sum(map(ord, key))
        sky, celsius = _SKIES[seed % len(_SKIES)], 5 + seed % 25
    return f"{city.strip()}: {sky}, {celsius} °C"


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_NAMES = {"pi": math.pi, "e": math.e}
_MAX_EXPONENT = 1000  # `9 ** 9 ** 9` would hang the tool; a model may well try it


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        if isinstance(node.value, bool):
            raise ValueError("booleans are not numbers here")
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        result: float | int = _UNARY[type(node.op)](_evaluate(node.operand))
        return result
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError(f"exponent {right} is too large")
        outcome: float | int = _BINARY[type(node.op)](left, right)
        return outcome
    raise ValueError(f"unsupported syntax: {ast.unparse(node)!r}")


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression exactly, e.g. "21 * 9 / 5 + 32".

    Args:
        expression: Numbers, + - * / // % **, parentheses, pi and e.
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from exc
    value = _evaluate(tree)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    elif isinstance(value, float):
        value = round(value, 10)  # hide binary noise such as 69.80000000000001
    return str(value)


@tool
def current_time() -> str:
    """The current local date and time, with the UTC offset."""
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


# -- middlewares ---------------------------------------------------------------------


def _log(agent: Agent, text: str, **fields: Any) -> CustomEvent:
    return CustomEvent(name=LOG_EVENT, value={"text": text, **fields}, source=agent.name)


class RunLogMiddleware(MiddlewareBase):
    """Observability: narrates each run as ``CustomEvent(name="log")`` events.

    It writes to the event stream rather than to a logger so that whoever renders the
    stream (the CLI, a web UI, ``--json``) shows the narration in place, in order.
    Per-call state lives in the subscription (``reactivex.defer``) and in the
    :class:`RuntimeContext`, never on ``self``: one instance serves every call.
    """

    def order(self) -> int:
        return 100  # outermost: its timings include every other middleware

    def active_points(self) -> Collection[ExtensionPoint]:
        return {ExtensionPoint.ON_AGENT, ExtensionPoint.ON_REASONING}

    def on_agent(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: AgentInput,
        next: Handler[AgentInput],
    ) -> Observable[AgentEvent]:
        def per_subscription(_: Any = None) -> Observable[AgentEvent]:
            started = time.perf_counter()
            seen = [0]

            def narrate(event: AgentEvent) -> Observable[AgentEvent]:
                seen[0] += 1
                if not isinstance(event, AgentEndEvent):
                    return reactivex.of(event)
                rounds = ctx.get("demo.rounds", 0)
                summary = _log(
                    agent,
                    f"run finished in {time.perf_counter() - started:.2f} s: "
                    f"{rounds} round(s), {seen[0]} events",
                    rounds=rounds,
                )
                # The summary goes just before AgentEndEvent, which must stay last.
                return reactivex.of(summary, event)

            return next(input).pipe(ops.concat_map(narrate))

        return reactivex.defer(per_subscription)

    def on_reasoning(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ReasoningInput,
        next: Handler[ReasoningInput],
    ) -> Observable[AgentEvent]:
        # A write to ctx is seen by every later hook and tool of this call.
        ctx.put("demo.rounds", input.iteration)
        text = (
            f"round {input.iteration}: {len(input.messages)} message(s) in, "
            f"{len(input.tools)} tool(s) offered"
        )
        fields: dict[str, Any] = {"iteration": input.iteration}
        first = input.messages[0] if input.messages else None
        if input.iteration == 1 and first is not None and first.role is Role.SYSTEM:
            fields["system_prompt"] = first.text
        return reactivex.concat(reactivex.of(_log(agent, text, **fields)), next(input))


class DynamicPromptMiddleware(MiddlewareBase):
    """Appends today's date and the preferred units to the system prompt.

    ``on_system_prompt`` runs once per call, so the date is fresh for every call
    while every round of that call sees the same prompt. ``ctx.get("units")``
    overrides the units for one call.
    """

    def active_points(self) -> Collection[ExtensionPoint]:
        return {ExtensionPoint.ON_SYSTEM_PROMPT}

    def on_system_prompt(self, agent: Agent, ctx: RuntimeContext, current_prompt: str) -> str:
        today = _dt.date.today().strftime("%A %d %B %Y")
        units = ctx.get("units") or "°C and °F"
        return f"{current_prompt}\nToday is {today}. Give temperatures in {units}."


class TimingMiddleware(MiddlewareBase):
    """Measures each model call and stamps it onto its ``ModelCallEndEvent``.

    ``metadata["timing"]`` gets the time to the first chunk and the total, and
    ``usage.time`` is filled in when the model did not report it. Because the
    assistant message is built from what leaves the ``on_model_call`` chain, the
    stamped usage is also what the session stores.
    """

    def order(self) -> int:
        return 0  # innermost: time the model, not the other middlewares

    def active_points(self) -> Collection[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL}

    def on_model_call(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ModelCallInput,
        next: Handler[ModelCallInput],
    ) -> Observable[AgentEvent]:
        def per_subscription(_: Any = None) -> Observable[AgentEvent]:
            # Timing starts at subscription, not when the hook is called: a retry
            # re-subscribes and is timed afresh.
            started = time.perf_counter()
            first: list[float] = []

            def stamp(event: AgentEvent) -> AgentEvent:
                now = time.perf_counter()
                if not isinstance(event, ModelCallEndEvent):
                    if not first and not isinstance(event, ModelCallStartEvent):
                        first.append(now)
                    return event
                total = now - started
                usage = event.usage or ChatUsage()
                if usage.time is None:
                    usage = usage.model_copy(update={"time": total})
                timing = {
                    "first_chunk_ms": round(((first[0] if first else now) - started) * 1000),
                    "total_ms": round(total * 1000),
                }
                return event.model_copy(
                    update={"usage": usage, "metadata": {**event.metadata, "timing": timing}}
                )

            return next(input).pipe(ops.map(stamp))

        return reactivex.defer(per_subscription)


# -- the scripted model --------------------------------------------------------------


def _pieces(text: str) -> list[str]:
    """Word-sized deltas, so that the text visibly streams."""
    return re.findall(r"\S+\s*", text)


def _thinking(text: str) -> list[ThinkingBlock]:
    return [ThinkingBlock(thinking=piece) for piece in _pieces(text)]


def demo_script(city: str = "Paris") -> list[list[Any]]:
    """The three model responses of one demo turn about ``city``.

    Round 1 thinks and calls ``get_weather``; round 2 thinks and calls ``calculate``
    to convert to Fahrenheit; round 3 answers. The numbers in the answer are the
    ones the (deterministic) tools return.
    """
    report = get_weather(city)
    sky, _, rest = report.partition(": ")[2].rpartition(", ")
    celsius = int(rest.split()[0])
    expression = f"{celsius} * 9 / 5 + 32"
    fahrenheit = calculate(expression)
    return [
        [
            *_thinking(
                f"The user wants the current weather in {city}, in Celsius and "
                "Fahrenheit. I'll look it up first, then convert the temperature."
            ),
            ToolUseBlock(id="call_weather_1", name="get_weather", input={"city": city}),
        ],
        [
            *_thinking(f"{city} is at {celsius} °C. Fahrenheit is C * 9/5 + 32; let the "
                       "calculator do the arithmetic."),
            ToolUseBlock(id="call_calc_1", name="calculate", input={"expression": expression}),
        ],
        _pieces(
            f"Right now in {city} it's {sky}, {celsius} °C ({fahrenheit} °F). "
            "Enjoy your day!"
        ),
    ]


def build_demo_agent(delay: float = DEFAULT_DELAY, *, city: str = "Paris") -> ReActAgent:
    """The demo agent: a ScriptedModel, two tools and three middlewares.

    A fresh agent per call of this function: the scripted model plays its script once.
    """
    model = ScriptedModel(demo_script(city), name="scripted-demo", delay=delay)
    return _assemble(
        "demo",
        model,
        sys_prompt="You are a concise weather assistant.",
        tools=[get_weather, calculate],
    )


def _assemble(
    name: str, model: ChatModel, sys_prompt: str, tools: Sequence[Any],
    session_store: SessionStore | None = None,
) -> ReActAgent:
    builder = ReActAgent.builder()
    if session_store is not None:
        builder = builder.session_store(session_store)
    return (
        builder
        .name(name)
        .sys_prompt(sys_prompt)
        .model(model)
        .toolkit(Toolkit(list(tools)))
        # Registration order does not matter for the plan: order() does.
        .middleware(TimingMiddleware())
        .middleware(DynamicPromptMiddleware())
        .middleware(RunLogMiddleware())
        .build()
    )


def build_chat_agent(
    model: ChatModel,
    sys_prompt: str = "You are a helpful assistant in a terminal chat. Be concise. "
    "Use the tools when they help.",
    *,
    session_store: SessionStore | None = None,
) -> ReActAgent:
    """The ``rx-agent chat`` agent: the demo's middlewares and three small tools."""
    return _assemble("assistant", model, sys_prompt, [calculate, current_time, get_weather],
                     session_store)
