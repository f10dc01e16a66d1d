"""``agent.interrupt(ctx, msg)``: Java's interrupt with a message, recorded in the
context with the interrupted reply (issue #14, item 6)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import assert_no_orphan_tool_calls, make_agent

from rx_agent import (
    GenerateReason,
    Msg,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.session import SessionKey


async def test_the_message_is_stored_just_before_the_interrupted_reply() -> None:
    agent = make_agent(ScriptedModel([[f"w{i} " for i in range(20)], "next"], delay=0.02))
    ctx = RuntimeContext(session_id="s")
    task = asyncio.ensure_future(agent.acall("long answer please", ctx))
    await asyncio.sleep(0.1)
    assert agent.interrupt(ctx, "stop, answer in one word")
    msg = await asyncio.wait_for(task, 3)
    assert msg.generate_reason is GenerateReason.INTERRUPTED
    context = ctx.agent_state.context
    assert context[-1] is msg
    assert context[-2].role.value == "user"
    assert context[-2].text == "stop, answer in one word"
    # The next reply's model sees it.
    await asyncio.wait_for(agent.acall("go on", ctx), 3)
    seen = [m.text for m in agent.model.calls[-1].messages]  # type: ignore[attr-defined]
    assert "stop, answer in one word" in seen


def test_interrupting_a_paused_session_records_the_message_after_the_closed_calls() -> None:
    @tool(permission="ask")
    def delete_all() -> str:
        """Dangerous."""
        return "gone"

    agent = make_agent(ScriptedModel([[ToolUseBlock("d1", "delete_all", {})]]),
                       toolkit=Toolkit([delete_all]))
    ctx = RuntimeContext(session_id="s")
    paused = agent.call_sync("clean up", ctx)
    assert paused.generate_reason is GenerateReason.PERMISSION_ASKING
    assert agent.interrupt(ctx, Msg("user", "never mind"))
    state = agent.session_store.load(SessionKey("__anon__", "s"))
    assert state is not None
    assert state.pending is None
    assert_no_orphan_tool_calls(state.context)
    assert state.context[-1].text == "never mind"


def test_a_bad_interrupt_message_is_refused_before_anything_changes() -> None:
    agent = make_agent(ScriptedModel(["x"]))
    with pytest.raises(TypeError, match="msg must be a Msg or a str"):
        agent.interrupt(None, 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="surrogate"):
        agent.interrupt(None, "bad \ud800")
