"""50 overlapping calls through one instance of every built-in: no state leaks."""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from reactivex import Observable

from rx_agent import (
    AgentEvent,
    ChatModel,
    FinalAnswerFilterMiddleware,
    GenerateOptions,
    Msg,
    OtelTracingMiddleware,
    ReActAgent,
    ReplyBudgetControlMiddleware,
    RuntimeContext,
    TaskReminderMiddleware,
    TextBlockDeltaEvent,
    TodoTools,
    Toolkit,
    ToolUseBlock,
)
from rx_agent.message import ChatUsage
from rx_agent.model.base import ModelChunk

from .conftest import FixedUsageModel, add

CALLS = 50
_TAG = re.compile(r"^job (\d+)$")


class RoutedModel(ChatModel):
    """Routes each call to the script of its session (found in the first user
    message), so overlapping sessions each get a deterministic conversation."""

    name = "routed"
    provider = "scripted"

    def __init__(self, scripts: dict[int, FixedUsageModel]) -> None:
        self.scripts = scripts

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        for msg in messages:
            match = _TAG.match(msg.text) if msg.role.value == "user" else None
            if match:
                return self.scripts[int(match.group(1))].stream(messages, tools, options)
        raise AssertionError("no job tag in the model input")


def script(i: int) -> list[Any]:
    todo = ToolUseBlock(f"todo-{i}", "todo_write",
                        {"todos": [{"content": f"Task for {i}", "status": "in_progress"}]})
    return [
        [f"narration {i}", todo, ToolUseBlock(f"add-{i}-1", "add", {"a": i, "b": 1})],
        [f"still working {i}", ToolUseBlock(f"add-{i}-2", "add", {"a": i, "b": 2})],
        [f"answer {i}"],
    ]


async def test_fifty_concurrent_calls_share_every_builtin_without_leaks() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    # Each model call costs 100 + 10 = 110: two calls spend a budget of 200, so the
    # third step of every reply (and only that one) must run with tool_choice="none".
    usage = ChatUsage(input_tokens=100, output_tokens=10)
    scripts = {i: FixedUsageModel(script(i), usage, name=f"m{i}", delay=0.003)
               for i in range(CALLS)}
    toolkit = Toolkit([add])
    toolkit.register_tool(TodoTools())
    agent = ReActAgent(
        name="worker",
        model=RoutedModel(scripts),
        toolkit=toolkit,
        middlewares=[
            OtelTracingMiddleware(provider),
            FinalAnswerFilterMiddleware(),
            TaskReminderMiddleware(),
            ReplyBudgetControlMiddleware(200),
        ],
    )

    async def one(i: int) -> tuple[Msg, list[AgentEvent], RuntimeContext]:
        ctx = RuntimeContext(session_id=f"s{i}", user_id=f"u{i}")
        events: list[AgentEvent] = []
        msg = await agent.acall(f"job {i}", ctx) if i % 2 else None
        if msg is None:  # half the calls stream, half use acall
            events = [e async for e in agent.astream(f"job {i}", ctx)]
            msg = next(e.result for e in events if type(e).__name__ == "AgentResultEvent")
        return msg, events, ctx

    outcomes = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(CALLS))), 30)

    for i, (msg, events, ctx) in enumerate(outcomes):
        assert msg.text == f"answer {i}"
        # Final-answer filter: the streamed text is this call's final answer only.
        if events:
            deltas = [e.delta for e in events if isinstance(e, TextBlockDeltaEvent)]
            assert deltas == [f"answer {i}"], i
        # Todo list: this session's own list, shown only to this session's model.
        state = ctx.agent_state
        assert state is not None
        assert state.data["tasks"] == [{"content": f"Task for {i}", "status": "in_progress"}]
        calls = scripts[i].calls
        assert len(calls) == 3
        reminder_texts = [
            m.text for c in calls for m in c.messages if m.text.startswith("<system-reminder>")
        ]
        assert len(reminder_texts) == 3
        assert "task list is empty" in reminder_texts[0]
        for text in reminder_texts[1:]:
            assert re.findall(r"Task for \d+", text) == [f"Task for {i}"], text
        # Budget: counted per reply, so exactly the third step is restricted.
        assert [c.options.tool_choice for c in calls] == [None, None, "none"], i

    # Span trees: one trace per call, every child under its own root.
    spans = list(exporter.get_finished_spans())
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        assert span.context is not None
        by_trace[span.context.trace_id].append(span)
    assert len(by_trace) == CALLS
    sessions = set()
    for trace_spans in by_trace.values():
        (root,) = [s for s in trace_spans if s.name == "invoke_agent worker"]
        assert root.parent is None and root.context is not None
        session = (root.attributes or {})["gen_ai.conversation.id"]
        sessions.add(session)
        # Tool-call spans are children of their batch's span; the rest of the root.
        top = [s for s in trace_spans if s.parent and s.parent.span_id == root.context.span_id]
        batch_ids = {s.context.span_id for s in top if s.name.startswith("execute_tool")}
        assert sorted(s.name for s in top) == [
            "chat routed", "chat routed", "chat routed",
            "execute_tool add", "execute_tool todo_write (+1 more)",
        ]
        assert sorted(s.name for s in trace_spans if s is not root and s not in top) == [
            "execute_tool add", "execute_tool add", "execute_tool todo_write",
        ]
        for span in trace_spans:
            assert span.status.status_code is StatusCode.OK
            assert (span.attributes or {})["gen_ai.conversation.id"] == session
            if span is not root and span not in top:
                assert span.parent is not None and span.parent.span_id in batch_ids
    assert sessions == {f"s{i}" for i in range(CALLS)}

    # The calls really overlapped (otherwise this test proves little).
    roots = sorted((s.start_time or 0, s.end_time or 0) for s in spans if s.parent is None)
    overlapping = max(sum(1 for s, e in roots if s <= start < e) for start, _ in roots)
    assert overlapping >= 10
    provider.shutdown()
