"""A caller's context on Temporal: its attributes travel to the workflow's hooks and
to the tools' activities (issue #27, item 1: ``RuntimeContext`` semantics unchanged)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from rx_agent import (
    AgentResultEvent,
    ExtensionPoint,
    MiddlewareBase,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultBlock,
    ToolUseBlock,
)
from rx_agent.temporal import AgentWorker, TemporalAgent, connect

pytestmark = pytest.mark.timeout(120)


class _Tenant(MiddlewareBase):
    """A hook in the workflow: reads what the caller put, puts something of its own."""

    def __init__(self) -> None:
        self.saw: list[Any] = []

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_ACTING}

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        self.saw.append(ctx.get("tenant"))
        ctx.put("stamp", f"checked {ctx.get('tenant')}")
        return next(input)


async def whose(ctx: RuntimeContext) -> str:
    """Say whose call this is."""
    return f"{ctx.get('tenant')} / {ctx.get('stamp')} / {ctx.get('limits')}"


class _Local:
    """An object that cannot travel (not JSON)."""


async def test_the_callers_attributes_reach_the_workflows_hooks_and_the_tools(
    temporal_address: str, caplog: pytest.LogCaptureFixture,
) -> None:
    hook = _Tenant()
    agent = ReActAgent(
        name="ctx", model=ScriptedModel([[ToolUseBlock(id="t1", name="whose", input={})],
                                         ["Done."]]),
        toolkit=Toolkit([whose]), middlewares=[hook])
    client = await connect(temporal_address)
    queue = f"ctx-{time.time_ns()}"
    async with AgentWorker(client, queue, [agent]):
        remote = TemporalAgent(client, "ctx", queue)
        ctx = RuntimeContext(session_id="c", attributes={
            "tenant": "acme", "limits": {"tokens": 5}, "conn": _Local(), _Local: _Local()})
        with caplog.at_level(logging.WARNING, logger="rx_agent.temporal"):
            events = [e async for e in remote.astream("whose?", ctx)]
    assert next(e for e in events if isinstance(e, AgentResultEvent)).result.text == "Done."
    assert set(hook.saw) == {"acme"}  # (a replay of the workflow runs its hooks again)
    tool = next(m for m in ctx.agent_state.context if m.role == "tool")  # type: ignore[union-attr]
    block = tool.content[0]
    assert isinstance(block, ToolResultBlock)
    assert block.output == "acme / checked acme / {'tokens': 5}"
    # What cannot travel is named, not dropped without a word.
    warned = [r.getMessage() for r in caplog.records if "do not travel" in r.getMessage()]
    assert len(warned) == 1 and "conn" in warned[0] and "_Local" in warned[0]
