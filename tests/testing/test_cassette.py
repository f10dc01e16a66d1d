"""RecordingModel / ReplayModel: a conversation recorded over HTTP, replayed offline."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import reactivex
from model.openai_server import (  # tests/model's loopback server (tests/ is on sys.path)
    OpenAIServer,
    Reply,
    reasoning,
    text,
    tool_call,
)
from reactivex import operators as ops
from reactivex.testing import TestScheduler

from rx_agent import (
    AgentEvent,
    Msg,
    ReActAgent,
    ScriptedModel,
    ThinkingBlock,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.model.base import TextChunk, UsageChunk
from rx_agent.model.errors import ModelResponseError, ModelServerError
from rx_agent.model.openai import OpenAIChatModel
from rx_agent.testing import (
    CassetteMismatchError,
    RecordingModel,
    ReplayedError,
    ReplayModel,
    collect,
    verify,
)


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def make_agent(model: Any, prompt: str = "You are helpful.") -> ReActAgent:
    toolkit = Toolkit()
    toolkit.register_tool(get_weather)
    return ReActAgent(name="a", sys_prompt=prompt, model=model, toolkit=toolkit,
                      retry_backoff=(0.0, 0.0))


def comparable(events: list[AgentEvent]) -> list[dict[str, Any]]:
    """The events without what differs between two runs: ids, times, generated reply ids."""
    replies: dict[str, str] = {}
    out = []
    for event in events:
        data = event.model_dump(mode="json", exclude={"id", "created_at"})
        if "reply_id" in data:
            data["reply_id"] = replies.setdefault(data["reply_id"], f"r{len(replies) + 1}")
        if "result" in data:
            for key in ("id", "created_at"):
                data["result"].pop(key)
        out.append(data)
    return out


async def collect_async(agent: ReActAgent, msgs: str) -> list[AgentEvent]:
    return [event async for event in agent.astream(msgs)]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    running = OpenAIServer().start()
    try:
        yield running
    finally:
        running.stop()


async def test_a_conversation_over_http_replays_offline_with_the_same_events(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.script(
        Reply(status=503, headers={"Retry-After": "0"}),  # the runtime retries it
        Reply([reasoning("Need the weather."),
               tool_call(0, id="call_1", name="get_weather", arguments='{"ci'),
               tool_call(0, arguments='ty": "Oslo"}')], finish_reason="tool_calls"),
        Reply([text("It is "), text("sunny in Oslo.")]),
    )
    cassette = tmp_path / "weather.jsonl"
    http = OpenAIChatModel("test-model", base_url=server.url, api_key="sk-test")
    written_on: list[int] = []
    recorder = RecordingModel(http, cassette)
    append = recorder._append

    def spy(line: str) -> None:
        written_on.append(threading.get_ident())
        append(line)

    recorder._append = spy  # type: ignore[method-assign]
    try:
        recorded = await collect_async(make_agent(recorder), "Weather in Oslo?")
    finally:
        await http.aclose()
    server.stop()  # from here on, nothing may touch the network

    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert [r["end"] for r in lines] == ["error", "completed", "completed"]
    assert lines[0]["error"]["type"] == "ModelServerError"
    assert lines[0]["digest"] == lines[1]["digest"]  # the retry sent the same input
    assert {"usage"} in [set(c) for c in lines[1]["chunks"]]
    assert threading.get_ident() not in written_on  # the writes ran off the event loop

    replay = ReplayModel(cassette)
    assert (replay.name, replay.provider) == (http.name, http.provider)
    replayed = await collect_async(make_agent(replay), "Weather in Oslo?")
    assert comparable(replayed) == comparable(recorded)
    assert replay.remaining == 0


def test_a_changed_prompt_fails_with_the_field_that_differs(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    script = ScriptedModel([[ToolUseBlock(id="c1", name="get_weather", input={"city": "Oslo"})],
                            "Sunny."])
    make_agent(RecordingModel(script, cassette)).call_sync("Weather?")
    replay = ReplayModel(cassette)
    with pytest.raises(CassetteMismatchError) as info:
        make_agent(replay, prompt="You are terse.").call_sync("Weather?")
    message = str(info.value)
    assert "model call #1 matches no unused call" in message  # not retried: still call #1
    assert 'messages[0].content[0].text: recorded "You are helpful.", now "You are terse."' \
        in message
    assert isinstance(info.value, AssertionError)
    assert replay.remaining == 2
    # The unchanged conversation still replays, tool round included.
    assert make_agent(ReplayModel(cassette)).call_sync("Weather?").text == "Sunny."


class VendorError(Exception):
    """An error class of the test's own (importable: this module is loaded)."""


def test_recorded_errors_are_replayed_as_their_types(tmp_path: Path) -> None:
    cassette = tmp_path / "errors.jsonl"
    model = RecordingModel(ScriptedModel([
        ["partial", ModelResponseError("cut short", retryable=False)],
        VendorError("quota"),
        ModelServerError("down", status_code=503, retry_after=2.5),
    ]), cassette)
    msgs = [Msg(role="user", content="hi")]
    for _ in range(3):
        with pytest.raises(Exception):  # noqa: B017 - each call fails in its own way
            collect(model.stream(msgs))
    replay = ReplayModel(cassette)
    chunks: list[Any] = []
    with pytest.raises(ModelResponseError, match="cut short") as first:
        collect(replay.stream(msgs).pipe(ops.do_action(chunks.append)))
    assert chunks == [TextChunk("partial")] and first.value.retryable is False
    with pytest.raises(VendorError, match="quota"):
        collect(replay.stream(msgs))
    with pytest.raises(ModelServerError, match="down") as third:
        collect(replay.stream(msgs))
    assert (third.value.status_code, third.value.retry_after) == (503, 2.5)


def test_an_error_class_that_is_not_loaded_becomes_a_replayed_error(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    record = {"v": 1, "seq": 0, "model": "m", "provider": "p", "chunks": [], "end": "error",
              "input": {}, "digest": "",
              "error": {"module": "not_a_loaded_module", "type": "Boom", "message": "x"}}
    msgs = [Msg(role="user", content="hi")]
    from rx_agent.testing._cassette import call_input, input_digest

    record["input"] = call_input(msgs, (), None)
    record["digest"] = input_digest(record["input"])
    cassette.write_text(json.dumps(record) + "\n")
    with pytest.raises(ReplayedError, match=r"not_a_loaded_module\.Boom: x") as info:
        collect(ReplayModel(cassette).stream(msgs))
    assert info.value.type_name == "not_a_loaded_module.Boom"


def test_calls_are_matched_by_input_not_by_order(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    recorder = RecordingModel(ScriptedModel(["to A", "to B"]), cassette)
    a, b = [Msg(role="user", content="A")], [Msg(role="user", content="B")]
    collect(recorder.stream(a))
    collect(recorder.stream(b))
    replay = ReplayModel(cassette)
    assert collect(replay.stream(b))[0] == TextChunk("to B")
    assert collect(replay.stream(a))[0] == TextChunk("to A")
    with pytest.raises(CassetteMismatchError, match="all 2 recorded calls were replayed"):
        collect(replay.stream(a))


def test_a_disposed_call_replays_its_chunks_and_stays_open(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    msgs = [Msg(role="user", content="hi")]
    recorder = RecordingModel(ScriptedModel([[ThinkingBlock("hm"), "a", "b"]], delay=0.01),
                              cassette)
    assert len(collect(recorder.stream(msgs).pipe(ops.take(2)))) == 2
    deadline = time.monotonic() + 3.0  # nobody waits for the line of a disposed call
    # The file exists from its open() on, before the line is in it (another thread).
    while not (cassette.exists() and cassette.read_text().endswith("\n")) \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    (line,) = cassette.read_text().splitlines()
    assert json.loads(line)["end"] == "disposed"
    (verify(ReplayModel(cassette).stream(msgs), timeout=1.0)
     .expect_next_count(2)
     .expect_no_event(0.1)
     .then_cancel()
     .verify())


def test_replay_runs_on_a_test_scheduler(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    msgs = [Msg(role="user", content="hi")]
    collect(RecordingModel(ScriptedModel(["hello"]), cassette).stream(msgs))
    delayed = reactivex.timer(3.0).pipe(ops.flat_map(lambda _: ReplayModel(cassette).stream(msgs)))
    result = (verify(delayed, TestScheduler())
              .expect_no_event(3.0)
              .expect_next(TextChunk("hello"), UsageChunk)
              .consume_while(lambda _c: True)
              .verify_complete())
    assert result.elapsed == 3.0


def test_append_and_bad_cassettes(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    msgs = [Msg(role="user", content="hi")]
    collect(RecordingModel(ScriptedModel(["one"]), cassette).stream(msgs))
    collect(RecordingModel(ScriptedModel(["two"]), cassette, append=True).stream(msgs))
    assert len(cassette.read_text().splitlines()) == 2
    collect(RecordingModel(ScriptedModel(["three"]), cassette).stream(msgs))
    assert len(cassette.read_text().splitlines()) == 1  # replaced at the first call
    with pytest.raises(FileNotFoundError, match="no cassette at"):
        ReplayModel(tmp_path / "missing.jsonl")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1 is not a JSON line"):
        ReplayModel(tmp_path / "bad.jsonl")
    with pytest.raises(TypeError, match="wraps a ChatModel"):
        RecordingModel("gpt", cassette)  # type: ignore[arg-type]
