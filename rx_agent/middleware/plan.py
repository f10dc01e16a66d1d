"""The frozen execution plan: who takes part at each point, in which order.

Built once when the agent is built. A point with no participants builds no wrapper:
the core handler is called directly.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Generic, TypeVar

import reactivex
from reactivex import Observable

from .._rx import DirectObservable
from ..context import AgentState, RuntimeContext
from ..event import AgentEvent
from ..message import Msg
from .base import Agent, ExtensionPoint, MiddlewareBase
from .inputs import ActingInput, AgentInput, ModelCallInput, ReasoningInput

__all__ = ["ExecutionPlan", "PlanError"]

InputT = TypeVar("InputT")
Handler = Callable[[InputT], Observable[AgentEvent]]

_INPUT_TYPES: dict[ExtensionPoint, type] = {
    ExtensionPoint.ON_AGENT: AgentInput,
    ExtensionPoint.ON_REASONING: ReasoningInput,
    ExtensionPoint.ON_ACTING: ActingInput,
    ExtensionPoint.ON_MODEL_CALL: ModelCallInput,
}


_ONION = frozenset(_INPUT_TYPES)
_DEFAULTS = {p: getattr(MiddlewareBase, p.value) for p in ExtensionPoint}


class PlanError(TypeError):
    """A middleware declares something the plan cannot use."""


def _label(mw: MiddlewareBase) -> str:
    return type(mw).__name__


class _Layer(Generic[InputT]):
    """One onion layer: calls ``hook(agent, ctx, input, inner)``.

    Checks the input handed to it and the hook's return value so that a mistake in a
    middleware fails the stream with a message naming the middleware, and turns a hook
    that raises into an erroring stream (the caller sees ``on_error``).
    """

    __slots__ = ("_agent", "_ctx", "_hook", "_inner", "_input_type", "_point", "_who")

    def __init__(
        self,
        point: ExtensionPoint,
        who: MiddlewareBase,
        hook: Callable[..., Observable[AgentEvent]],
        agent: Agent,
        ctx: RuntimeContext,
        inner: Callable[[InputT], Observable[AgentEvent]],
    ) -> None:
        self._point = point
        self._who = who
        self._hook = hook
        self._agent = agent
        self._ctx = ctx
        self._inner = inner
        self._input_type = _INPUT_TYPES[point]

    def __call__(self, inp: InputT) -> Observable[AgentEvent]:
        if type(inp) is not self._input_type and not isinstance(inp, self._input_type):
            return reactivex.throw(
                TypeError(
                    f"{self._point.value}: next() was given {type(inp).__name__}, "
                    f"expected {self._input_type.__name__}"
                )
            )
        try:
            out = self._hook(self._agent, self._ctx, inp, self._inner)
        except Exception as exc:
            return reactivex.throw(exc)
        # Exact-type checks first: isinstance against RxPY's ABC is the slow path.
        kind = type(out)
        if kind is DirectObservable or kind is Observable:
            return out
        if not isinstance(out, Observable):
            return reactivex.throw(
                TypeError(
                    f"{_label(self._who)}.{self._point.value}() returned "
                    f"{type(out).__name__}, expected an Observable "
                    "(did it forget to `return next(input)`?)"
                )
            )
        return out


class _Checked(Generic[InputT]):
    """The innermost ``next``: checks what the innermost middleware passes to the core."""

    __slots__ = ("_core", "_input_type", "_point")

    def __init__(self, point: ExtensionPoint, core: Callable[[InputT], Observable[AgentEvent]]):
        self._point = point
        self._core = core
        self._input_type = _INPUT_TYPES[point]

    def __call__(self, inp: InputT) -> Observable[AgentEvent]:
        if not isinstance(inp, self._input_type):
            return reactivex.throw(
                TypeError(
                    f"{self._point.value}: next() was given {type(inp).__name__}, "
                    f"expected {self._input_type.__name__}"
                )
            )
        try:
            return self._core(inp)
        except Exception as exc:
            return reactivex.throw(exc)


class ExecutionPlan:
    """Participants per extension point, outermost first, frozen at build time."""

    __slots__ = ("_hooks", "_middlewares", "_participants")

    def __init__(self, middlewares: Iterable[MiddlewareBase]) -> None:
        registered = list(middlewares)
        for i, mw in enumerate(registered):
            if not isinstance(mw, MiddlewareBase):
                raise PlanError(
                    f"middleware #{i} is a {type(mw).__name__}, not a MiddlewareBase "
                    "(did you pass the class instead of an instance?)"
                )
        orders: list[int] = []
        for mw in registered:
            value = mw.order()
            if not isinstance(value, int) or isinstance(value, bool):
                raise PlanError(f"{_label(mw)}.order() must return an int, got {value!r}")
            orders.append(value)
        # Python's sort is stable: equal orders keep registration order.
        ranked = sorted(range(len(registered)), key=lambda i: -orders[i])
        self._middlewares: tuple[MiddlewareBase, ...] = tuple(registered[i] for i in ranked)

        participants: dict[ExtensionPoint, list[MiddlewareBase]] = {p: [] for p in ExtensionPoint}
        for mw in self._middlewares:
            for point in self._read_points(mw):
                participants[point].append(mw)
        self._participants: dict[ExtensionPoint, tuple[MiddlewareBase, ...]] = {
            p: tuple(ms) for p, ms in participants.items()
        }
        # Bound hook methods, looked up once. A participant that kept the default
        # of an onion hook is a pure pass-through: it stays a participant but builds
        # no layer (the default only returns next(input)).
        self._hooks: dict[ExtensionPoint, tuple[tuple[MiddlewareBase, Any], ...]] = {
            p: tuple(
                (mw, getattr(mw, p.value))
                for mw in ms
                if not (p in _ONION and getattr(type(mw), p.value) is _DEFAULTS[p])
            )
            for p, ms in self._participants.items()
        }

    @staticmethod
    def _read_points(mw: MiddlewareBase) -> frozenset[ExtensionPoint]:
        declared = mw.active_points()  # read exactly once
        if declared is None:
            return frozenset(ExtensionPoint)
        if isinstance(declared, (str, ExtensionPoint)) or not isinstance(declared, Collection):
            raise PlanError(
                f"{_label(mw)}.active_points() must return a collection of ExtensionPoint "
                f"or None, got {declared!r}"
            )
        points = frozenset(declared)  # a copy: later mutation has no effect
        bad = [p for p in points if not isinstance(p, ExtensionPoint)]
        if bad:
            raise PlanError(f"{_label(mw)}.active_points() has non-ExtensionPoint items: {bad!r}")
        return points

    # -- inspection ---------------------------------------------------------------

    @property
    def middlewares(self) -> tuple[MiddlewareBase, ...]:
        """Every registered middleware in plan order, silent ones included."""
        return self._middlewares

    def participants(self, point: ExtensionPoint) -> tuple[MiddlewareBase, ...]:
        """The participants at ``point``, outermost first."""
        return self._participants[point]

    def is_active(self, point: ExtensionPoint) -> bool:
        return bool(self._participants[point])

    def describe(self) -> str:
        """One line per point: participants outermost first, with their order values."""
        width = max(len(p.value) for p in ExtensionPoint)
        lines = []
        for point in ExtensionPoint:
            parts = self._participants[point]
            shown = " -> ".join(f"{_label(m)}({m.order()})" for m in parts) or "-"
            lines.append(f"{point.value:<{width}}  {shown}")
        return "\n".join(lines)

    def to_mermaid(self) -> str:
        """The plan as a Mermaid flowchart (one subgraph per point)."""
        out = ["flowchart TD"]
        for point in ExtensionPoint:
            parts = self._participants[point]
            out.append(f"  subgraph {point.value}")
            prev = f"{point.value}_in"
            out.append(f'    {prev}(["{point.value}"])')
            for i, m in enumerate(parts):
                node = f"{point.value}_{i}"
                out.append(f'    {node}["{_label(m)} (order {m.order()})"]')
                out.append(f"    {prev} --> {node}")
                prev = node
            if point.kind == "onion":
                out.append(f'    {point.value}_core[["core"]]')
                out.append(f"    {prev} --> {point.value}_core")
            out.append("  end")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return f"ExecutionPlan({list(self._middlewares)!r})"

    # -- execution ----------------------------------------------------------------

    def wrap(
        self,
        point: ExtensionPoint,
        agent: Agent,
        ctx: RuntimeContext,
        core: Callable[[InputT], Observable[AgentEvent]],
    ) -> Callable[[InputT], Observable[AgentEvent]]:
        """The onion for ``point`` around ``core``; ``core`` itself when nobody takes part."""
        hooks = self._hooks[point]
        if not hooks:
            return core
        handler: Callable[[InputT], Observable[AgentEvent]] = _Checked(point, core)
        for mw, hook in reversed(hooks):
            handler = _Layer(point, mw, hook, agent, ctx, handler)
        return handler

    def system_prompt_hooks(self) -> Sequence[tuple[MiddlewareBase, Any]]:
        return self._hooks[ExtensionPoint.ON_SYSTEM_PROMPT]

    def finish_hooks(self) -> Sequence[tuple[MiddlewareBase, Any]]:
        return self._hooks[ExtensionPoint.ON_AGENT_FINISH]

    def notify_state_ready(
        self, agent: Agent, ctx: RuntimeContext, state: AgentState, input_messages: list[Msg]
    ) -> None:
        """Run ``on_agent_state_ready`` in plan order; an exception propagates unchanged."""
        for _mw, hook in self._hooks[ExtensionPoint.ON_AGENT_STATE_READY]:
            result = hook(agent, ctx, state, input_messages)
            if inspect.isawaitable(result):
                # A coroutine here would never run; say so instead of dropping it.
                close = getattr(result, "close", None)
                if close is not None:
                    close()
                raise TypeError(
                    f"{_label(_mw)}.on_agent_state_ready() must be synchronous "
                    "(it returned an awaitable)"
                )
