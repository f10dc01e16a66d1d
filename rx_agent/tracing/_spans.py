"""Span bookkeeping: a span that ends exactly once, and a stream traced by a span.

Kept apart from the middleware so each hook is only "which span, which attributes".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import Disposable

from ..event import AgentEvent
from ..message import ChatUsage
from ..model.errors import ModelError
from . import _attributes as A

__all__ = ["CANCELLED", "SpanLife", "Watcher", "logger", "set_usage", "traced"]

logger = logging.getLogger("rx_agent.tracing")

CANCELLED = "cancelled"


def set_usage(span: Span, usage: ChatUsage) -> None:
    span.set_attribute(A.GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens)
    span.set_attribute(A.GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens)
    if usage.cached_tokens is not None:
        span.set_attribute(A.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, usage.cached_tokens)
    if usage.reasoning_tokens is not None:
        span.set_attribute(A.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, usage.reasoning_tokens)


class Watcher(Protocol):
    """Reads a span's events as they pass and writes attributes at the end."""

    def observe(self, event: AgentEvent) -> None: ...
    def close(self, span: Span) -> None: ...


class SpanLife:
    """Ends one span exactly once, whichever of complete / error / dispose comes first
    (they can race when the stream and the disposer run on different threads)."""

    __slots__ = ("_ended", "_lock", "span", "watcher")

    def __init__(self, span: Span, watcher: Watcher | None = None) -> None:
        self.span = span
        self.watcher = watcher
        self._lock = threading.Lock()
        self._ended = False

    def _claim(self) -> bool:
        with self._lock:
            if self._ended:
                return False
            self._ended = True
            return True

    def _close_watcher(self) -> None:
        if self.watcher is not None:
            try:
                self.watcher.close(self.span)
            except Exception:  # a tracing bug must never break the agent
                logger.exception("recording span attributes failed")

    def succeed(self) -> None:
        if self._claim():
            self._close_watcher()
            self.span.set_status(Status(StatusCode.OK))
            self.span.end()

    def fail(self, error: BaseException) -> None:
        if self._claim():
            self._close_watcher()
            span = self.span
            span.set_attribute(A.ERROR_TYPE, type(error).__qualname__)
            span.record_exception(error)  # the whole message, the endpoint's URL included
            # The status is what span viewers show first (rx-agent serve's run view, to
            # its clients too): a model error without the URL of its endpoint.
            text = error.public_message if isinstance(error, ModelError) else str(error)
            span.set_status(Status(StatusCode.ERROR, text or type(error).__name__))
            span.end()

    def error(self, error_type: str, description: str) -> None:
        """ERROR without an exception (a tool call whose result is an error)."""
        if self._claim():
            self._close_watcher()
            self.span.set_attribute(A.ERROR_TYPE, error_type)
            self.span.set_status(Status(StatusCode.ERROR, description))
            self.span.end()

    def cancel(self) -> None:
        self.error(CANCELLED, CANCELLED)


def traced(
    tracer: Tracer,
    name: str,
    kind: SpanKind,
    attributes: dict[str, Any],
    parent: Context,
    call: Callable[[], Observable[AgentEvent]],
    watcher: Callable[[Span, Context], Watcher | None],
    on_start: Callable[[Context], None] | None = None,
) -> Observable[AgentEvent]:
    """``call()``'s stream inside a span that lives exactly as long as a subscription.

    ``watcher(span, inside)`` is made per subscription; ``inside`` is the context with
    the span in it (the parent of anything the watcher starts)."""

    def subscribe(
        observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
    ) -> rxabc.DisposableBase:
        span = tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
        inside = trace.set_span_in_context(span, parent)
        watch = watcher(span, inside)
        life = SpanLife(span, watch)
        if on_start is not None:
            on_start(inside)

        on_next: Callable[[AgentEvent], None] = observer.on_next
        if watch is not None:
            observe = watch.observe
            forward = observer.on_next

            def on_next(event: AgentEvent) -> None:
                try:
                    observe(event)
                except Exception:  # a tracing bug must never break the agent
                    logger.exception("tracing failed to read %s", type(event).__name__)
                forward(event)

        def on_error(error: Exception) -> None:
            life.fail(error)
            observer.on_error(error)

        def on_completed() -> None:
            life.succeed()
            observer.on_completed()

        # Current while the inner stream is built and subscribed: tasks created now
        # copy it, so anything they start (sync tools in worker threads included)
        # nests under this span.
        token = otel_context.attach(inside)
        try:
            inner = call().subscribe(on_next, on_error, on_completed, scheduler=scheduler)
        except Exception as exc:
            life.fail(exc)
            observer.on_error(exc)
            return Disposable()
        finally:
            otel_context.detach(token)

        def dispose() -> None:
            life.cancel()  # no-op when the stream already ended the span
            inner.dispose()

        return Disposable(dispose)

    return Observable(subscribe)
