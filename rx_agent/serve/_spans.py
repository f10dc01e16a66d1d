"""Spans for the console: an in-process OpenTelemetry exporter keyed by run.

The agent's ``OtelTracingMiddleware`` (with the global tracer provider) records the
spans; this exporter keeps the recent ones grouped by trace, and a trace belongs to
the run whose ``invoke_agent`` span carries its ``rx_agent.run_id``. Without the
OpenTelemetry SDK (the ``otel`` extra) or without a tracing middleware there are no
spans, and the console says so.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

__all__ = ["SpanFeed", "install_feed", "install_global_provider"]

log = logging.getLogger("rx_agent.serve")

_RUN_ID = "rx_agent.run_id"
MAX_TRACES = 500


def _span_json(span: Any) -> dict[str, Any]:
    ctx = span.get_span_context()
    parent = span.parent
    return {
        "name": span.name,
        "span_id": f"{ctx.span_id:016x}",
        "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
        "start": span.start_time / 1e9 if span.start_time else None,
        "end": span.end_time / 1e9 if span.end_time else None,
        "status": span.status.status_code.name,
        "description": span.status.description,
        "attributes": {k: v if isinstance(v, (str, int, float, bool)) else list(v)
                       for k, v in (span.attributes or {}).items()},
    }


class SpanFeed:
    """Finished spans by trace id, and which run each trace belongs to (thread-safe:
    the SDK may export from any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._traces: OrderedDict[int, list[dict[str, Any]]] = OrderedDict()
        self._runs: OrderedDict[str, int] = OrderedDict()

    def add(self, spans: Sequence[Any]) -> None:
        with self._lock:
            for span in spans:
                trace_id = span.get_span_context().trace_id
                self._traces.setdefault(trace_id, []).append(_span_json(span))
                self._traces.move_to_end(trace_id)
                run_id = (span.attributes or {}).get(_RUN_ID)
                if isinstance(run_id, str):  # only the agent span carries it
                    self._runs[run_id] = trace_id
            while len(self._traces) > MAX_TRACES:
                self._traces.popitem(last=False)
            while len(self._runs) > MAX_TRACES:
                self._runs.popitem(last=False)

    def of_run(self, run_id: str) -> list[dict[str, Any]]:
        with self._lock:
            trace_id = self._runs.get(run_id)
            spans = list(self._traces.get(trace_id, ())) if trace_id is not None else []
        return sorted(spans, key=lambda s: s["start"] or 0.0)


def install_feed(provider: Any = None) -> SpanFeed | None:
    """A feed on ``provider`` (an SDK ``TracerProvider``), else on the global provider
    when that is an SDK one; ``None`` when there is none or the SDK is missing."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
        from opentelemetry.sdk.trace.export import (
            SimpleSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )
    except ImportError:
        return None
    feed = SpanFeed()

    class _Exporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            feed.add(spans)
            return SpanExportResult.SUCCESS

    if provider is None:
        provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        log.info("no OpenTelemetry SDK tracer provider: the console shows no spans")
        return None
    provider.add_span_processor(SimpleSpanProcessor(_Exporter()))
    return feed


def install_global_provider() -> None:
    """Make an SDK ``TracerProvider`` the global one unless one is set (``rx-agent serve``
    owns its process; a library never does this behind its user's back)."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return
    if type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider":
        trace.set_tracer_provider(TracerProvider())
