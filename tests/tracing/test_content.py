"""``gen_ai.output.messages`` of a chat span: the message the runtime builds, as parts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import reactivex
from reactivex import Observable

from rx_agent import ChatModel, GenerateOptions, Msg, OtelTracingMiddleware, ReActAgent, Toolkit
from rx_agent.event import (
    AgentEvent,
    DataBlockDeltaEvent,
    DataBlockStartEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    TextBlockDeltaEvent,
)
from rx_agent.model.base import (
    FinishChunk,
    ModelChunk,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
)
from rx_agent.tracing._watch import ChatWatch

from .conftest import Recorder, attrs
from .test_spans import add


class ChunkModel(ChatModel):
    """Streams the given chunks on the first call, then answers "done"."""

    name = "chunks"
    provider = "test"

    def __init__(self, first: list[ModelChunk]) -> None:
        self.calls = 0
        self.first = first

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        self.calls += 1
        if self.calls == 1:
            return reactivex.from_iterable(self.first)
        return reactivex.of(TextChunk("done"), FinishChunk("stop"))


async def test_output_parts_are_the_stored_message_in_the_next_input(
    recorder: Recorder,
) -> None:
    model = ChunkModel([
        ThinkingChunk("plan"),
        TextChunk("Let "),
        TextChunk("me."),
        ToolCallChunk(0, "c1", "add", '{"a": 1,'),
        ToolCallChunk(0, arguments=' "b": 2}'),
        ToolCallChunk(1, "c2", "add", "[1, 2]"),  # not an object: kept as its text
        FinishChunk("tool_calls"),
    ])
    agent = ReActAgent(name="helper", model=model, toolkit=Toolkit([add]),
                       middlewares=[OtelTracingMiddleware(recorder.provider,
                                                          record_content=True)])

    await asyncio.wait_for(agent.acall("go"), 5)

    first, second = recorder.named("chat")
    (output,) = json.loads(attrs(first)["gen_ai.output.messages"])
    assert output == {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "content": "plan"},
            {"type": "text", "content": "Let me."},
            {"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}},
            {"type": "tool_call", "id": "c2", "name": "add", "arguments": "[1, 2]"},
        ],
        "finish_reason": "tool_calls",
    }
    # The next call's input shows the same assistant message, part for part.
    history = json.loads(attrs(second)["gen_ai.input.messages"])
    assert next(m for m in history if m["role"] == "assistant")["parts"] == output["parts"]


class _Span:
    def __init__(self) -> None:
        self.attributes: dict[str, Any] = {}

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value


def _output(events: list[AgentEvent]) -> dict[str, Any]:
    watch = ChatWatch(record_content=True)
    for event in events:
        watch.observe(event)
    span = _Span()
    watch.close(span)  # type: ignore[arg-type]  # only set_attribute is used
    (message,) = json.loads(span.attributes["gen_ai.output.messages"])
    return message  # type: ignore[no-any-return]


def _text(delta: str, block_id: str = "text") -> TextBlockDeltaEvent:
    return TextBlockDeltaEvent.make("a", reply_id="r", block_id=block_id, delta=delta)


def _end() -> ModelCallEndEvent:
    return ModelCallEndEvent.make("a", reply_id="r", usage=None, finish_reason="stop")


def test_a_data_block_of_the_output_is_described() -> None:
    message = _output([
        DataBlockStartEvent.make("a", reply_id="r", block_id="d", media_type="image/png"),
        DataBlockDeltaEvent.make("a", reply_id="r", block_id="d", delta="iVBORw0K"),
        _text("a picture"),
        _end(),
    ])
    assert message["parts"] == [
        {"type": "blob", "mime_type": "image/png"},
        {"type": "text", "content": "a picture"},
    ]


def test_a_lone_surrogate_from_a_rewriting_middleware_is_replaced() -> None:
    # The model's deltas are scrubbed by the runtime; one rewritten below the
    # tracing middleware is not, and would make the span unexportable as UTF-8.
    message = _output([_text("a\ud800b"), _end()])
    assert message["parts"] == [{"type": "text", "content": "a\ufffdb"}]


def test_a_retry_below_keeps_only_the_last_calls_output() -> None:
    message = _output([
        _text("first"),
        ModelCallStartEvent.make("a", reply_id="r"),
        _text("sec"), _text("ond", "text"), _text("more", "text-2"),
        _end(),
    ])
    assert message == {
        "role": "assistant",
        "parts": [{"type": "text", "content": "second"}, {"type": "text", "content": "more"}],
        "finish_reason": "stop",
    }
