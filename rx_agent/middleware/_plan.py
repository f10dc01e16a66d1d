"""The frozen execution plan: who takes part at each point, in which order.

Built once when the agent is built. A point with no participants builds no wrapper:
the core handler is called directly. The plan makes every hook call: the onion
(:mod:`._layers`), the transformer and the notifications (:mod:`._notify`). What it
knows about each point is the point's row in :mod:`._points`.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Awaitable, Collection, Iterable, Sequence
from typing import Any, NoReturn, TypeVar

from ..context import AgentState, RuntimeContext
from ..message import Msg
from . import _explain, _notify
from ._forms import FULL, AsyncHook, PlanError, form, without_ctx
from ._generators import AsyncGenHook
from ._layers import Checked, Layer
from ._points import SPECS, ExtensionPoint, PointKind
from .base import MiddlewareBase
from .types import Agent, Handler

__all__ = ["ExecutionPlan", "PlanError"]

InputT = TypeVar("InputT")

_ONION = PointKind.ONION


def _label(mw: MiddlewareBase) -> str:
    return type(mw).__name__


class ExecutionPlan:
    """Participants per extension point, outermost first, frozen at build time.

    ``layered`` is the frozenset of points with a hook to run: at an onion point, a
    layer :meth:`wrap` builds (a participant that kept the default hook builds none);
    at the other points, any participant. ``hooked`` adds the points whose step
    carries a layered nested point's stream (the reasoning step, when only
    ``on_model_call`` is hooked): the points whose step stream left a hook."""

    __slots__ = (
        "_hook_labels",
        "_hooks",
        "_labels",
        "_middlewares",
        "_orders",
        "_participants",
        "_positions",
        "hooked",
        "layered",
    )

    def __init__(self, middlewares: Iterable[MiddlewareBase]) -> None:
        registered = list(middlewares)
        for i, mw in enumerate(registered):
            if not isinstance(mw, MiddlewareBase):
                raise PlanError(f"middleware #{i} is {_describe_non_middleware(mw)}")
        for mw in registered:
            self._check_class(mw)
        orders: list[int] = []
        for mw in registered:
            value = mw.order()
            if not isinstance(value, int) or isinstance(value, bool):
                raise PlanError(f"{_label(mw)}.order() must return an int, got {value!r}")
            orders.append(value)
        # Python's sort is stable: equal orders keep registration order.
        ranked = sorted(range(len(registered)), key=lambda i: -orders[i])
        self._middlewares: tuple[MiddlewareBase, ...] = tuple(registered[i] for i in ranked)
        self._orders: tuple[int, ...] = tuple(orders[i] for i in ranked)
        registration_labels = _labels(registered)
        self._labels: tuple[str, ...] = tuple(registration_labels[i] for i in ranked)

        positions: dict[ExtensionPoint, list[int]] = {p: [] for p in SPECS}
        for at, mw in enumerate(self._middlewares):
            for point in self._read_points(mw):
                positions[point].append(at)
        self._positions: dict[ExtensionPoint, tuple[int, ...]] = {
            p: tuple(ats) for p, ats in positions.items()
        }
        self._participants: dict[ExtensionPoint, tuple[MiddlewareBase, ...]] = {
            p: tuple(self._middlewares[at] for at in ats) for p, ats in self._positions.items()
        }
        # Bound hook methods, looked up and checked once. A participant that kept the
        # default of an onion hook is a pure pass-through: it stays a participant but
        # builds no layer (the default only returns next(input)). Onion entries carry
        # the participant's label (for error messages), the others the middleware.
        self._hooks: dict[ExtensionPoint, tuple[tuple[Any, Any], ...]] = {}
        self._hook_labels: dict[ExtensionPoint, tuple[str, ...]] = {}
        for point, ats in self._positions.items():
            entries: list[tuple[Any, Any]] = []
            labels: list[str] = []
            onion, name = SPECS[point].kind is _ONION, point.value
            default = getattr(MiddlewareBase, name, None)  # None: a point without one
            for at in ats:
                mw, label = self._middlewares[at], self._labels[at]
                if getattr(type(mw), name, None) is default and \
                        name not in getattr(mw, "__dict__", ()):
                    if onion or default is None:
                        continue
                    hook = getattr(mw, name)  # the base class's own: nothing to check
                else:
                    hook = self._prepare(mw, label, point)
                entries.append((label, hook) if onion else (mw, hook))
                labels.append(label)
            self._hooks[point] = tuple(entries)
            self._hook_labels[point] = tuple(labels)
        # The points with a hook to run (see the class docstring); read as
        # ``point in plan.layered`` when a call starts (no method call per point).
        self.layered: frozenset[ExtensionPoint] = frozenset(
            point for point, entries in self._hooks.items() if entries)
        self.hooked: frozenset[ExtensionPoint] = self.layered | {
            point for point, spec in SPECS.items() if spec.nested in self.layered}

    @staticmethod
    def _check_class(mw: MiddlewareBase) -> None:
        """Slips a port makes that would otherwise fail late or silently."""
        cls = type(mw)
        # Java method names a port may keep by mistake: they would never be called.
        for spec in SPECS.values():
            if hasattr(cls, spec.java):
                _refuse_java(cls, spec.java, spec.point.value)
        if hasattr(cls, "activePoints"):
            _refuse_java(cls, "activePoints", "active_points")
        for spec in SPECS.values():
            other = spec.python
            if other is not None and hasattr(cls, other) and other != spec.point.value:
                raise PlanError(
                    f"{cls.__name__}.{other} is AgentScope Python's name and would never be "
                    f"called; did you mean `{spec.point.value}`? (it {spec.summary}, as "
                    f"`{other}` does)"
                )
        for name, signature in (
            ("order", "def order(self) -> int"),
            ("active_points", "def active_points(self) -> Collection[ExtensionPoint] | None"),
        ):
            value = getattr(mw, name)
            if not callable(value):
                raise PlanError(
                    f"{cls.__name__}.{name} must be a method `{signature}`, "
                    f"got {type(value).__name__} {value!r}"
                )

    @staticmethod
    def _prepare(mw: MiddlewareBase, label: str, point: ExtensionPoint) -> Any:
        """The bound hook, adapted once to the form the runtime calls."""
        hook = getattr(mw, point.value)
        if not callable(hook):
            raise PlanError(
                f"{label}.{point.value} must be a method, got {type(hook).__name__} {hook!r}"
            )
        adapted = hook if form(label, point, hook) == FULL else without_ctx(hook)
        spec = SPECS[point]
        if inspect.isasyncgenfunction(hook):
            if spec.kind is not _ONION:
                raise PlanError(
                    f"{label}.{point.value} is an async generator, but only onion hooks "
                    f"yield events: write it as `async def` without `yield`, returning "
                    f"{spec.returns}"
                )
            return AsyncGenHook(adapted, label, point)
        if spec.kind is _ONION and inspect.iscoroutinefunction(hook):
            adapted = AsyncHook(adapted, label, point)
        return adapted

    @staticmethod
    def _read_points(mw: MiddlewareBase) -> frozenset[ExtensionPoint]:
        declared = mw.active_points()  # read exactly once
        if declared is None:
            return frozenset(
                p for p, spec in SPECS.items()
                if not spec.opt_in or _overrides(mw, p)
            )
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

    def has_layers(self, point: ExtensionPoint) -> bool:
        """Whether ``wrap(point, ...)`` builds any layer (a participant that kept the
        default onion hook builds none): without one the core's stream is the point's."""
        return point in self.layered

    def labels(self, point: ExtensionPoint | None = None) -> tuple[str, ...]:
        """Display names of the participants at ``point`` (of every middleware when
        ``None``), in plan order: the class name, numbered ``Name#1``, ``Name#2`` in
        registration order when one class name appears more than once."""
        if point is None:
            return self._labels
        return tuple(self._labels[at] for at in self._positions[point])

    def orders(self, point: ExtensionPoint | None = None) -> tuple[int, ...]:
        """The ``order()`` values read at build time, parallel to :meth:`labels`."""
        if point is None:
            return self._orders
        return tuple(self._orders[at] for at in self._positions[point])

    def describe(self) -> str:
        """One line per point: participants outermost first, with their order values."""
        width = max(len(p.value) for p in SPECS)
        lines = []
        for point in self._shown_points():
            shown = " -> ".join(
                f"{self._labels[at]}({self._orders[at]})" for at in self._positions[point]
            )
            lines.append(f"{point.value:<{width}}  {shown or '-'}")
        return "\n".join(lines)

    def to_mermaid(self) -> str:
        """The plan as a Mermaid flowchart (one subgraph per point)."""
        out = ["flowchart TD"]
        for point in self._shown_points():
            out.append(f"  subgraph {point.value}")
            prev = f"{point.value}_in"
            out.append(f'    {prev}(["{point.value}"])')
            for i, at in enumerate(self._positions[point]):
                node = f"{point.value}_{i}"
                out.append(f'    {node}["{self._labels[at]} (order {self._orders[at]})"]')
                out.append(f"    {prev} --> {node}")
                prev = node
            if point.kind == "onion":
                out.append(f'    {point.value}_core[["core"]]')
                out.append(f"    {prev} --> {point.value}_core")
            out.append("  end")
        return "\n".join(out)

    def _shown_points(self) -> list[ExtensionPoint]:
        # A Java port's plan prints as it did: a point beyond Java's seven shows only
        # when somebody takes part in it.
        return [p for p, spec in SPECS.items() if not spec.opt_in or self._positions[p]]

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
        core: Handler[InputT],
    ) -> Handler[InputT]:
        """The onion for ``point`` around ``core``; ``core`` itself when nobody takes part."""
        hooks = self._hooks[point]
        if not hooks:
            return core
        handler: Layer[InputT] | Checked[InputT] = Checked(point, core)
        for label, hook in reversed(hooks):
            handler = Layer(point, label, hook, agent, ctx, handler)
        return handler

    def not_an_event(self, point: ExtensionPoint, item: Any) -> TypeError:
        """The error for ``item``, not an ``AgentEvent``, leaving the ``point`` chain:
        it names the middlewares with a hook there. A step's check also sees what left
        the point nested in it (the reasoning step's, ``on_model_call``): without a
        hook at ``point``, that is where it came from."""
        nested = SPECS[point].nested
        if nested is not None and not self._hooks[point]:
            point = nested
        return _explain.not_an_event(point.value, self._hook_labels[point], item)

    def hooks(self, point: ExtensionPoint) -> Sequence[tuple[Any, Any]]:
        """The hooks the plan calls at ``point``, outermost first, each adapted once to
        the runtime's calling form: ``(label, hook)`` at an onion point (a participant
        that kept the default builds none), ``(middleware, hook)`` at the others."""
        return self._hooks[point]

    def finish_hooks(self) -> Sequence[tuple[MiddlewareBase, Any]]:
        return self._hooks[ExtensionPoint.ON_AGENT_FINISH]

    async def system_prompt(self, agent: Agent, ctx: RuntimeContext, base: str) -> str:
        """``base.strip()`` passed through ``on_system_prompt`` left to right in plan
        order; each hook gives a ``str``, a one-item ``Observable[str]`` or an awaitable."""
        point = ExtensionPoint.ON_SYSTEM_PROMPT
        return await _notify.system_prompt(self._hooks[point], self._hook_labels[point],
                                           agent, ctx, base)

    def notify_state_ready(
        self, agent: Agent, ctx: RuntimeContext, state: AgentState, input_messages: list[Msg]
    ) -> Awaitable[None]:
        """Run ``on_agent_state_ready`` in plan order (see :func:`._notify.notify_state_ready`:
        the result must be awaited)."""
        return _notify.notify_state_ready(self._hooks[ExtensionPoint.ON_AGENT_STATE_READY],
                                          agent, ctx, state, input_messages)

    async def notify_finish(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        result: Msg | None,
        error: BaseException | None,
    ) -> BaseException | None:
        """Run ``on_agent_finish`` in plan order; the call's error (``error``, or the
        first finish hook's own)."""
        point = ExtensionPoint.ON_AGENT_FINISH
        return await _notify.notify_finish(self._hooks[point], self._hook_labels[point],
                                           agent, ctx, result, error)


def _overrides(mw: MiddlewareBase, point: ExtensionPoint) -> bool:
    name = point.value
    return getattr(type(mw), name, None) is not getattr(MiddlewareBase, name, None) or \
        name in getattr(mw, "__dict__", ())


def _refuse_java(cls: type, java: str, python: str) -> NoReturn:
    raise PlanError(
        f"{cls.__name__}.{java} is Java's name and would never be called; "
        f"name the method `{python}`"
    )


def _labels(registered: Sequence[MiddlewareBase]) -> list[str]:
    """Class names, numbered by registration position when a name repeats."""
    names = [_label(mw) for mw in registered]
    totals = Counter(names)
    seen: Counter[str] = Counter()
    out = []
    for name in names:
        if totals[name] > 1:
            seen[name] += 1
            out.append(f"{name}#{seen[name]}")
        else:
            out.append(name)
    return out


def _describe_non_middleware(value: object) -> str:
    if isinstance(value, type) and issubclass(value, MiddlewareBase):
        return f"the class {value.__name__}, not an instance (write {value.__name__}())"
    if isinstance(value, str):
        return f"a str ({value!r}), not a MiddlewareBase instance"
    return f"a {type(value).__name__}, not a MiddlewareBase instance"
