"""Runtime-built events (no validation) look exactly like validated ones."""

from __future__ import annotations

import json

from rx_agent import (
    ModelCallStartEvent,
    ReActAgent,
    ScriptedModel,
    TextBlockDeltaEvent,
    parse_event,
)
from rx_agent.testing import collect_events


def test_fast_events_dump_with_the_same_keys_in_the_same_order() -> None:
    fast = ModelCallStartEvent.make("a", reply_id="r", model_name="m")
    checked = ModelCallStartEvent(reply_id="r", model_name="m", source="a")
    assert list(json.loads(fast.model_dump_json())) == list(json.loads(checked.model_dump_json()))
    assert parse_event(fast.model_dump_json()) == fast


def test_every_event_of_a_run_round_trips_and_keeps_field_order() -> None:
    events = collect_events(ReActAgent(name="a", model=ScriptedModel([["x", "y"]])), "hi")
    for event in events:
        again = parse_event(event.model_dump_json())
        assert again == event
        assert list(json.loads(event.model_dump_json())) == list(type(event).model_fields)
    assert any(isinstance(e, TextBlockDeltaEvent) for e in events)
