"""Every event is a pydantic model that round-trips via JSON (docs/concepts/events.md)."""

from __future__ import annotations

import json

import pytest
from conftest import add_toolkit, call_add, make_agent, stream_events

from rx_agent import (
    AgentEndEvent,
    AgentEvent,
    AgentResultEvent,
    AgentStartEvent,
    AllToolsDeniedEvent,
    ConfirmResult,
    CustomEvent,
    DataBlock,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    ExceedMaxItersEvent,
    ExternalExecutionResultEvent,
    GenerateReason,
    HintBlockEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    Msg,
    RequestStopEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    ScriptedModel,
    TextBlock,
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
    ToolResultBlock,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultState,
    ToolResultTextDeltaEvent,
    ToolUseBlock,
    UserConfirmResultEvent,
    parse_event,
)

CALL = ToolUseBlock("c1", "add", {"a": 1, "b": 2})
TOOL = {"reply_id": "r1", "tool_call_id": "c1", "tool_call_name": "add"}


def _final() -> Msg:
    msg = Msg("assistant", [ThinkingBlock("t"), TextBlock("answer"), CALL])
    msg.generate_reason = GenerateReason.MODEL_STOP
    return msg


SAMPLES = [
    AgentStartEvent(session_id="s", reply_id="r", name="agent"),
    AgentEndEvent(reply_id="r"),
    AgentResultEvent(result=_final()),
    ModelCallStartEvent(reply_id="r"),
    TextBlockStartEvent(reply_id="r", block_id="text"),
    TextBlockDeltaEvent(reply_id="r", block_id="text", delta="hel"),
    TextBlockEndEvent(reply_id="r", block_id="text"),
    ThinkingBlockStartEvent(reply_id="r", block_id="thinking"),
    ThinkingBlockDeltaEvent(reply_id="r", block_id="thinking", delta="hmm"),
    ThinkingBlockEndEvent(reply_id="r", block_id="thinking"),
    DataBlockStartEvent(reply_id="r", block_id="data"),
    DataBlockDeltaEvent(reply_id="r", block_id="data", delta="aGVsbG8="),
    DataBlockEndEvent(reply_id="r", block_id="data"),
    ToolCallStartEvent(**TOOL),
    ToolCallDeltaEvent(**TOOL, delta='{"a": 1'),
    ToolCallEndEvent(**TOOL),
    ToolResultStartEvent(**TOOL),
    ToolResultTextDeltaEvent(**TOOL, delta="3"),
    ToolResultDataDeltaEvent(**TOOL, delta=DataBlock(media_type="image/png", data="aGk=")),
    ToolResultEndEvent(**TOOL, state=ToolResultState.ERROR),
    ExceedMaxItersEvent(max_iters=10, current_iter=10),
    RequireUserConfirmEvent(reply_id="r", tool_calls=[CALL]),
    UserConfirmResultEvent(reply_id="r", confirm_results=[ConfirmResult(CALL, True, "ok")]),
    RequireExternalExecutionEvent(reply_id="r", tool_calls=[CALL]),
    ExternalExecutionResultEvent(
        reply_id="r",
        tool_results=[ToolResultBlock("c1", "add", "3", state=ToolResultState.SUCCESS)],
    ),
    RequestStopEvent("enough", GenerateReason.REASONING_STOP_REQUESTED),
    AllToolsDeniedEvent(denied_tool_calls=[CALL]),
    HintBlockEvent(hint="remember"),
    CustomEvent(name="progress", value={"pct": 50, "items": [1, 2]}),
]


def _id(event: AgentEvent) -> str:
    return type(event).__name__


SPEC_EVENTS = {
    "AgentStartEvent",
    "AgentEndEvent",
    "AgentResultEvent",
    "ModelCallStartEvent",
    "ModelCallEndEvent",
    "TextBlockStartEvent",
    "TextBlockDeltaEvent",
    "TextBlockEndEvent",
    "ThinkingBlockStartEvent",
    "ThinkingBlockDeltaEvent",
    "ThinkingBlockEndEvent",
    "DataBlockStartEvent",
    "DataBlockDeltaEvent",
    "DataBlockEndEvent",
    "ToolCallStartEvent",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolResultStartEvent",
    "ToolResultTextDeltaEvent",
    "ToolResultDataDeltaEvent",
    "ToolResultEndEvent",
    "ExceedMaxItersEvent",
    "RequireUserConfirmEvent",
    "UserConfirmResultEvent",
    "RequireExternalExecutionEvent",
    "ExternalExecutionResultEvent",
    "RequestStopEvent",
    "AllToolsDeniedEvent",
    "HintBlockEvent",
    "CustomEvent",
}


def test_samples_cover_every_spec_event() -> None:
    # ModelCallEndEvent is sampled from a real run below (its usage type is not pinned).
    assert SPEC_EVENTS - {type(e).__name__ for e in SAMPLES} == {"ModelCallEndEvent"}


@pytest.mark.parametrize("event", SAMPLES, ids=_id)
def test_event_round_trips_from_json_str(event: AgentEvent) -> None:
    back = parse_event(event.model_dump_json())
    assert type(back) is type(event)
    assert back == event


@pytest.mark.parametrize("event", SAMPLES, ids=_id)
def test_event_round_trips_from_json_bytes(event: AgentEvent) -> None:
    back = parse_event(event.model_dump_json().encode())
    assert type(back) is type(event)
    assert back == event


@pytest.mark.parametrize("event", SAMPLES, ids=_id)
def test_event_round_trips_from_dict(event: AgentEvent) -> None:
    back = parse_event(json.loads(event.model_dump_json()))
    assert type(back) is type(event)
    assert back == event


@pytest.mark.parametrize("event", SAMPLES, ids=_id)
def test_event_has_the_base_fields(event: AgentEvent) -> None:
    assert isinstance(event, AgentEvent)
    assert event.id
    assert isinstance(event.created_at, (int, float))
    assert hasattr(event, "source")
    assert hasattr(event, "metadata")
    assert isinstance(event.type, str) and event.type


def test_event_type_discriminators_are_distinct() -> None:
    types = [e.type for e in SAMPLES]
    assert len(set(types)) == len(types)


def test_event_ids_are_unique_per_instance() -> None:
    assert AgentEndEvent(reply_id="r").id != AgentEndEvent(reply_id="r").id


def test_round_trip_keeps_nested_final_message() -> None:
    back = parse_event(AgentResultEvent(result=_final()).model_dump_json())
    assert isinstance(back, AgentResultEvent)
    assert back.result.text == "answer"
    assert back.result.generate_reason is GenerateReason.MODEL_STOP
    assert isinstance(back.result.content[0], ThinkingBlock)
    assert back.result.tool_calls == [CALL]


def test_round_trip_keeps_metadata_and_source() -> None:
    event = CustomEvent(name="x", value=1, source="agent", metadata={"k": [1, 2]})
    back = parse_event(event.model_dump_json())
    assert back.source == "agent"
    assert back.metadata == {"k": [1, 2]}


def test_model_call_end_event_with_usage_round_trips() -> None:
    events = stream_events(make_agent(ScriptedModel(["hello"])))
    (end,) = [e for e in events if isinstance(e, ModelCallEndEvent)]
    assert end.usage is not None
    for data in (
        end.model_dump_json(),
        end.model_dump_json().encode(),
        json.loads(end.model_dump_json()),
    ):
        back = parse_event(data)
        assert type(back) is ModelCallEndEvent
        assert back == end


def test_events_of_a_real_run_round_trip() -> None:
    model = ScriptedModel([[ThinkingBlock("plan"), "calling", call_add()], "three"])
    events = stream_events(make_agent(model, toolkit=add_toolkit()))
    assert len(events) > 10
    for event in events:
        back = parse_event(event.model_dump_json())
        assert type(back) is type(event)
        assert back == event


def test_parse_event_rejects_unknown_type() -> None:
    with pytest.raises(ValueError):
        parse_event({"type": "no_such_event"})


USAGE_FREE_POSITIONAL = [
    (AgentStartEvent, ("s", "r", "agent"), ("session_id", "reply_id", "name")),
    (AgentEndEvent, ("r",), ("reply_id",)),
    (AgentResultEvent, (Msg("assistant", "x"),), ("result",)),
    (ModelCallStartEvent, ("r",), ("reply_id",)),
    (TextBlockStartEvent, ("r", "text"), ("reply_id", "block_id")),
    (TextBlockDeltaEvent, ("r", "text", "d"), ("reply_id", "block_id", "delta")),
    (TextBlockEndEvent, ("r", "text"), ("reply_id", "block_id")),
    (ThinkingBlockDeltaEvent, ("r", "thinking", "d"), ("reply_id", "block_id", "delta")),
    (ToolCallStartEvent, ("r", "c1", "add"), ("reply_id", "tool_call_id", "tool_call_name")),
    (
        ToolCallDeltaEvent,
        ("r", "c1", "add", "{"),
        ("reply_id", "tool_call_id", "tool_call_name", "delta"),
    ),
    (
        ToolResultTextDeltaEvent,
        ("r", "c1", "add", "3"),
        ("reply_id", "tool_call_id", "tool_call_name", "delta"),
    ),
    (ExceedMaxItersEvent, (10, 10), ("max_iters", "current_iter")),
    (RequireUserConfirmEvent, ("r", [CALL]), ("reply_id", "tool_calls")),
    (RequireExternalExecutionEvent, ("r", [CALL]), ("reply_id", "tool_calls")),
    (AllToolsDeniedEvent, ([CALL],), ("denied_tool_calls",)),
    (CustomEvent, ("progress", 5), ("name", "value")),
]


@pytest.mark.parametrize(
    ("cls", "args", "fields"),
    USAGE_FREE_POSITIONAL,
    ids=[c[0].__name__ for c in USAGE_FREE_POSITIONAL],
)
def test_event_constructs_positionally_in_the_documented_field_order(cls, args, fields) -> None:  # type: ignore[no-untyped-def]
    event = cls(*args)
    assert [getattr(event, f) for f in fields] == list(args)
