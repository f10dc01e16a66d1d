"""The onion's layers: each calls one participant's hook around the layer inside it.

Built per call by :meth:`ExecutionPlan.wrap`. A layer checks the input it is handed
and the hook's return value, so a mistake in a middleware fails the stream with a
message naming it (the caller sees ``on_error``), never a crash inside the runtime.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import reactivex
from reactivex import Observable

from .._rx import DIRECT_TYPES, LeanMap, LeanObservable
from ..context import RuntimeContext
from ..event import AgentEvent
from ._explain import field_call
from ._forms import OWN_INPUT, BoundNext, awaiting
from ._points import SPECS, ExtensionPoint
from .types import Agent, Handler

__all__ = ["Checked", "Layer"]

InputT = TypeVar("InputT")


class Layer(Generic[InputT]):
    """One onion layer: calls ``hook(agent, ctx, input, inner)``.

    Checks the input handed to it and the hook's return value so that a mistake in a
    middleware fails the stream with a message naming the middleware, and turns a hook
    that raises into an erroring stream (the caller sees ``on_error``).
    """

    __slots__ = ("_agent", "_ctx", "_hook", "_inner", "_input_type", "_point", "_who", "own")

    def __init__(
        self,
        point: ExtensionPoint,
        who: str,
        hook: Callable[..., Observable[AgentEvent]],
        agent: Agent,
        ctx: RuntimeContext,
        inner: Layer[InputT] | Checked[InputT],
    ) -> None:
        self._point = point
        self._who = who
        self._hook = hook
        self._agent = agent
        self._ctx = ctx
        self._inner = inner
        self._input_type: type = inner._input_type  # the point's, read once per chain
        self.own: Any = OWN_INPUT  # see Checked.own

    def __call__(self, inp: InputT = OWN_INPUT) -> Observable[AgentEvent]:
        if type(inp) is not self._input_type:
            if inp is OWN_INPUT:
                inp = self.own
            if not isinstance(inp, self._input_type):
                return _wrong_input(self._point, self._input_type, inp)
        inner = self._inner
        # While the hook runs, ``next()`` without an argument passes its input on (two
        # stores per call; a per-call bound ``next`` would cost an object each time).
        inner.own = inp
        try:
            out = self._hook(self._agent, self._ctx, inp, inner)
        except Exception as exc:
            inner.own = OWN_INPUT
            return reactivex.throw(field_call(exc, f"{self._who}.{self._point.value}()"))
        inner.own = OWN_INPUT
        # Exact-type checks first: isinstance against RxPY's ABC is the slow path.
        kind = type(out)
        if kind is Observable:
            # An operator chain: the next layer out subscribes it the lean way (and a
            # failing dispose action of the chain is reported naming this hook).
            return LeanObservable(out, self)
        if kind is LeanMap:  # ops.map piped onto next(): the runtime's own map
            if out.named is None:  # type: ignore[attr-defined]  # a LeanMap (no cast(): a call)
                out.named = self  # type: ignore[attr-defined]
            return out
        if kind in DIRECT_TYPES or kind is LeanObservable:
            return out
        if not isinstance(out, Observable):
            if inspect.iscoroutine(out):
                # A plain def that returns a coroutine: await it on subscription (the
                # first subscription uses it, a re-subscription calls the hook again).
                return awaiting(self._coroutine_once(out, inp), self._who, self._point)
            return reactivex.throw(
                TypeError(
                    f"{self._who}.{self._point.value}() returned "
                    f"{type(out).__name__}, expected an Observable "
                    "(did it forget to `return next(input)`?)"
                )
            )
        return out

    def _coroutine_once(self, first: Any, inp: InputT) -> Callable[[], Any]:
        pending = [first]

        def start() -> Any:
            if pending:
                return pending.pop()
            return self._hook(self._agent, self._ctx, inp, BoundNext(self._inner, inp))

        return start

    # Java's ``next.apply(input)`` works as written.
    apply = __call__

    def __str__(self) -> str:
        return f"{self._who}.{self._point.value}()"


class Checked(Generic[InputT]):
    """The innermost ``next``: checks what the innermost middleware passes to the core."""

    __slots__ = ("_core", "_input_type", "_point", "own")

    def __init__(self, point: ExtensionPoint, core: Handler[InputT]) -> None:
        self._point = point
        self._core = core
        self._input_type: type = SPECS[point].input_type
        # The input of the hook running now, set by the layer outside around the hook
        # call: what ``next()`` without an argument passes on.
        self.own: Any = OWN_INPUT

    def __call__(self, inp: InputT = OWN_INPUT) -> Observable[AgentEvent]:
        if type(inp) is not self._input_type:
            if inp is OWN_INPUT:
                inp = self.own
            if not isinstance(inp, self._input_type):
                return _wrong_input(self._point, self._input_type, inp)
        try:
            return self._core(inp)
        except Exception as exc:
            return reactivex.throw(exc)

    apply = __call__


def _wrong_input(point: ExtensionPoint, expected: type, inp: Any) -> Observable[AgentEvent]:
    if inp is OWN_INPUT:
        problem = TypeError(
            f"{point.value}: next() was called without an input after the hook returned "
            "(in a callback or a deferred stream); there, pass it: next(input)"
        )
    else:
        problem = TypeError(
            f"{point.value}: next() was given {type(inp).__name__}, expected {expected.__name__}"
        )
    return reactivex.throw(problem)
