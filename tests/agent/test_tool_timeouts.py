"""Tool execution timeouts, per tool and agent-wide (issue #14, item 5; Java's
ReActAgentTimeoutTest): a timed-out call is cancelled, the model sees an error
result, the loop goes on."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from conftest import make_agent, tool_results

from rx_agent import (
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultState,
    ToolUseBlock,
    tool,
)


def _slow_kit(seen: list[str], *, timeout: float | None = None, sleep: float = 5) -> Toolkit:
    @tool(timeout=timeout)
    async def slow() -> str:
        """Takes long."""
        try:
            await asyncio.sleep(sleep)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "late"

    @tool
    def quick() -> str:
        """Answers at once."""
        return "quick"

    return Toolkit([slow, quick])


def _script() -> list[Any]:
    return [[ToolUseBlock("s1", "slow", {}), ToolUseBlock("q1", "quick", {})], "after"]


async def test_a_tool_past_its_timeout_is_cancelled_and_the_loop_goes_on() -> None:
    seen: list[str] = []
    model = ScriptedModel(_script())
    agent = make_agent(model, toolkit=_slow_kit(seen, timeout=0.1))
    ctx = RuntimeContext(session_id="s")
    start = time.perf_counter()
    msg = await asyncio.wait_for(agent.acall("go", ctx), 3)
    assert time.perf_counter() - start < 1.5
    assert msg.text == "after"
    assert seen == ["cancelled"]
    slow, quick = tool_results(ctx.agent_state.context)
    assert slow.state is ToolResultState.ERROR
    assert "did not finish within 0.1 s" in slow.text
    assert quick.text == "quick"
    # The model saw the error result in its next round.
    assert any("did not finish" in str(m.content) for m in model.calls[1].messages)


async def test_the_agent_wide_default_applies_to_tools_without_their_own() -> None:
    seen: list[str] = []
    agent = make_agent(ScriptedModel(_script()), toolkit=_slow_kit(seen), tool_timeout=0.1)
    ctx = RuntimeContext(session_id="s")
    msg = await asyncio.wait_for(agent.acall("go", ctx), 3)
    assert msg.text == "after"
    assert seen == ["cancelled"]
    assert tool_results(ctx.agent_state.context)[0].state is ToolResultState.ERROR


async def test_a_tool_timeout_beats_the_agent_default() -> None:
    seen: list[str] = []
    agent = make_agent(ScriptedModel(_script()), toolkit=_slow_kit(seen, timeout=2, sleep=0.2),
                       tool_timeout=0.05)
    ctx = RuntimeContext(session_id="s")
    await asyncio.wait_for(agent.acall("go", ctx), 3)
    assert seen == []
    assert tool_results(ctx.agent_state.context)[0].text == "late"


def test_a_sync_tool_past_its_timeout_gets_an_error_result_without_blocking() -> None:
    @tool(timeout=0.1)
    def stuck() -> str:
        """Blocks its thread."""
        time.sleep(0.6)
        return "too late"

    agent = make_agent(ScriptedModel([[ToolUseBlock("t1", "stuck", {})], "after"]),
                       toolkit=Toolkit([stuck]))
    ctx = RuntimeContext(session_id="s")
    start = time.perf_counter()
    assert agent.call_sync("go", ctx).text == "after"
    assert time.perf_counter() - start < 0.5
    [result] = tool_results(ctx.agent_state.context)
    assert result.state is ToolResultState.ERROR


async def test_a_tool_raising_timeout_error_itself_is_an_ordinary_failure() -> None:
    @tool(timeout=5)
    async def flaky() -> str:
        """Times out on its own."""
        raise TimeoutError("upstream took too long")

    agent = make_agent(ScriptedModel([[ToolUseBlock("f1", "flaky", {})], "after"]),
                       toolkit=Toolkit([flaky]))
    ctx = RuntimeContext(session_id="s")
    await asyncio.wait_for(agent.acall("go", ctx), 3)
    [result] = tool_results(ctx.agent_state.context)
    assert "raised TimeoutError: upstream took too long" in result.text


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "5"])
def test_bad_timeouts_are_refused(bad: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        tool(timeout=bad)(lambda: None)
    with pytest.raises((ValueError, TypeError)):
        ReActAgent.builder().tool_timeout(bad)
