"""``OtelTracingMiddleware``: OpenTelemetry spans for a reply, printed as a tree.

Needs the OpenTelemetry SDK, the ``otel`` extra: ``pip install -e '.[otel]'`` from a
checkout (without it the example says so and exits with status 1). By default the
spans go to an in-memory exporter and are printed as a tree; ``--console`` uses the
SDK's console exporter instead (one JSON document per span). For a real backend, swap
in ``OTLPSpanExporter(endpoint="http://localhost:4318/v1/traces")`` behind a
``BatchSpanProcessor``.

Run: python examples/tracing_otel.py [--console]
"""

from __future__ import annotations

import sys

from rx_agent import (
    OtelTracingMiddleware,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    tool,
)

try:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
except ImportError as exc:  # rx_agent needs only the API; recording spans needs the SDK
    sys.exit(
        f"This example needs the OpenTelemetry SDK ({exc}).\n"
        "Install the otel extra from a checkout of rx_agent: pip install -e '.[otel]'"
    )

SHOWN = (
    "gen_ai.conversation.id", "gen_ai.request.model", "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons", "gen_ai.tool.call.id",
)


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny, 24 C in {city}"


@tool
def get_time(city: str) -> str:
    """The local time in a city."""
    return f"15:04 in {city}"


def print_tree(spans: list[ReadableSpan]) -> None:
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent else None
        children.setdefault(parent, []).append(span)

    def show(span: ReadableSpan, depth: int) -> None:
        attrs = span.attributes or {}
        details = ", ".join(f"{k.split('.', 1)[1]}={attrs[k]}" for k in SHOWN if k in attrs)
        print(f"{'    ' * depth}{span.name} [{span.status.status_code.name}] {details}")
        assert span.context is not None
        for child in children.get(span.context.span_id, []):
            show(child, depth + 1)

    for root in children.get(None, []):
        show(root, 0)


def main() -> None:
    console = "--console" in sys.argv
    # --8<-- [start:setup]
    exporter = ConsoleSpanExporter() if console else InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    agent = (
        ReActAgent.builder()
        .name("assistant")
        .model(ScriptedModel([
            [ToolUseBlock("w1", "get_weather", {"city": "Paris"}),
             ToolUseBlock("t1", "get_time", {"city": "Paris"})],
            "It is 15:04 and sunny (24 C) in Paris.",
        ], name="gpt-4o-mini"))
        .toolkit(Toolkit([get_weather, get_time]))
        # Explicit provider here; OtelTracingMiddleware() alone uses the global one.
        .middleware(OtelTracingMiddleware(provider))
        .build()
    )
    # --8<-- [end:setup]
    reply = agent.call_sync("Weather and time in Paris?", RuntimeContext(session_id="demo-1"))
    print(f"answer: {reply.text}")
    if isinstance(exporter, InMemorySpanExporter):
        print_tree(list(exporter.get_finished_spans()))
    provider.shutdown()


if __name__ == "__main__":
    main()
