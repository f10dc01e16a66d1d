"""OpenTelemetry tracing for agents: :class:`OtelTracingMiddleware`.

Only the OpenTelemetry API is needed to import this module; install the SDK and an
exporter (the ``otel`` extra: ``pip install -e '.[otel]'`` from a checkout) to record
and ship spans.
"""

from .. import _publish
from . import _attributes as attributes
from ._middleware import CANCELLED, INSTRUMENTATION_NAME, OtelTracingMiddleware

TracingMiddleware = OtelTracingMiddleware
"""AgentScope Python's name for :class:`OtelTracingMiddleware` (the same class)."""

__all__ = [
    "CANCELLED",
    "INSTRUMENTATION_NAME",
    "OtelTracingMiddleware",
    "TracingMiddleware",
    "attributes",
]

_publish.publish_all(globals(), __all__)
