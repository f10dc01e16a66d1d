"""ReplyBudgetControlMiddleware: a weighted token budget per reply."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rx_agent import (
    ExtensionPoint,
    HintBlock,
    HintBlockEvent,
    Msg,
    ReplyBudgetControlMiddleware,
    RuntimeContext,
    ToolUseBlock,
)
from rx_agent.builtin import DEFAULT_BUDGET_HINT
from rx_agent.message import ChatUsage

from .conftest import FixedUsageModel, call, events_of, make_agent


def adds(n: int) -> list[Any]:
    """n rounds that call the add tool, then an answer."""
    return [[ToolUseBlock(f"c{i}", "add", {"a": i, "b": 1})] for i in range(n)] + ["done"]


def hints(msg_list: tuple[Msg, ...]) -> list[str]:
    return [b.hint for m in msg_list for b in m.content if isinstance(b, HintBlock)]


USAGE = ChatUsage(input_tokens=100, output_tokens=10)


async def test_active_point_is_reasoning() -> None:
    assert set(ReplyBudgetControlMiddleware(10).active_points()) == {ExtensionPoint.ON_REASONING}


async def test_under_budget_nothing_changes() -> None:
    model = FixedUsageModel(adds(2), USAGE)
    agent = make_agent(model, middlewares=[ReplyBudgetControlMiddleware(10_000)])
    events = await events_of(agent)
    assert [c.options.tool_choice for c in model.calls] == [None, None, None]
    assert not any(hints(c.messages) for c in model.calls)
    assert not any(isinstance(e, HintBlockEvent) for e in events)


async def test_once_spent_the_next_step_runs_without_tools_and_with_a_hint() -> None:
    # Each call costs 100 + 10 = 110; the budget of 200 is reached after two calls.
    model = FixedUsageModel(adds(3), USAGE)
    agent = make_agent(model, middlewares=[ReplyBudgetControlMiddleware(200)], max_iters=6)
    ctx = RuntimeContext(session_id="budget")

    events = await events_of(agent, "go", ctx)

    assert [c.options.tool_choice for c in model.calls] == [None, None, "none", "none"]
    assert [len(hints(c.messages)) for c in model.calls] == [0, 0, 1, 1]
    assert hints(model.calls[2].messages) == [DEFAULT_BUDGET_HINT]
    last = model.calls[2].messages[-1]
    assert last.role.value == "user" and last.metadata is not None
    assert last.metadata["rx_agent.budget"] == {"spent": 220.0, "budget": 200.0}
    # Announced once, at the first restricted step.
    announced = [e for e in events if isinstance(e, HintBlockEvent)]
    assert [e.hint for e in announced] == [DEFAULT_BUDGET_HINT]
    # Model input only: the session context holds no hint.
    assert ctx.agent_state is not None
    assert not any(isinstance(b, HintBlock) for m in ctx.agent_state.context for b in m.content)


async def test_weights_apply_to_input_and_output_tokens() -> None:
    # input 100 * 0.5 + output 10 * 6 = 110 per call: still two calls before 200.
    weighted = ReplyBudgetControlMiddleware(200, input_token_weight=0.5, output_token_weight=6)
    assert weighted.cost(100, 10) == 110
    model = FixedUsageModel(adds(3), USAGE)
    await events_of(make_agent(model, middlewares=[weighted]))
    assert [c.options.tool_choice for c in model.calls] == [None, None, "none", "none"]

    # Output tokens free: 100 * 1 per call, budget 250 -> three calls before restriction.
    cheap = ReplyBudgetControlMiddleware(250, output_token_weight=0)
    model = FixedUsageModel(adds(3), USAGE)
    await events_of(make_agent(model, middlewares=[cheap]))
    assert [c.options.tool_choice for c in model.calls] == [None, None, None, "none"]


async def test_the_budget_is_per_reply() -> None:
    budget = ReplyBudgetControlMiddleware(100)
    model = FixedUsageModel([*adds(1), *adds(1)], USAGE)
    agent = make_agent(model, middlewares=[budget])

    await call(agent, "first", RuntimeContext(session_id="s"))
    await call(agent, "second", RuntimeContext(session_id="s"))

    # Each reply: one free call (110), then restricted.
    assert [c.options.tool_choice for c in model.calls] == [None, "none", None, "none"]


async def test_a_custom_hint() -> None:
    model = FixedUsageModel(adds(1), USAGE)
    agent = make_agent(model, middlewares=[ReplyBudgetControlMiddleware(1, hint="Wrap up.")])
    await call(agent)
    assert hints(model.calls[1].messages) == ["Wrap up."]


async def test_two_instances_keep_separate_totals() -> None:
    tight = ReplyBudgetControlMiddleware(100, hint="tight")
    loose = ReplyBudgetControlMiddleware(1000, hint="loose")
    model = FixedUsageModel(adds(1), USAGE)
    await call(make_agent(model, middlewares=[tight, loose]))
    assert hints(model.calls[1].messages) == ["tight"]


async def test_a_shared_instance_keeps_concurrent_calls_apart() -> None:
    budget = ReplyBudgetControlMiddleware(200)

    async def one(i: int) -> list[str | None]:
        model = FixedUsageModel(adds(3), USAGE, delay=0.002)
        agent = make_agent(model, name=f"a{i}", middlewares=[budget])
        await call(agent, "go", RuntimeContext(session_id=f"s{i}"))
        return [c.options.tool_choice for c in model.calls]

    outcomes = await asyncio.gather(*(one(i) for i in range(8)))
    assert outcomes == [[None, None, "none", "none"]] * 8


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"token_budget": 0}, ValueError),
        ({"token_budget": -5}, ValueError),
        ({"token_budget": "100"}, TypeError),
        ({"token_budget": 10, "input_token_weight": -1}, ValueError),
        ({"token_budget": 10, "hint": "  "}, ValueError),
    ],
)
def test_arguments_are_checked(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        ReplyBudgetControlMiddleware(**kwargs)


def test_usage_lives_in_the_runtime_context() -> None:
    budget = ReplyBudgetControlMiddleware(10)
    ctx = RuntimeContext()
    usage = budget.usage(ctx)
    assert budget.usage(ctx) is usage
    assert budget.usage(RuntimeContext()) is not usage
    usage.add(budget.cost(5, 5))
    assert budget.exhausted(ctx)
    assert "spent=10" in repr(usage)
