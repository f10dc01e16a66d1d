"""The event-sequence helpers build what the runtime streams, block ids included."""

from __future__ import annotations

from typing import Any

import pytest
from reactivex import operators as ops

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    ReActAgent,
    ScriptedModel,
    ThinkingBlock,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.testing import (
    agent_reply,
    collect_events,
    event_types,
    round_message,
    text_round,
    thinking_round,
    tool_results,
    tool_round,
)


@tool
def lookup(q: str) -> str:
    """Looks something up."""
    return f"found {q}"


class Capture(MiddlewareBase):
    """Keeps what leaves on_model_call and on_acting, per call."""

    def __init__(self) -> None:
        self.model_calls: list[list[AgentEvent]] = []
        self.acting: list[list[AgentEvent]] = []

    def active_points(self) -> Any:
        return {ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_ACTING}

    def _keep(self, into: list[list[AgentEvent]], source: Any) -> Any:
        batch: list[AgentEvent] = []
        into.append(batch)
        return source.pipe(ops.do_action(batch.append))

    def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return self._keep(self.model_calls, next(input))

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return self._keep(self.acting, next(input))


def shape(events: list[AgentEvent]) -> list[dict[str, Any]]:
    """Events without ids, times and usage; the reply id replaced by its first use."""
    replies: dict[str, str] = {}
    out = []
    for event in events:
        data = event.model_dump(mode="json", exclude={"id", "created_at", "usage"})
        if "reply_id" in data:
            data["reply_id"] = replies.setdefault(data["reply_id"], f"r{len(replies) + 1}")
        out.append(data)
    return out


def run(script: list[Any]) -> Capture:
    capture = Capture()
    toolkit = Toolkit()
    toolkit.register_tool(lookup)
    agent = ReActAgent(name="agent", model=ScriptedModel(script), toolkit=toolkit,
                       middlewares=[capture])
    collect_events(agent, "hi")
    return capture


def test_rounds_match_what_the_runtime_streams() -> None:
    call = ToolUseBlock(id="c1", name="lookup", input={"q": "rx"})
    capture = run([[ThinkingBlock("plan"), "let me look", call], ["It ", "is ", "rx."]])
    tool_model, answer = capture.model_calls
    assert shape(tool_round(call, text="let me look", thinking="plan")) == shape(tool_model)
    assert shape(text_round("It ", "is ", "rx.")) == shape(answer)
    (acting,) = capture.acting
    assert shape(tool_results(call, output="found rx")) == shape(acting)


def test_a_thinking_round_matches_the_runtime() -> None:
    capture = run([[ThinkingBlock("hm"), ThinkingBlock("m"), "yes"]])
    assert shape(thinking_round(["hm", "m"], "yes")) == shape(capture.model_calls[0])


def test_block_ids_and_generated_call_ids() -> None:
    events = tool_round(("lookup", {"q": 1}), ("lookup", {"q": 2}), reply_id="r9")
    ids = [e.tool_call_id for e in events if type(e).__name__ == "ToolCallStartEvent"]
    assert ids == ["call_r9_0", "call_r9_1"]  # the runtime's ids for calls without one
    assert {e.reply_id for e in events} == {"r9"}
    thought = thinking_round("a", "b")
    assert [getattr(e, "block_id", None) for e in thought][1:-1] == [
        "thinking", "thinking", "thinking", "text", "text", "text"]
    end = text_round("x", finish_reason="length")[-1]
    assert end.finish_reason == "length" and end.usage.output_tokens >= 1


def test_round_message_and_agent_reply() -> None:
    call = ToolUseBlock(id="c1", name="lookup", input={"q": "rx"})
    msg = round_message(tool_round(call, text="checking"))
    assert msg.text == "checking" and msg.tool_calls == [call]
    reply = agent_reply(tool_round(call), tool_results(call), text_round("done"))
    assert event_types(reply)[0] == "AgentStartEvent"
    assert event_types(reply)[-2:] == ["AgentResultEvent", "AgentEndEvent"]
    assert reply[-2].result.text == "done"
    assert reply[-2].result.generate_reason is GenerateReason.MODEL_STOP
    assert reply[0].reply_id == reply[-1].reply_id


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="at least one text delta"):
        text_round()
    with pytest.raises(TypeError, match="tool call #1"):
        tool_round("lookup")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ToolUseBlocks"):
        tool_results(("lookup", {}))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="at least one model round"):
        agent_reply(tool_results(ToolUseBlock(id="c", name="f", input={})))
