"""The types hook signatures are written in, named once (as Starlette's ``types.py``).

The middleware layer sits below models, tools and the agent, so it describes what a
hook may rely on about them as protocols: a :class:`ChatModel` satisfies
:class:`ModelLike`, a :class:`Toolkit` :class:`ToolkitLike`, an :class:`ExecutionPlan`
:class:`PlanLike`, and a ``ReActAgent`` :class:`Agent`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeAlias, TypeVar

from reactivex import Observable

from ..context import RuntimeContext
from ..event import AgentEvent
from ..message import Msg
from ..options import GenerateOptions

__all__ = [
    "Agent",
    "Handler",
    "ModelLike",
    "Next",
    "PlanLike",
    "ToolkitLike",
    "check_model_like",
]

InputT = TypeVar("InputT")

Handler: TypeAlias = Callable[[InputT], Observable[AgentEvent]]
"""An onion layer seen from outside: ``handler(input)`` returns that layer's events.
``next`` in a hook is a ``Handler`` of the point's input record."""

Next: TypeAlias = Callable[[Any], Observable[AgentEvent]]
"""``next(input)`` enters the next layer and returns its event stream."""


class ModelLike(Protocol):
    """What the middleware layer uses of a chat model (``ChatModel`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def provider(self) -> str: ...

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[Any]: ...


def check_model_like(label: str, model: object) -> None:
    """Refuse what cannot serve as a chat model here (the built-ins take any object
    with ``stream()``, as the runtime's middleware inputs do)."""
    if not callable(getattr(model, "stream", None)):
        raise TypeError(f"{label} must be a ChatModel, got {type(model).__name__}")


class ToolkitLike(Protocol):
    """What hooks may read of the agent's toolkit (``Toolkit`` has it)."""

    @property
    def names(self) -> list[str]: ...

    def schemas(self) -> list[dict[str, Any]]: ...

    def get(self, name: str) -> Any: ...


class PlanLike(Protocol):
    """What hooks may read of the agent's execution plan (``ExecutionPlan`` has it)."""

    def describe(self) -> str: ...

    def participants(self, point: Any) -> tuple[Any, ...]: ...


class Agent(Protocol):
    """What hooks may rely on about the agent they run in."""

    @property
    def name(self) -> str: ...
    @property
    def model(self) -> ModelLike: ...
    @property
    def toolkit(self) -> ToolkitLike: ...
    @property
    def plan(self) -> PlanLike: ...
    def interrupt(self, ctx: RuntimeContext | None = None) -> bool: ...
