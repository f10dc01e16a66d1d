"""MCP tools against a real server spawned over stdio (tests/tool/mcp_servers/toolbox.py)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

import pytest

from rx_agent import (
    DataBlock,
    McpToolSource,
    Msg,
    PermissionRule,
    ReActAgent,
    RequireUserConfirmEvent,
    RuntimeContext,
    ScriptedModel,
    TextBlock,
    Toolkit,
    ToolResultBlock,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultState,
    ToolResultTextDeltaEvent,
    ToolUseBlock,
    tool,
)
from rx_agent.testing import collect

from .mcp_servers.toolbox import PIXEL, build

pytestmark = pytest.mark.timeout(60)


def use(tool_name: str, call_id: str = "c1", /, **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock(id=call_id, name=tool_name, input=arguments)


def agent_with(source: McpToolSource, *script: Any, **register: Any) -> tuple[ReActAgent,
                                                                             ScriptedModel]:
    toolkit = Toolkit()
    toolkit.register_mcp(source, **register)
    model = ScriptedModel([*script, "done"])
    return ReActAgent(name="mcp", model=model, toolkit=toolkit, retry_backoff=(0.0, 0.0)), model


def last_result(model: ScriptedModel) -> ToolResultBlock:
    results = [b for m in model.calls[-1].messages for b in m.content
               if isinstance(b, ToolResultBlock)]
    return results[-1]


def of(events: list[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


# -- listing ------------------------------------------------------------------------------------


async def test_tools_keep_the_server_names_and_schemas_unchanged(
    stdio_source: McpToolSource,
) -> None:
    toolkit = Toolkit()
    toolkit.register_mcp(stdio_source)
    assert toolkit.names == [] and not stdio_source.connected  # nothing connects at register
    await toolkit.refresh()
    served = {t.name: t for t in await build(lambda _: None).list_tools()}
    assert toolkit.names == list(served)
    for schema in toolkit.schemas():
        assert schema["parameters"] == served[schema["name"]].input_schema
        assert schema["description"] == served[schema["name"]].description
    assert toolkit.get("add").concurrency_safe  # the server's readOnlyHint
    assert not toolkit.get("echo").concurrency_safe
    assert toolkit.get("add").source == "mcp toolbox"


async def test_prefix_include_and_exclude(stdio_source: McpToolSource) -> None:
    kit = Toolkit()
    kit.register_mcp(stdio_source, prefix="box", include=["a*", "echo", "slow"],
                     exclude=["slow"])
    await kit.refresh()
    assert kit.names == ["box_add", "box_echo"]
    assert await kit.get("box_add").fn(a=2, b=40) == "42"  # the server's name is called
    other = Toolkit()
    other.register_mcp(stdio_source, exclude=["*"])
    await other.refresh()
    assert other.names == []


def test_bad_registrations_say_what_is_wrong(stdio_source: McpToolSource) -> None:
    kit = Toolkit()
    with pytest.raises(TypeError, match="takes an McpToolSource"):
        kit.register_mcp("stdio:python server.py")
    with pytest.raises(TypeError, match="list of tool names"):
        kit.register_mcp(stdio_source, include="add")
    with pytest.raises(ValueError, match="prefix"):
        kit.register_mcp(stdio_source, prefix="no spaces")
    with pytest.raises(ValueError, match="permission"):
        kit.register_mcp(stdio_source, permission="maybe")  # type: ignore[arg-type]
    kit.register_mcp(stdio_source)
    with pytest.raises(ValueError, match="registered already"):
        kit.register_mcp(stdio_source)
    with pytest.raises(ValueError, match="needs a command"):
        McpToolSource.stdio("")
    with pytest.raises(ValueError, match="http"):
        McpToolSource.http("ftp://example")


async def test_a_name_taken_by_a_local_tool_fails_naming_both(
    stdio_source: McpToolSource,
) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Not the server's add."""
        return a - b

    kit = Toolkit([add])
    kit.register_mcp(stdio_source)
    with pytest.raises(ValueError, match=r"'add' is provided twice: by toolkit and by mcp toolbox"):
        await kit.refresh()


async def test_list_changed_refreshes_the_tools(stdio_source: McpToolSource) -> None:
    agent, model = agent_with(stdio_source, [use("grow", name="extra")], "grown",
                              [use("extra", text="hi")])
    async with agent:
        await agent.acall("grow")
        assert "extra" not in [t["name"] for t in model.calls[0].tools]
        await asyncio.sleep(0.1)  # the notification is on its way
        await agent.acall("use it")
    assert "extra" in [t["name"] for t in model.calls[2].tools]
    assert last_result(model).output == "extra: hi"


async def test_a_server_that_cannot_start_fails_the_call_naming_it(
    server_log: Any,
) -> None:
    source = McpToolSource.stdio(sys.executable, ["-c", "import sys; sys.exit(2)"],
                                 errlog=server_log, name="broken")
    agent, _ = agent_with(source)
    with pytest.raises(ConnectionError, match="MCP server broken"):
        await agent.acall("hi")


# -- results ------------------------------------------------------------------------------------


async def test_success_through_an_agent(stdio_source: McpToolSource, events: Any) -> None:
    agent, model = agent_with(stdio_source, [use("add", a=2, b=3)])
    async with agent:
        reply = await agent.acall("add")
    assert reply.text == "done"
    result = last_result(model)
    assert (result.output, result.state) == ("5", ToolResultState.SUCCESS)
    assert "called add 2 3" in events.lines()


async def test_a_tool_error_is_an_error_result(stdio_source: McpToolSource) -> None:
    agent, model = agent_with(stdio_source, [use("fail", reason="no disk")])
    async with agent:
        stream = agent.astream("fail")
        seen = [e async for e in stream]
    result = last_result(model)
    assert result.state is ToolResultState.ERROR
    assert "cannot do that: no disk" in str(result.output)
    assert of(seen, ToolResultEndEvent)[0].state is ToolResultState.ERROR


async def test_images_and_embedded_resources_become_blocks(stdio_source: McpToolSource) -> None:
    agent, model = agent_with(stdio_source, [use("picture")])
    async with agent:
        seen = [e async for e in agent.astream("picture")]
    assert last_result(model).output == [
        TextBlock(text="a picture"),
        DataBlock(media_type="image/png", data=PIXEL),
        TextBlock(text="the notes"),
        DataBlock(media_type="application/octet-stream", data=PIXEL),
    ]
    assert [e.delta.media_type for e in of(seen, ToolResultDataDeltaEvent)] == [
        "image/png", "application/octet-stream"]


async def test_progress_notifications_are_text_deltas_before_the_result(
    stdio_source: McpToolSource,
) -> None:
    agent, model = agent_with(stdio_source, [use("progress", steps=3)])
    async with agent:
        seen = [e async for e in agent.astream("go")]
    deltas = of(seen, ToolResultTextDeltaEvent)
    assert [d.delta for d in deltas] == ["[1/3] step 1\n", "[2/3] step 2\n", "[3/3] step 3\n",
                                         "3 steps done"]
    assert deltas[0].metadata["progress"] == {"progress": 1.0, "total": 3.0,
                                              "message": "step 1"}
    assert "progress" not in deltas[-1].metadata
    assert last_result(model).output == "3 steps done"  # the model reads the result only


# -- failures, cancellation, concurrency ----------------------------------------------------------


async def test_a_server_crash_mid_call_is_an_error_and_the_next_call_reconnects(
    stdio_source: McpToolSource, events: Any,
) -> None:
    agent, model = agent_with(stdio_source, [use("crash")], "crashed", [use("add", a=1, b=1)])
    async with agent:
        await agent.acall("crash")
        crashed = last_result(model)
        assert crashed.state is ToolResultState.ERROR
        assert "closed the connection" in str(crashed.output)
        assert "reconnects" in str(crashed.output)
        await agent.acall("again")
    assert last_result(model).output == "2"
    assert events.lines()[-1] == "called add 1 1"


def test_disposing_a_call_cancels_the_request_on_the_server(
    stdio_source: McpToolSource, events: Any,
) -> None:
    agent, _ = agent_with(stdio_source, [use("slow", seconds=30)])
    subscription = agent.stream("sleep").subscribe(on_error=lambda e: None)
    events.wait_for("started slow")
    subscription.dispose()
    events.wait_for("cancelled slow")  # notifications/cancelled reached the tool
    agent.close()


async def test_a_tool_timeout_cancels_the_request_on_the_server(
    stdio_source: McpToolSource, events: Any,
) -> None:
    agent, model = agent_with(stdio_source, [use("slow", seconds=30)], timeout=0.5)
    async with agent:
        await agent.acall("sleep")
    result = last_result(model)
    assert result.state is ToolResultState.ERROR and "0.5 s" in str(result.output)
    await asyncio.to_thread(events.wait_for, "cancelled slow")


async def test_twenty_concurrent_calls_share_one_connection(stdio_source: McpToolSource) -> None:
    calls = [use("pause", f"c{i}", seconds=0.5) for i in range(20)]
    agent, model = agent_with(stdio_source, calls, concurrency_safe=True)
    async with agent:
        started = time.monotonic()
        await agent.acall("many")
        elapsed = time.monotonic() - started
    results = [b for m in model.calls[-1].messages for b in m.content
               if isinstance(b, ToolResultBlock)]
    assert len(results) == 20
    # One server process saw all twenty in flight at once: one connection, no queueing.
    assert max(int(str(r.output)) for r in results) == 20
    assert elapsed < 10.0  # twenty in a row would take 10 s


# -- permissions ----------------------------------------------------------------------------------


async def test_permission_rules_apply_to_mcp_tools(stdio_source: McpToolSource,
                                                   events: Any) -> None:
    toolkit = Toolkit()
    toolkit.register_mcp(stdio_source, prefix="box")
    model = ScriptedModel([[use("box_add", a=1, b=2)], "done"])
    agent = ReActAgent(name="mcp", model=model, toolkit=toolkit,
                       permission_rules=[PermissionRule(pattern="box_*", decision="deny",
                                                        reason="no boxes")])
    async with agent:
        await agent.acall("add")
    result = last_result(model)
    assert result.state is ToolResultState.DENIED and "no boxes" in str(result.output)
    assert not any(line.startswith("called add") for line in events.lines())


async def test_register_mcp_permission_ask_pauses_for_confirmation(
    stdio_source: McpToolSource,
) -> None:
    agent, _ = agent_with(stdio_source, [use("echo", text="x")], permission="ask")
    async with agent:
        seen = [e async for e in agent.astream("echo")]
    (asked,) = of(seen, RequireUserConfirmEvent)
    assert [c.name for c in asked.tool_calls] == ["echo"]


# -- lifecycle ------------------------------------------------------------------------------------


async def test_async_with_closes_the_connection_and_it_reopens_on_use(
    stdio_source: McpToolSource,
) -> None:
    agent, _ = agent_with(stdio_source, [use("add", a=1, b=2)], "three", [use("add", a=3, b=4)])
    async with agent:
        await agent.acall("one")
        assert stdio_source.connected
    assert not stdio_source.connected
    await agent.acall("two")  # a closed source opens again when used again
    assert stdio_source.connected
    with pytest.raises(RuntimeError, match="aclose"):
        agent.close()  # would block this loop
    await agent.aclose()


def test_sync_calls_on_different_loops_share_one_connection(
    stdio_source: McpToolSource, events: Any,
) -> None:
    agent, model = agent_with(stdio_source, [use("add", a=1, b=2)], "ok", "no tool",
                              [use("add", a=5, b=5)])
    with agent:
        agent.call_sync("from the runtime's loop")
        before = _connection_id(stdio_source)
        asyncio.run(agent.acall("from a loop that then closes"))
        result: list[Msg] = []
        worker = threading.Thread(target=lambda: result.append(agent.call_sync("thread")))
        worker.start()
        worker.join(10)
        assert _connection_id(stdio_source) == before  # no reconnect
    assert not stdio_source.connected
    assert last_result(model).output == "10"


def _connection_id(source: McpToolSource) -> int:
    conn = source._conn
    assert conn is not None and not conn.dead
    return id(conn)


def test_close_is_idempotent_and_needs_no_connection(stdio_source: McpToolSource) -> None:
    agent, _ = agent_with(stdio_source)
    agent.close()
    agent.close()
    assert [e.type for e in collect(agent.stream("hi"), 10)][-1] == "agent_end"
    agent.close()
    agent.close()


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    package = sys.modules["rx_agent.tool"]  # (rx_agent.tool is the decorator)
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "rx_agent.tool._mcp_connection", raising=False)
    monkeypatch.delattr(package, "_mcp_connection", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'rx-agent\[mcp\]'"):
        McpToolSource.stdio("python", ["server.py"])


async def test_a_server_that_never_answers_the_handshake_times_out(server_log: Any) -> None:
    source = McpToolSource.stdio(sys.executable, ["-c", "import time; time.sleep(60)"],
                                 errlog=server_log, name="mute", connect_timeout=0.5)
    agent, _ = agent_with(source)
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=r"mute did not complete the handshake within 0.5 s"):
        await agent.acall("hi")
    assert time.monotonic() - started < 8  # the process was stopped, not waited for
    assert not source.connected


async def test_mcp_tools_join_a_toolkit_merged_with_plugin_tools(
    stdio_source: McpToolSource,
) -> None:
    from rx_agent import Plugin

    @tool
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    toolkit = Toolkit()
    toolkit.register_mcp(stdio_source, include=["echo"])
    model = ScriptedModel([[use("echo", "c1", text="hi"), use("shout", "c2", text="hi")],
                           "done"])
    agent = ReActAgent(name="mcp", model=model, toolkit=toolkit,
                       plugins=[Plugin("loud", tools=[shout])])
    assert agent.toolkit is not toolkit  # the merged copy keeps the MCP registration
    async with agent:
        await agent.acall("both")
        assert stdio_source.connected
    results = [b for m in model.calls[-1].messages for b in m.content
               if isinstance(b, ToolResultBlock)]
    assert [r.output for r in results] == ["hi", "HI"]
    assert sorted(t["name"] for t in model.calls[0].tools) == ["echo", "shout"]
    assert not stdio_source.connected  # closed through the merged toolkit


@pytest.mark.parametrize("mode", ["finish", "cancel"])
async def test_register_mcp_interrupt_lets_a_running_request_finish_or_cancels_it(
    stdio_source: McpToolSource, events: Any, mode: str,
) -> None:
    agent, _ = agent_with(stdio_source, [use("slow", seconds=0.5)], side_effect=True,
                          interrupt=mode)
    async with agent:
        ctx = RuntimeContext(session_id="s")
        reply = asyncio.ensure_future(agent.acall("sleep", ctx))
        await asyncio.to_thread(events.wait_for, "started slow")
        agent.interrupt(ctx)
        await reply
        assert (agent.toolkit.get("slow").side_effect,
                agent.toolkit.get("slow").interrupt) == (True, mode)
    (result,) = [b for m in ctx.agent_state.context for b in m.content
                 if isinstance(b, ToolResultBlock)]
    if mode == "finish":
        assert (result.state, result.output) == (ToolResultState.SUCCESS, "slept")
        assert "cancelled slow" not in events.lines()
    else:
        assert result.state is ToolResultState.INTERRUPTED
        await asyncio.to_thread(events.wait_for, "cancelled slow")
