"""MCP tools against the toolbox server over streamable HTTP on 127.0.0.1 (a subprocess)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from rx_agent import (
    McpToolSource,
    ReActAgent,
    ScriptedModel,
    Toolkit,
    ToolResultBlock,
    ToolResultState,
    ToolResultTextDeltaEvent,
    ToolUseBlock,
)

from .conftest import Events, HttpServer

pytestmark = pytest.mark.timeout(60)


def use(tool_name: str, call_id: str = "c1", /, **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock(id=call_id, name=tool_name, input=arguments)


def agent_with(source: McpToolSource, *script: Any, **register: Any) -> tuple[ReActAgent,
                                                                             ScriptedModel]:
    toolkit = Toolkit()
    toolkit.register_mcp(source, **register)
    model = ScriptedModel([*script, "done"])
    return ReActAgent(name="mcp", model=model, toolkit=toolkit, retry_backoff=(0.0, 0.0)), model


def results(model: ScriptedModel) -> list[ToolResultBlock]:
    return [b for m in model.calls[-1].messages for b in m.content
            if isinstance(b, ToolResultBlock)]


async def test_success_headers_and_progress(http_source: McpToolSource) -> None:
    agent, model = agent_with(http_source, [use("add", "c1", a=20, b=22),
                                            use("header", "c2", name="X-Test-Token"),
                                            use("progress", "c3", steps=2)])
    async with agent:
        seen = [e async for e in agent.astream("go")]
    assert [r.output for r in results(model)] == ["42", "t0ken", "2 steps done"]
    progress = [e.delta for e in seen if isinstance(e, ToolResultTextDeltaEvent)
                and "progress" in e.metadata]
    assert progress == ["[1/2] step 1\n", "[2/2] step 2\n"]


async def test_a_tool_error_is_an_error_result(http_source: McpToolSource) -> None:
    agent, model = agent_with(http_source, [use("fail", reason="quota")])
    async with agent:
        await agent.acall("fail")
    (result,) = results(model)
    assert result.state is ToolResultState.ERROR
    assert "cannot do that: quota" in str(result.output)


async def test_a_crash_mid_call_is_an_error_and_the_next_call_reconnects(
    http_server: HttpServer, http_source: McpToolSource,
) -> None:
    agent, model = agent_with(http_source, [use("crash")], "crashed", [use("add", a=2, b=2)])
    async with agent:
        await agent.acall("crash")
        (crashed,) = results(model)
        assert crashed.state is ToolResultState.ERROR
        assert "reconnects" in str(crashed.output)
        assert http_server.process is not None
        await asyncio.to_thread(http_server.process.wait, 10)
        await asyncio.to_thread(http_server.start)  # the server is back (same port)
        await agent.acall("again")
    assert results(model)[-1].output == "4"


def test_disposing_a_call_cancels_the_request_on_the_server(
    http_source: McpToolSource, events: Events,
) -> None:
    agent, _ = agent_with(http_source, [use("slow", seconds=30)])
    with agent:
        subscription = agent.stream("sleep").subscribe(on_error=lambda e: None)
        events.wait_for("started slow")
        subscription.dispose()
        events.wait_for("cancelled slow")


async def test_twenty_concurrent_calls_share_one_session(http_source: McpToolSource) -> None:
    calls = [use("pause", f"c{i}", seconds=0.5) for i in range(20)]
    agent, model = agent_with(http_source, calls, concurrency_safe=True)
    async with agent:
        started = time.monotonic()
        await agent.acall("many")
        elapsed = time.monotonic() - started
    found = results(model)
    assert len(found) == 20 and all(r.state is ToolResultState.SUCCESS for r in found)
    assert max(int(str(r.output)) for r in found) == 20
    assert elapsed < 10.0  # twenty in a row would take 10 s


async def test_list_changed_over_http(http_source: McpToolSource) -> None:
    toolkit = Toolkit()
    toolkit.register_mcp(http_source, prefix="web", include=["grow", "late*"])
    await toolkit.refresh()
    assert toolkit.names == ["web_grow"]
    assert await toolkit.get("web_grow").fn(name="late_tool") == "added late_tool"
    deadline = time.monotonic() + 5
    while "web_late_tool" not in toolkit.names:
        assert time.monotonic() < deadline, toolkit.names
        await asyncio.sleep(0.05)
        await toolkit.refresh()
    assert await toolkit.get("web_late_tool").fn(text="x") == "late_tool: x"
    await http_source.aclose()
