"""The hook points, one row each: everything the runtime knows about a point.

:data:`SPECS` holds one :class:`PointSpec` per :class:`ExtensionPoint`: its kind, the
input its hook is handed, the hook's parameters, its Java and AgentScope Python names,
whether ``active_points() -> None`` includes it, how one hook's answer is settled and
the test harness's defaults. The plan (:mod:`._plan`), the layers (:mod:`._layers`),
the forms (:mod:`._forms`), the notifications (:mod:`._notify`) and
``rx_agent.testing.MiddlewareHarness`` read it; none of them lists points itself.

A new hook point is a member here and its row, plus what users and the loop see of
it: its default hook on ``MiddlewareBase`` (the method a middleware overrides), for
an onion point its input record in :mod:`.inputs`, and its step, the module whose work
it wraps (see docs/internals.md, "A new hook point").
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..event import AgentEvent
from ..message import GenerateReason, Msg, Role, ToolUseBlock
from ..options import GenerateOptions
from . import _notify
from ._notify import Watch
from .inputs import (
    ActingInput,
    AgentFinishOutcome,
    AgentInput,
    CompressContextInput,
    ModelCallInput,
    ReasoningInput,
)
from .types import ModelLike

__all__ = ["OPT_IN", "SPECS", "ExtensionPoint", "PointKind", "PointSpec", "Samples"]


class ExtensionPoint(enum.Enum):
    """The places a middleware can hook: AgentScope Java's seven, then
    ``ON_COMPRESS_CONTEXT`` (AgentScope Python's), which a middleware joins only by
    naming it in ``active_points()`` or overriding ``on_compress_context``."""

    ON_AGENT = "on_agent"
    ON_REASONING = "on_reasoning"
    ON_ACTING = "on_acting"
    ON_MODEL_CALL = "on_model_call"
    ON_SYSTEM_PROMPT = "on_system_prompt"
    ON_AGENT_STATE_READY = "on_agent_state_ready"
    ON_AGENT_FINISH = "on_agent_finish"
    ON_COMPRESS_CONTEXT = "on_compress_context"

    # Members compare by identity, so the identity hash agrees with equality; Enum's
    # own hashes the name in Python, on every plan lookup of every call.
    __hash__ = object.__hash__

    @property
    def kind(self) -> str:
        """``"onion"``, ``"transformer"`` or ``"notification"``."""
        return SPECS[self].kind.family


class PointKind(enum.Enum):
    """How the hooks of a point run."""

    ONION = "onion"
    """Wraps a step: ``hook(agent, ctx, input, next)`` returns the step's events."""
    TRANSFORMER = "transformer"
    """Passes a value through every hook in plan order; each answers the next value."""
    NOTIFICATION = "notification"
    """Tells every hook something; an awaitable answer is awaited, any other ignored."""
    AWAITED_NOTIFICATION = "awaited notification"
    """Tells every hook something; an answer is run to completion before the next
    hook, and a failure is the call's."""

    @property
    def family(self) -> str:
        """What :attr:`ExtensionPoint.kind` says (both notifications are one there)."""
        return "notification" if self is PointKind.AWAITED_NOTIFICATION else self.value


class Samples(Protocol):
    """The event builders of ``rx_agent.testing`` a row's sample upstream is written
    with (the middleware layer cannot import them; the harness hands them in)."""

    def text_round(self, *deltas: str) -> list[AgentEvent]: ...

    def agent_reply(self, *steps: Sequence[AgentEvent]) -> list[AgentEvent]: ...

    def tool_results(self, *calls: ToolUseBlock) -> list[AgentEvent]: ...


Settle = Callable[[str, str, Any, Watch | None], Awaitable[Any]]
"""``settle(label, method, answer, watch)``: one hook's answer made a result."""


@dataclass(frozen=True, slots=True)
class PointSpec:
    """What the runtime knows about one hook point."""

    point: ExtensionPoint
    kind: PointKind
    summary: str
    """What the hook does, after "it" (a refused AgentScope Python name says it)."""
    input_type: type
    """What the hook is handed: an onion point's input record (what ``next`` takes)."""
    params: tuple[str, ...]
    """The hook's parameters after ``self``. A non-onion hook's ``state`` is handed
    the session's state, its other parameter after ``ctx`` the point's input."""
    java: str
    """The camelCase name a port may keep by mistake (Java's, for its seven)."""
    python: str | None
    """AgentScope Python's name for the point (``None``: it has no such hook)."""
    opt_in: bool = False
    """Beyond Java's seven: ``active_points() -> None`` includes the point only for a
    middleware that overrides its hook, and a plan prints it only when somebody takes
    part, so a Java port's plan stays as it was."""
    nested: ExtensionPoint | None = None
    """The point whose stream this point's step carries without a hook of its own
    (the reasoning step's is what left ``on_model_call``)."""
    settle: Settle | None = None
    """How one hook's answer is settled (a :mod:`._notify` function); ``None`` at an
    onion point, whose layer checks the Observable (:class:`._layers.Layer`)."""
    returns: str = "nothing"
    """What a non-onion hook returns, in the error for an ``async def`` with ``yield``."""
    sample_input: Callable[[ModelLike, str], Any] | None = None
    """The test harness's default input, given the agent's model and name."""
    sample_upstream: Callable[[Any, Samples], Any] | None = None
    """The test harness's default ``next`` stream (onion) for an input."""
    given: Callable[[Any], Any] | None = None
    """What the test harness hands a non-onion hook for a run's input: the input
    checked (a ``TypeError`` says what the point takes) or copied."""

    def arguments(self, state: Any, inp: Any) -> tuple[Any, ...]:
        """A non-onion hook's arguments after ``agent`` and ``ctx``."""
        return tuple(state if name == "state" else inp for name in self.params[2:])


_ONION_PARAMS = ("agent", "ctx", "input", "next")
HARNESS_PROMPT = "You are a helpful assistant."


def _user() -> Msg:
    return Msg(role=Role.USER, content="hello")


def _system() -> Msg:
    return Msg(role=Role.SYSTEM, content=HARNESS_PROMPT)


def _outcome(name: str) -> AgentFinishOutcome:
    reply = Msg(role=Role.ASSISTANT, content="hello", name=name,
                generate_reason=GenerateReason.MODEL_STOP)
    return AgentFinishOutcome(result=reply, reason=GenerateReason.MODEL_STOP)


def _a_prompt(inp: Any) -> str:
    if not isinstance(inp, str):
        raise TypeError(f"on_system_prompt takes the current prompt (a str), got {inp!r}")
    return inp


def _an_outcome(inp: Any) -> AgentFinishOutcome:
    if not isinstance(inp, AgentFinishOutcome):
        raise TypeError(f"on_agent_finish takes an AgentFinishOutcome, got {inp!r}")
    return inp


_ROWS = (
    PointSpec(
        ExtensionPoint.ON_AGENT, PointKind.ONION, "wraps the whole call", AgentInput,
        _ONION_PARAMS, java="onAgent", python="on_reply",
        sample_input=lambda model, name: AgentInput((_user(),)),
        sample_upstream=lambda inp, s: s.agent_reply(s.text_round("hello")),
    ),
    PointSpec(
        ExtensionPoint.ON_REASONING, PointKind.ONION, "wraps one reasoning step",
        ReasoningInput, _ONION_PARAMS, java="onReasoning", python="on_reasoning",
        nested=ExtensionPoint.ON_MODEL_CALL,
        sample_input=lambda model, name: ReasoningInput(
            (_system(), _user()), (), GenerateOptions(), 1),
        sample_upstream=lambda inp, s: s.text_round("hello"),
    ),
    PointSpec(
        ExtensionPoint.ON_ACTING, PointKind.ONION, "wraps one batch of tool calls",
        ActingInput, _ONION_PARAMS, java="onActing", python="on_acting",
        sample_input=lambda model, name: ActingInput(
            (ToolUseBlock(id="call_1", name="lookup", input={"q": "x"}),)),
        sample_upstream=lambda inp, s: s.tool_results(*inp.tool_calls),
    ),
    PointSpec(
        ExtensionPoint.ON_MODEL_CALL, PointKind.ONION, "wraps one model API call",
        ModelCallInput, _ONION_PARAMS, java="onModelCall", python="on_model_call",
        sample_input=lambda model, name: ModelCallInput(
            (_system(), _user()), (), GenerateOptions(), model),
        sample_upstream=lambda inp, s: s.text_round("hello"),
    ),
    PointSpec(
        ExtensionPoint.ON_SYSTEM_PROMPT, PointKind.TRANSFORMER,
        "transforms the system prompt once per call", str,
        ("agent", "ctx", "current_prompt"), java="onSystemPrompt", python="on_system_prompt",
        settle=_notify.settle_prompt, returns="the prompt (`return current_prompt`)",
        sample_input=lambda model, name: HARNESS_PROMPT, given=_a_prompt,
    ),
    PointSpec(
        ExtensionPoint.ON_AGENT_STATE_READY, PointKind.NOTIFICATION,
        "is told that the call's session state is bound", list,
        ("agent", "ctx", "state", "input_messages"), java="onAgentStateReady", python=None,
        settle=_notify.settle_awaitable,
        sample_input=lambda model, name: [_user()], given=list,
    ),
    PointSpec(
        ExtensionPoint.ON_AGENT_FINISH, PointKind.AWAITED_NOTIFICATION,
        "is told the call's outcome", AgentFinishOutcome,
        ("agent", "ctx", "outcome"), java="onAgentFinish", python=None,
        settle=_notify.settle_awaited,
        sample_input=lambda model, name: _outcome(name), given=_an_outcome,
    ),
    PointSpec(
        ExtensionPoint.ON_COMPRESS_CONTEXT, PointKind.ONION,
        "wraps the context compression at the top of every round", CompressContextInput,
        _ONION_PARAMS, java="onCompressContext", python="on_compress_context", opt_in=True,
        sample_input=lambda model, name: CompressContextInput(
            messages=(_user(),), model=model, system=_system()),
        sample_upstream=lambda inp, s: [],  # the context was left as it was
    ),
)

SPECS: dict[ExtensionPoint, PointSpec] = {row.point: row for row in _ROWS}
"""One row per point, in :class:`ExtensionPoint` order (the order a plan prints)."""

OPT_IN = frozenset(point for point, row in SPECS.items() if row.opt_in)
"""The points beyond Java's seven (see :attr:`PointSpec.opt_in`)."""
