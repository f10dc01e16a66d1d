"""The middleware interface: AgentScope Java's seven extension points, plus
AgentScope Python's ``on_compress_context``, each with a default.

Subclass :class:`MiddlewareBase` and override the hooks you need. Which hooks run is
decided by :meth:`MiddlewareBase.active_points` (a participation switch read once at
build time), not by which methods are overridden. What the runtime knows about each
point (its kind, input, names, how an answer is settled) is its row in
:mod:`._points`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

from reactivex import Observable

from ..context import AgentState, RuntimeContext
from ..event import AgentEvent
from ..message import Msg
from ._points import OPT_IN, ExtensionPoint
from .inputs import (
    ActingInput,
    AgentFinishOutcome,
    AgentInput,
    CompressContextInput,
    ModelCallInput,
    ReasoningInput,
)
from .types import Agent, Handler, Next

__all__ = ["OPT_IN", "Agent", "ExtensionPoint", "MiddlewareBase", "Next"]


class MiddlewareBase:
    """Base class for middlewares; every hook defaults to pass-through or no-op.

    Onion hooks (``on_agent``, ``on_reasoning``, ``on_acting``, ``on_model_call``) take
    ``(agent, ctx, input, next)`` and return an ``Observable[AgentEvent]``; call
    ``next(input)`` (or Java's ``next.apply(input)``) zero, one or several times and
    use any RxPY operator on its stream; ``next()`` without an argument passes the
    hook's own input. An ``async def`` onion hook is awaited when its stream is
    subscribed, then the Observable it returns is subscribed; one that is an async
    generator (AgentScope Python's form, ``async for e in next(input): yield e``) is
    run per subscription, and what it yields is its stream.
    ``on_system_prompt`` transforms the prompt (``str``, one-item Observable or
    awaitable). ``on_agent_state_ready`` is a notification (an ``async def`` one is
    awaited before the next participant runs); ``on_agent_finish`` may return an
    Observable (or awaitable) that is awaited.

    Every hook may also be written without ``ctx``, as some Java examples do
    (``on_model_call(self, agent, input, next)``): the plan detects the form once
    when the agent is built. ``order``, ``active_points`` and ``list_tools`` must stay methods.
    """

    def order(self) -> int:
        """Higher is outer; ties keep registration order. Default ``1``."""
        return 1

    def active_points(self) -> Collection[ExtensionPoint] | None:
        """The points this middleware takes part in; ``None`` (default) means all
        (``ON_COMPRESS_CONTEXT`` only when ``on_compress_context`` is overridden).

        Read once when the agent is built. An omitted point is never invoked even
        if its hook is overridden; an empty set keeps the middleware registered but
        silent.
        """
        return None

    def list_tools(self) -> Sequence[Callable[..., Any]]:
        """Tools this middleware brings (``@tool`` functions, ``Tool``s or plain
        functions); default none.

        Read once when the agent is built, like :meth:`active_points`: they join the
        agent's toolkit with the source ``"middleware ClassName"``, and a name that
        is already taken fails the build. Not on the run path.
        """
        return ()

    def on_agent(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: AgentInput,
        next: Handler[AgentInput],
    ) -> Observable[AgentEvent]:
        """Wraps a whole call; its output is what ``agent.stream()`` returns."""
        return next(input)

    def on_reasoning(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ReasoningInput,
        next: Handler[ReasoningInput],
    ) -> Observable[AgentEvent]:
        """Wraps one reasoning step (one per ReAct round)."""
        return next(input)

    def on_acting(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ActingInput,
        next: Handler[ActingInput],
    ) -> Observable[AgentEvent]:
        """Wraps the execution of one batch of tool calls."""
        return next(input)

    def on_model_call(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ModelCallInput,
        next: Handler[ModelCallInput],
    ) -> Observable[AgentEvent]:
        """Wraps one model API call (reasoning calls and the max-iterations summary)."""
        return next(input)

    def on_compress_context(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: CompressContextInput,
        next: Handler[CompressContextInput],
    ) -> Observable[AgentEvent]:
        """Wraps the context-compression step at the top of every ReAct round, before
        ``on_reasoning``. Pass ``input.with_(messages=...)`` to ``next`` to replace
        the session context (the core stores it and emits
        :class:`~rx_agent.ContextCompressedEvent`); a tool call and its result must
        stay together. Inactive unless a middleware takes part (see
        :class:`ExtensionPoint`)."""
        return next(input)

    def on_system_prompt(
        self, agent: Agent, ctx: RuntimeContext, current_prompt: str
    ) -> Observable[str] | str:
        """Transforms the system prompt once per call (left to right in plan order)."""
        return current_prompt

    def on_agent_state_ready(
        self, agent: Agent, ctx: RuntimeContext, state: AgentState, input_messages: list[Msg]
    ) -> Awaitable[None] | None:
        """Called once per subscription once ``state`` is bound, before the input is
        merged. ``input_messages`` is a private copy: in-place edits apply to the call.
        May be ``async def``: it is awaited before the next participant runs."""
        return None

    def on_agent_finish(
        self, agent: Agent, ctx: RuntimeContext, outcome: AgentFinishOutcome
    ) -> Observable[Any] | None:
        """Called after the result is known, before state is saved; may return an
        Observable (or awaitable) that is awaited before the caller is signalled."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
