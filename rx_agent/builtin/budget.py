"""``ReplyBudgetControlMiddleware``: a weighted token budget for one reply.

Port of AgentScope Python's middleware of the same name. Each model call of a reply
costs ``input_token_weight * input_tokens + output_token_weight * output_tokens``
(from the call's ``ModelCallEndEvent.usage``). Once the reply has spent
``token_budget``, every later reasoning step of that reply runs with
``tool_choice="none"`` and a hint asking the model to wrap up, so the loop ends with
an answer instead of more tool calls.

The running total is per call: it lives in the call's :class:`RuntimeContext`, under
a key owned by the middleware instance, so a new reply starts from zero and one
instance can be shared by agents and concurrent calls.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

import reactivex
from reactivex import Observable
from reactivex import abc as rxabc

from ..context import RuntimeContext
from ..event import AgentEvent, HintBlockEvent, ModelCallEndEvent
from ..message import HintBlock, Msg, Role
from ..middleware import Agent, ExtensionPoint, Handler, MiddlewareBase, ReasoningInput

__all__ = ["DEFAULT_BUDGET_HINT", "BudgetUsage", "ReplyBudgetControlMiddleware"]

DEFAULT_BUDGET_HINT = (
    "The token budget for this reply is used up. Do not call any more tools. "
    "Give your final answer now, based on what you already know, and say briefly "
    "if anything is left unfinished."
)

BUDGET_METADATA_KEY = "rx_agent.budget"
"""``Msg.metadata`` key marking the hint message added to the model input."""

# Guards the first creation of a reply's BudgetUsage when two threads race for it.
_CREATE_LOCK = threading.Lock()


class BudgetUsage:
    """What one reply has spent so far (read it with ``middleware.usage(ctx)``)."""

    __slots__ = ("_lock", "exhausted_at_step", "model_calls", "spent")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spent = 0.0
        self.model_calls = 0
        self.exhausted_at_step: int | None = None
        """The reasoning step (``ReasoningInput.iteration``) that first ran restricted."""

    def add(self, cost: float) -> None:
        # Events of one call are serial, but a middleware may move them to another
        # thread; the lock keeps the sum exact either way.
        with self._lock:
            self.spent += cost
            self.model_calls += 1

    def __repr__(self) -> str:
        return (
            f"BudgetUsage(spent={self.spent:g}, model_calls={self.model_calls}, "
            f"exhausted_at_step={self.exhausted_at_step})"
        )


class ReplyBudgetControlMiddleware(MiddlewareBase):
    """Cap the weighted token cost of one reply; then force a final answer.

    Point: ``ON_REASONING``. Before each reasoning step, if the reply's weighted cost
    has reached ``token_budget``, the step runs with ``options.tool_choice = "none"``
    and ``hint`` appended to the model input as a user message holding a
    :class:`HintBlock` (model input only: the session context is not changed, so the
    hint does not follow the session into later replies). The first restricted step
    also emits a :class:`HintBlockEvent` so a UI can show why the agent stopped
    using tools. After each model call the step's usage is added to the total.

    Args:
        token_budget: the largest weighted cost a reply may spend (> 0).
        input_token_weight: multiplier for input (prompt) tokens.
        output_token_weight: multiplier for output (completion) tokens; usually the
            higher of the two, as output tokens cost more.
        hint: the text given to the model once the budget is spent.
    """

    def __init__(
        self,
        token_budget: float,
        input_token_weight: float = 1.0,
        output_token_weight: float = 1.0,
        hint: str = DEFAULT_BUDGET_HINT,
    ) -> None:
        for label, value in (
            ("token_budget", token_budget),
            ("input_token_weight", input_token_weight),
            ("output_token_weight", output_token_weight),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{label} must be a number, not {type(value).__name__}")
        if token_budget <= 0:
            raise ValueError(f"token_budget must be > 0, got {token_budget}")
        if input_token_weight < 0 or output_token_weight < 0:
            raise ValueError("token weights must be >= 0")
        if not isinstance(hint, str) or not hint.strip():
            raise ValueError("hint must be a non-blank str")
        self.token_budget = float(token_budget)
        self.input_token_weight = float(input_token_weight)
        self.output_token_weight = float(output_token_weight)
        self.hint = hint
        # One key per instance: two budgets on one agent keep separate totals.
        self._key = f"rx_agent.budget.{id(self):x}"

    def active_points(self) -> Collection[ExtensionPoint]:
        return frozenset({ExtensionPoint.ON_REASONING})

    def usage(self, ctx: RuntimeContext) -> BudgetUsage:
        """This reply's running total (created on first use)."""
        found = ctx.get(self._key)
        if isinstance(found, BudgetUsage):
            return found
        with _CREATE_LOCK:
            found = ctx.get(self._key)
            if not isinstance(found, BudgetUsage):
                found = BudgetUsage()
                ctx.put(self._key, found)
            return found

    def exhausted(self, ctx: RuntimeContext) -> bool:
        return self.usage(ctx).spent >= self.token_budget

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """The weighted cost of one model call."""
        return self.input_token_weight * input_tokens + self.output_token_weight * output_tokens

    def on_reasoning(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ReasoningInput,
        next: Handler[ReasoningInput],
    ) -> Observable[AgentEvent]:
        usage = self.usage(ctx)
        announce: Observable[AgentEvent] | None = None
        if usage.spent >= self.token_budget:
            hint_msg = Msg(
                role=Role.USER,
                content=[HintBlock(hint=self.hint)],
                metadata={BUDGET_METADATA_KEY: {"spent": usage.spent,
                                                "budget": self.token_budget}},
            )
            input = input.with_(
                messages=(*input.messages, hint_msg),
                options=input.options.with_(tool_choice="none"),
            )
            if usage.exhausted_at_step is None:
                usage.exhausted_at_step = input.iteration
                announce = reactivex.of(HintBlockEvent(hint=self.hint, source=agent.name))
        source = next(input)
        counted = self._count(source, usage)
        return counted if announce is None else reactivex.concat(announce, counted)

    def _count(self, source: Observable[AgentEvent], usage: BudgetUsage) -> Observable[AgentEvent]:
        def subscribe(
            observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
        ) -> rxabc.DisposableBase:
            def on_next(event: AgentEvent) -> None:
                if isinstance(event, ModelCallEndEvent):
                    reported = event.usage
                    if reported is not None:
                        usage.add(self.cost(reported.input_tokens, reported.output_tokens))
                observer.on_next(event)

            return source.subscribe(on_next, observer.on_error, observer.on_completed,
                                    scheduler=scheduler)

        return Observable(subscribe)

    def __repr__(self) -> str:
        return (
            f"ReplyBudgetControlMiddleware(token_budget={self.token_budget:g}, "
            f"input_token_weight={self.input_token_weight:g}, "
            f"output_token_weight={self.output_token_weight:g})"
        )
