"""The shape of a reply's event stream, block ids and reply ids (docs/concepts/events.md)."""

from __future__ import annotations

from conftest import (
    add_toolkit,
    call_add,
    make_agent,
    of_type,
    result_msg,
    stream_error,
    stream_events,
    type_names,
)

from rx_agent import (
    AgentEndEvent,
    AgentResultEvent,
    AgentStartEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlock,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)

BLOCK_EVENTS = (
    TextBlockStartEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    ThinkingBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
)
TOOL_CALL_EVENTS = (ToolCallStartEvent, ToolCallDeltaEvent, ToolCallEndEvent)
TOOL_RESULT_EVENTS = (ToolResultStartEvent, ToolResultTextDeltaEvent, ToolResultEndEvent)


def _model_call_segments(events: list) -> list[list]:
    """The events from each ModelCallStartEvent to its ModelCallEndEvent, inclusive."""
    segments, current = [], None
    for event in events:
        if isinstance(event, ModelCallStartEvent):
            current = [event]
        elif current is not None:
            current.append(event)
            if isinstance(event, ModelCallEndEvent):
                segments.append(current)
                current = None
    return segments


def _blocks(segment: list) -> list[tuple[str, str]]:
    out = []
    for e in segment:
        if isinstance(e, BLOCK_EVENTS):
            out.append((type(e).__name__, e.block_id))
        elif isinstance(e, TOOL_CALL_EVENTS):
            out.append((type(e).__name__, e.tool_call_id))
    return out


# -- the reply's outline -----------------------------------------------------------------------


def test_simple_reply_event_sequence() -> None:
    events = stream_events(make_agent(ScriptedModel(["hello"])))
    assert type_names(events) == [
        "AgentStartEvent",
        "ModelCallStartEvent",
        "TextBlockStartEvent",
        "TextBlockDeltaEvent",
        "TextBlockEndEvent",
        "ModelCallEndEvent",
        "AgentResultEvent",
        "AgentEndEvent",
    ]


def test_tool_round_event_sequence() -> None:
    events = stream_events(
        make_agent(ScriptedModel([[call_add("c1")], "done"]), toolkit=add_toolkit())
    )
    names = type_names(events)
    assert names[0] == "AgentStartEvent"
    assert names[-2:] == ["AgentResultEvent", "AgentEndEvent"]
    first_end = names.index("ModelCallEndEvent")
    assert names[1] == "ModelCallStartEvent"
    assert names[first_end + 1 : first_end + 4] == [
        "ToolResultStartEvent",
        "ToolResultTextDeltaEvent",
        "ToolResultEndEvent",
    ]
    assert names[first_end + 4] == "ModelCallStartEvent"
    assert "ToolCallStartEvent" in names[:first_end]
    assert names.index("ToolCallEndEvent") < first_end


def test_agent_start_event_fields() -> None:
    ctx = RuntimeContext(session_id="sess-1")
    events = stream_events(make_agent(ScriptedModel(["x"]), name="namer"), "hi", ctx)
    start = events[0]
    assert isinstance(start, AgentStartEvent)
    assert start.session_id == "sess-1"
    assert start.name == "namer"
    assert start.reply_id


def test_final_message_carries_its_reason_and_text() -> None:
    events = stream_events(make_agent(ScriptedModel([["a", "b"]])))
    msg = result_msg(events)
    assert msg.text == "ab"
    assert msg.generate_reason is not None


def test_model_call_end_carries_non_zero_usage() -> None:
    events = stream_events(make_agent(ScriptedModel(["some answer text"])))
    (end,) = of_type(events, ModelCallEndEvent)
    assert end.usage is not None
    assert end.usage.input_tokens > 0
    assert end.usage.output_tokens > 0


def test_tool_call_events_carry_the_models_call_id_and_name() -> None:
    events = stream_events(
        make_agent(ScriptedModel([[call_add("call-9", 1, 1)], "ok"]), toolkit=add_toolkit())
    )
    calls = of_type(events, TOOL_CALL_EVENTS)
    assert calls
    assert {(e.tool_call_id, e.tool_call_name) for e in calls} == {("call-9", "add")}
    args = "".join(e.delta for e in of_type(events, ToolCallDeltaEvent))
    import json

    assert json.loads(args) == {"a": 1, "b": 1}


# -- block ids ---------------------------------------------------------------------------------


def test_consecutive_text_chunks_share_one_block() -> None:
    events = stream_events(make_agent(ScriptedModel([["a", "b", "c"]])))
    (segment,) = _model_call_segments(events)
    assert _blocks(segment) == [
        ("TextBlockStartEvent", "text"),
        ("TextBlockDeltaEvent", "text"),
        ("TextBlockDeltaEvent", "text"),
        ("TextBlockDeltaEvent", "text"),
        ("TextBlockEndEvent", "text"),
    ]


def test_later_text_and_thinking_segments_get_numbered_ids() -> None:
    script = [[ThinkingBlock("t1"), "x", ThinkingBlock("t2"), "y", "z", ThinkingBlock("t3"), "w"]]
    events = stream_events(make_agent(ScriptedModel(script)))
    (segment,) = _model_call_segments(events)
    starts = [b for b in _blocks(segment) if b[0].endswith("StartEvent")]
    assert starts == [
        ("ThinkingBlockStartEvent", "thinking"),
        ("TextBlockStartEvent", "text"),
        ("ThinkingBlockStartEvent", "thinking-2"),
        ("TextBlockStartEvent", "text-2"),
        ("ThinkingBlockStartEvent", "thinking-3"),
        ("TextBlockStartEvent", "text-3"),
    ]


def test_each_block_is_closed_before_the_next_opens() -> None:
    events = stream_events(make_agent(ScriptedModel([["a", ThinkingBlock("t"), "b"]])))
    (segment,) = _model_call_segments(events)
    assert _blocks(segment) == [
        ("TextBlockStartEvent", "text"),
        ("TextBlockDeltaEvent", "text"),
        ("TextBlockEndEvent", "text"),
        ("ThinkingBlockStartEvent", "thinking"),
        ("ThinkingBlockDeltaEvent", "thinking"),
        ("ThinkingBlockEndEvent", "thinking"),
        ("TextBlockStartEvent", "text-2"),
        ("TextBlockDeltaEvent", "text-2"),
        ("TextBlockEndEvent", "text-2"),
    ]


def test_tool_call_start_closes_the_open_text_block() -> None:
    events = stream_events(
        make_agent(ScriptedModel([["a", "b", call_add("c1")], "ok"]), toolkit=add_toolkit())
    )
    segment = _model_call_segments(events)[0]
    blocks = _blocks(segment)
    assert blocks[:4] == [
        ("TextBlockStartEvent", "text"),
        ("TextBlockDeltaEvent", "text"),
        ("TextBlockDeltaEvent", "text"),
        ("TextBlockEndEvent", "text"),
    ]
    assert blocks[4] == ("ToolCallStartEvent", "c1")
    assert blocks[-1] == ("ToolCallEndEvent", "c1")


def test_tool_call_start_closes_the_open_thinking_block() -> None:
    events = stream_events(
        make_agent(
            ScriptedModel([[ThinkingBlock("t"), call_add("c1")], "ok"]), toolkit=add_toolkit()
        )
    )
    blocks = _blocks(_model_call_segments(events)[0])
    assert blocks[:3] == [
        ("ThinkingBlockStartEvent", "thinking"),
        ("ThinkingBlockDeltaEvent", "thinking"),
        ("ThinkingBlockEndEvent", "thinking"),
    ]
    assert blocks[3] == ("ToolCallStartEvent", "c1")


def test_text_after_a_tool_call_opens_a_new_numbered_block() -> None:
    events = stream_events(
        make_agent(ScriptedModel([["a", call_add("c1"), "b"], "ok"]), toolkit=add_toolkit())
    )
    blocks = _blocks(_model_call_segments(events)[0])
    text_starts = [b[1] for b in blocks if b[0] == "TextBlockStartEvent"]
    assert text_starts == ["text", "text-2"]
    assert blocks.index(("TextBlockEndEvent", "text")) < blocks.index(("ToolCallStartEvent", "c1"))


def test_block_numbering_restarts_for_each_model_call() -> None:
    script = [["a", ThinkingBlock("t"), "b", call_add("c1")], ["c", ThinkingBlock("u"), "d"]]
    events = stream_events(make_agent(ScriptedModel(script), toolkit=add_toolkit()))
    first, second = _model_call_segments(events)
    assert [b[1] for b in _blocks(second) if b[0].endswith("BlockStartEvent")] == [
        "text",
        "thinking",
        "text-2",
    ]
    assert [b[1] for b in _blocks(first) if b[0].endswith("BlockStartEvent")] == [
        "text",
        "thinking",
        "text-2",
    ]


def test_thinking_is_stored_in_the_assistant_message() -> None:
    ctx = RuntimeContext(session_id="s")
    stream_events(make_agent(ScriptedModel([[ThinkingBlock("deep"), "answer"]])), "hi", ctx)
    msg = ctx.agent_state.context[-1]
    assert [type(b).__name__ for b in msg.content] == ["ThinkingBlock", "TextBlock"]
    assert msg.content[0].thinking == "deep"


# -- reply ids ---------------------------------------------------------------------------------


def _rich_events() -> list:
    script = [
        [ThinkingBlock("t"), "calling", call_add("c1"), call_add("c2")],
        [call_add("c3")],
        ["done"],
    ]
    return stream_events(make_agent(ScriptedModel(script), toolkit=add_toolkit()))


def test_agent_start_and_end_share_the_calls_reply_id() -> None:
    events = _rich_events()
    start, end = events[0], events[-1]
    assert isinstance(start, AgentStartEvent) and isinstance(end, AgentEndEvent)
    assert start.reply_id == end.reply_id


def test_each_model_call_has_its_own_reply_id_shared_by_its_events() -> None:
    events = _rich_events()
    segments = _model_call_segments(events)
    assert len(segments) == 3
    ids = []
    for segment in segments:
        reply_id = segment[0].reply_id
        ids.append(reply_id)
        for event in segment:
            if isinstance(event, (*BLOCK_EVENTS, *TOOL_CALL_EVENTS, ModelCallEndEvent)):
                assert event.reply_id == reply_id, type(event).__name__
    assert len(set(ids)) == 3
    assert events[0].reply_id not in ids


def test_each_tool_batch_has_its_own_reply_id_shared_by_its_result_events() -> None:
    events = _rich_events()
    model_ids = {s[0].reply_id for s in _model_call_segments(events)}
    results = of_type(events, TOOL_RESULT_EVENTS)
    batch1 = {e.reply_id for e in results if e.tool_call_id in ("c1", "c2")}
    batch2 = {e.reply_id for e in results if e.tool_call_id == "c3"}
    assert len(batch1) == 1 and len(batch2) == 1
    assert batch1 != batch2
    assert not (batch1 | batch2) & model_ids
    assert events[0].reply_id not in batch1 | batch2


def test_tool_result_events_come_in_start_delta_end_order_per_call() -> None:
    events = _rich_events()
    for call_id in ("c1", "c2", "c3"):
        kinds = [
            type(e).__name__
            for e in of_type(events, TOOL_RESULT_EVENTS)
            if e.tool_call_id == call_id
        ]
        assert kinds[0] == "ToolResultStartEvent"
        assert kinds[-1] == "ToolResultEndEvent"
        assert set(kinds[1:-1]) <= {"ToolResultTextDeltaEvent"}


# -- error path --------------------------------------------------------------------------------


class Down(Exception):
    pass


def test_model_error_after_retries_errors_the_stream_without_end_event() -> None:
    model = ScriptedModel([Down("1"), Down("2"), Down("3")])
    agent = make_agent(model)
    events, error = stream_error(agent.stream("hi"))
    assert isinstance(error, Down)
    assert of_type(events, AgentEndEvent) == []
    assert of_type(events, AgentResultEvent) == []
    assert len(model.calls) == 3


def test_error_mid_stream_errors_the_stream() -> None:
    model = ScriptedModel([["partial", Down("mid-stream")]])
    events, error = stream_error(make_agent(model).stream("hi"))
    assert isinstance(error, Down) and str(error) == "mid-stream"
    assert [e.delta for e in of_type(events, TextBlockDeltaEvent)] == ["partial"]
    assert of_type(events, AgentEndEvent) == []


def test_session_is_released_after_an_error() -> None:
    model = ScriptedModel([Down("x"), "recovered"])
    agent = make_agent(model, max_retries=1)
    ctx = RuntimeContext(session_id="s")
    stream_error(agent.stream("hi", ctx))
    assert result_msg(stream_events(agent, "again", ctx)).text == "recovered"


def test_error_with_call_sync_raises() -> None:
    import pytest

    agent = make_agent(ScriptedModel([Down("sync")]), max_retries=1)
    with pytest.raises(Down):
        agent.call_sync("hi")


def test_running_past_the_script_is_a_clear_error() -> None:
    model = ScriptedModel(["only one"])
    agent = make_agent(model, max_retries=1)
    stream_events(agent)
    _, error = stream_error(agent.stream("again"))
    assert "script" in str(error).lower() or "response" in str(error).lower()
