"""assert_well_formed: the block and call grammar, on good streams and broken ones."""

from __future__ import annotations

import pytest

from rx_agent import (
    ModelCallStartEvent,
    ReActAgent,
    ScriptedModel,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    ThinkingBlock,
    ToolCallEndEvent,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.testing import (
    MiddlewareHarness,
    agent_reply,
    assert_well_formed,
    collect_events,
    text_round,
    thinking_round,
    tool_results,
    tool_round,
)

from ._middlewares import DropsTextEnd, Shout

CALL = ToolUseBlock(id="c1", name="lookup", input={"q": "x"})


@tool
def lookup(q: str) -> str:
    """Looks up q."""
    return q


def test_what_the_runtime_and_the_helpers_stream_is_well_formed() -> None:
    toolkit = Toolkit()
    toolkit.register_tool(lookup)
    agent = ReActAgent(name="a", toolkit=toolkit, model=ScriptedModel(
        [[ThinkingBlock("t"), "a", CALL, ToolUseBlock(id="c2", name="lookup", input={})],
         ["b", "c"]]))
    assert_well_formed(collect_events(agent, "hi"))
    assert_well_formed(agent_reply(thinking_round("t", "a"), tool_round(CALL, text="x"),
                                   tool_results(CALL), text_round("done")))


def test_a_dropped_block_end_is_named() -> None:
    result = MiddlewareHarness(DropsTextEnd(), "on_model_call").run(text_round("hi"))
    with pytest.raises(AssertionError) as info:
        result.assert_well_formed()
    assert "the call ends with text block 'text' still open" in str(info.value)
    assert "-> #3 ModelCallEndEvent" in str(info.value)
    MiddlewareHarness(Shout(), "on_model_call").run(text_round("hi")).assert_well_formed()


@pytest.mark.parametrize(("events", "why"), [
    (lambda r: [r[0], r[2], *r[3:]], "a delta of text block 'text', which is not open"),
    (lambda r: [*r[:4], r[3], *r[4:]], "an end of text block 'text', which is not open"),
    (lambda r: [r[0], *r], "a model call starts inside the open call"),
    (lambda r: r[1:], "outside a model call"),
    (lambda r: [*r[:2], r[2].model_copy(update={"reply_id": "other"}), *r[3:]],
     "its reply_id is not that of the open model call"),
    (lambda r: [*r[:4], *r[1:4], r[4]], "text block 'text' starts twice"),
    (lambda r: r[:3], "completed inside model call"),
])
def test_broken_text_rounds(events: object, why: str) -> None:
    broken = events(text_round("x", reply_id="r1"))  # type: ignore[operator]
    with pytest.raises(AssertionError, match=why.replace("(", r"\(").replace(")", r"\)")):
        assert_well_formed(broken)


def test_tool_calls_and_results() -> None:
    rnd = tool_round(CALL, text="checking")
    # The runtime closes the text block before a tool call starts.
    no_close = [e for e in rnd if not isinstance(e, TextBlockEndEvent)]
    with pytest.raises(AssertionError, match="tool call starts while text block 'text'"):
        assert_well_formed(no_close)
    no_end = [e for e in rnd if not isinstance(e, ToolCallEndEvent)]
    with pytest.raises(AssertionError, match="tool call 'c1' still open"):
        assert_well_formed(no_end)
    results = tool_results(CALL)
    with pytest.raises(AssertionError, match="tool result 'c1' is never closed"):
        assert_well_formed(results[:-1])
    assert_well_formed(results[:-1], complete=False)  # a stream that failed there


def test_a_stream_that_failed_may_stop_inside_a_block() -> None:
    cut = [*text_round("x")[:3], RuntimeError("cut")]
    result = MiddlewareHarness(Shout(), "on_model_call").run(cut)
    assert not result.completed
    result.assert_well_formed()
    assert [type(e) for e in result.events][-1] is TextBlockDeltaEvent
    assert isinstance(result.events[0], ModelCallStartEvent)
