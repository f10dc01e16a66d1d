"""Fixtures for the tracing tests: an SDK provider that records into memory."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class EndCounter(SpanProcessor):
    """Counts starts and ends per span id (an SDK span logs, not raises, on a 2nd end)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started: Counter[int] = Counter()
        self.ended: Counter[int] = Counter()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        with self._lock:
            self.started[span.context.span_id] += 1

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        with self._lock:
            self.ended[span.context.span_id] += 1

    def assert_each_ended_once(self) -> None:
        with self._lock:
            assert self.started, "no span was started"
            never = [s for s in self.started if s not in self.ended]
            twice = {s: n for s, n in self.ended.items() if n != 1}
        assert not never, f"{len(never)} span(s) never ended"
        assert not twice, f"span(s) ended more than once: {twice}"


class Recorder:
    """A provider with an in-memory exporter, plus helpers to read the span tree."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.counter = EndCounter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.counter)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def one(self, prefix: str) -> ReadableSpan:
        found = self.named(prefix)
        assert len(found) == 1, f"expected one {prefix!r} span, got {[s.name for s in self.spans]}"
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        assert parent.context is not None
        return [
            s for s in self.spans
            if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        for s in self.spans:
            if s.context is not None and s.context.span_id == span.parent.span_id:
                return s
        return None

    def batches(self) -> list[ReadableSpan]:
        """The ``execute_tool`` spans of whole batches (children of an agent span)."""
        return [s for s in self.named("execute_tool")
                if (p := self.parent(s)) is not None and p.name.startswith("invoke_agent")]

    def batch(self) -> ReadableSpan:
        found = self.batches()
        assert len(found) == 1, f"expected one batch span, got {[s.name for s in self.spans]}"
        return found[0]

    def tool_calls(self, batch: ReadableSpan | None = None) -> list[ReadableSpan]:
        """The ``execute_tool`` spans of single calls (children of a batch span), in
        start order."""
        batch_ids = {b.context.span_id for b in ([batch] if batch else self.batches())}
        found = [s for s in self.named("execute_tool")
                 if s.parent is not None and s.parent.span_id in batch_ids]
        return sorted(found, key=lambda s: s.start_time or 0)

    def tree(self) -> list[tuple[str, str | None]]:
        """(name, parent name) for every span, in end order."""
        by_id = {s.context.span_id: s.name for s in self.spans if s.context is not None}
        return [(s.name, by_id.get(s.parent.span_id) if s.parent else None) for s in self.spans]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.provider.shutdown()
