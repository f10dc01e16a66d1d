"""End to end: spans exported by the real OTLP/HTTP exporter to a local receiver."""

from __future__ import annotations

import asyncio
import gzip
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as ProtoStatus
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from rx_agent import (
    OtelTracingMiddleware,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    tool,
)


class Receiver:
    """A minimal OTLP/HTTP trace receiver on 127.0.0.1 that decodes what it gets."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.content_types: list[str | None] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                receiver.paths.append(self.path)
                receiver.content_types.append(self.headers.get("Content-Type"))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1/traces"

    def spans(self) -> list[tuple[ProtoSpan, str]]:
        """Every received span with its instrumentation scope name."""
        return [
            (span, scope_spans.scope.name)
            for request in self.requests
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    rec.thread.start()
    yield rec
    rec.server.shutdown()
    rec.server.server_close()
    rec.thread.join(5)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def attr(span: ProtoSpan, key: str) -> Any:
    for kv in span.attributes:
        if kv.key == key:
            value = kv.value
            return getattr(value, value.WhichOneof("value"))
    raise KeyError(key)


async def test_spans_reach_an_otlp_receiver_as_one_tree(receiver: Receiver) -> None:
    exporter = OTLPSpanExporter(endpoint=receiver.endpoint, timeout=5)
    provider = TracerProvider(resource=Resource.create({"service.name": "rx-agent-test"}))
    # Batching exports from the processor's thread: the agent's loop never waits on HTTP.
    provider.add_span_processor(BatchSpanProcessor(exporter))
    try:
        model = ScriptedModel([[ToolUseBlock("c1", "add", {"a": 2, "b": 3})], "five"],
                              name="m-otlp")
        agent = ReActAgent(name="calc", model=model, toolkit=Toolkit([add]),
                           middlewares=[OtelTracingMiddleware(provider)])
        msg = await asyncio.wait_for(agent.acall("2+3?", RuntimeContext(session_id="s-otlp")), 5)
        assert msg.text == "five"
        assert await asyncio.to_thread(provider.force_flush, 10_000)
    finally:
        await asyncio.to_thread(provider.shutdown)

    assert set(receiver.paths) == {"/v1/traces"}
    assert set(receiver.content_types) == {"application/x-protobuf"}
    received = receiver.spans()
    assert {scope for _, scope in received} == {"rx_agent"}
    spans = [span for span, _ in received]
    by_name: dict[str, list[ProtoSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    assert sorted(by_name) == ["chat m-otlp", "execute_tool add", "invoke_agent calc"]
    assert len(by_name["chat m-otlp"]) == 2
    assert len(by_name["execute_tool add"]) == 2  # the batch and its one call

    (root,) = by_name["invoke_agent calc"]
    assert root.parent_span_id == b""
    assert root.kind == ProtoSpan.SPAN_KIND_INTERNAL
    (batch,) = [s for s in by_name["execute_tool add"] if s.parent_span_id == root.span_id]
    (call,) = [s for s in by_name["execute_tool add"] if s is not batch]
    for child in [*by_name["chat m-otlp"], batch]:
        assert child.trace_id == root.trace_id
        assert child.parent_span_id == root.span_id
    assert call.trace_id == root.trace_id
    assert call.parent_span_id == batch.span_id
    assert {c.kind for c in by_name["chat m-otlp"]} == {ProtoSpan.SPAN_KIND_CLIENT}
    assert all(s.status.code == ProtoStatus.STATUS_CODE_OK for s in spans)

    assert attr(root, "gen_ai.operation.name") == "invoke_agent"
    assert attr(root, "gen_ai.conversation.id") == "s-otlp"
    for tool_span in (batch, call):
        assert attr(tool_span, "gen_ai.tool.name") == "add"
        assert attr(tool_span, "gen_ai.tool.call.id") == "c1"
    assert attr(call, "rx_agent.tool.state") == "SUCCESS"
    first_chat = min(by_name["chat m-otlp"], key=lambda s: s.start_time_unix_nano)
    assert attr(first_chat, "gen_ai.request.model") == "m-otlp"
    assert attr(first_chat, "gen_ai.usage.input_tokens") > 0
    reasons = attr(first_chat, "gen_ai.response.finish_reasons")
    assert [v.string_value for v in reasons.values] == ["tool_calls"]
