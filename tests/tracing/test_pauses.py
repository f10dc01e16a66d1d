"""Replies that pause (a permission ask, external execution) and the calls that resume
them: the pending calls on the paused ``invoke_agent`` span, the answered reply on the
resumed one, and a compensating ``execute_tool`` span for each external result."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from rx_agent import (
    ConfirmResult,
    ExternalExecutionResultEvent,
    Msg,
    OtelTracingMiddleware,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
    UserConfirmResultEvent,
)
from rx_agent.message import GenerateReason

from .conftest import Recorder, attrs


def wipe(path: str) -> str:
    """Delete a path."""
    return f"wiped {path}"


def deploy(version: str) -> str:
    """Deploy a version (runs on the operator's machine)."""
    raise AssertionError("an external tool never runs in the agent")


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def toolkit() -> Toolkit:
    kit = Toolkit()
    kit.register_tool(wipe, permission="ask")
    kit.register_tool(deploy, external=True)
    kit.register_tool(add)
    return kit


def make_agent(script: list[Any], recorder: Recorder, **kwargs: Any) -> ReActAgent:
    return ReActAgent(name="ops", model=ScriptedModel(script), toolkit=toolkit(),
                      middlewares=[OtelTracingMiddleware(recorder.provider, **kwargs)])


async def run(agent: ReActAgent, msgs: Any, ctx: RuntimeContext) -> Msg:
    return await asyncio.wait_for(agent.acall(msgs, ctx), 5)


def agent_spans(recorder: Recorder) -> list[ReadableSpan]:
    return sorted(recorder.named("invoke_agent"), key=lambda s: s.start_time or 0)


def external_spans(recorder: Recorder) -> list[ReadableSpan]:
    return [s for s in recorder.named("execute_tool") if attrs(s).get("rx_agent.tool.external")]


async def test_a_permission_ask_records_the_pending_calls(recorder: Recorder) -> None:
    agent = make_agent([[ToolUseBlock("c1", "wipe", {"path": "/a"}),
                         ToolUseBlock("c2", "wipe", {"path": "/b"})], "wiped both"], recorder)
    ctx = RuntimeContext(session_id="s-ask")
    paused = await run(agent, "wipe them", ctx)
    assert paused.generate_reason is GenerateReason.PERMISSION_ASKING
    reply_id = paused.metadata["reply_id"]

    (first,) = agent_spans(recorder)
    a = attrs(first)
    assert a["rx_agent.generate_reason"] == "PERMISSION_ASKING"
    assert a["rx_agent.pending.kind"] == "confirm"
    assert a["rx_agent.pending.reply_id"] == reply_id
    assert a["rx_agent.pending.tool.names"] == ("wipe", "wipe")
    assert a["rx_agent.pending.tool.call.ids"] == ("c1", "c2")
    assert "rx_agent.resume.kind" not in a
    assert first.status.status_code is StatusCode.OK

    answer = UserConfirmResultEvent(reply_id=reply_id, confirm_results=[
        ConfirmResult(c, True) for c in paused.tool_calls])
    assert (await run(agent, answer, ctx)).text == "wiped both"
    _, second = agent_spans(recorder)
    b = attrs(second)
    assert b["rx_agent.resume.kind"] == "confirm"
    assert b["rx_agent.resume.reply_id"] == reply_id  # links the two spans
    assert "rx_agent.pending.kind" not in b
    # The confirmed calls ran in the agent: an ordinary batch, nothing compensated.
    assert [s.name for s in recorder.tool_calls()] == ["execute_tool wipe"] * 2
    assert external_spans(recorder) == []
    recorder.counter.assert_each_ended_once()


async def test_external_results_get_compensating_tool_spans(recorder: Recorder) -> None:
    agent = make_agent([[ToolUseBlock("a1", "add", {"a": 1, "b": 2}),
                         ToolUseBlock("d1", "deploy", {"version": "v2"}),
                         ToolUseBlock("d2", "deploy", {"version": "v3"})],
                        "deployed"], recorder)
    ctx = RuntimeContext(session_id="s-ext")
    paused = await run(agent, "deploy v2 and v3", ctx)
    assert paused.generate_reason is GenerateReason.TOOL_SUSPENDED
    reply_id = paused.metadata["reply_id"]
    (first,) = agent_spans(recorder)
    a = attrs(first)
    assert a["rx_agent.pending.kind"] == "external"
    assert a["rx_agent.pending.reply_id"] == reply_id
    assert a["rx_agent.pending.tool.names"] == ("deploy", "deploy")
    assert a["rx_agent.pending.tool.call.ids"] == ("d1", "d2")
    assert a["rx_agent.generate_reason"] == "TOOL_SUSPENDED"
    # The batch's other call ran here, in its own batch span.
    assert [attrs(s)["gen_ai.tool.call.id"] for s in recorder.tool_calls()] == ["a1"]
    assert external_spans(recorder) == []  # nothing ran outside yet

    results = ExternalExecutionResultEvent(reply_id=reply_id, tool_results=[
        ToolResultBlock("d1", "deploy", "deployed v2"),
        ToolResultBlock("d2", "deploy", "v3 failed", ToolResultState.ERROR),
    ])
    assert (await run(agent, results, ctx)).text == "deployed"
    _, second = agent_spans(recorder)
    assert attrs(second)["rx_agent.resume.kind"] == "external"
    assert attrs(second)["rx_agent.resume.reply_id"] == reply_id

    done, failed = sorted(external_spans(recorder), key=lambda s: attrs(s)["gen_ai.tool.call.id"])
    for span, call_id in ((done, "d1"), (failed, "d2")):
        assert span.name == "execute_tool deploy"
        assert span.kind is SpanKind.INTERNAL
        assert recorder.parent(span) is second  # the call that received the results
        assert {k: v for k, v in attrs(span).items() if k != "error.type"} == {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.agent.name": "ops",
            "gen_ai.conversation.id": "s-ext",
            "gen_ai.tool.type": "function",
            "gen_ai.tool.name": "deploy",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.description": "Deploy a version (runs on the operator's machine).",
            "rx_agent.tool.external": True,
            "rx_agent.tool.state": "SUCCESS" if call_id == "d1" else "ERROR",
        }  # no content without record_content
    assert done.status.status_code is StatusCode.OK
    assert failed.status.status_code is StatusCode.ERROR
    assert attrs(failed)["error.type"] == "tool_error" and "error.type" not in attrs(done)
    assert failed.events == ()  # not an exception: the state says it
    recorder.counter.assert_each_ended_once()


async def test_external_results_record_their_content_when_asked(recorder: Recorder) -> None:
    agent = make_agent([[ToolUseBlock("d1", "deploy", {"version": "v2"})], "ok"], recorder,
                       record_content=True)
    ctx = RuntimeContext(session_id="s-content")
    paused = await run(agent, "deploy v2", ctx)
    results = ExternalExecutionResultEvent(reply_id=paused.metadata["reply_id"], tool_results=[
        ToolResultBlock("d1", "deploy", "deployed v2")])
    await run(agent, results, ctx)
    (span,) = external_spans(recorder)
    assert attrs(span)["gen_ai.tool.call.result"] == "deployed v2"
    assert attrs(span)["gen_ai.tool.call.arguments"] == '{"version":"v2"}'


async def test_a_refused_resume_has_no_compensating_span(recorder: Recorder) -> None:
    agent = make_agent([[ToolUseBlock("d1", "deploy", {"version": "v2"})]], recorder)
    ctx = RuntimeContext(session_id="s-refused")
    await run(agent, "deploy v2", ctx)
    wrong = ExternalExecutionResultEvent(reply_id="not-the-pause", tool_results=[
        ToolResultBlock("d1", "deploy", "deployed v2")])
    try:
        await run(agent, wrong, ctx)
    except ValueError:
        pass
    else:
        raise AssertionError("the resume should be refused")
    assert external_spans(recorder) == []
