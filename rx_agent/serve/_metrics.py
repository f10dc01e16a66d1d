"""Counters for ``GET /metrics``, kept by ``prometheus_client``, for one worker or all.

In one process each app has its own registry. With ``PROMETHEUS_MULTIPROC_DIR`` set
before ``prometheus_client`` is imported (``rx-agent serve --workers N`` does it), the
library's multiprocess mode keeps every worker's values in files in that directory,
and any worker's ``/metrics`` sums them all: counters and histograms over every
worker that ran, the active-calls gauge over the live ones (``livesum``; a worker
removes its own at shutdown and the dead workers' at start).
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import values as _values
from prometheus_client.multiprocess import (  # unannotated: calls carry a type: ignore
    MultiProcessCollector,
    mark_process_dead,
)

__all__ = ["BUCKETS", "MULTIPROC_ENV", "Metrics", "multiprocess"]

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Upper bounds (seconds) of the latency histograms."""

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess() -> bool:
    """Whether ``prometheus_client`` was imported in its multiprocess mode."""
    return bool(getattr(_values.ValueClass, "_multiprocess", False))


@dataclass(frozen=True)
class _Instruments:
    calls: Counter
    errors: Counter
    latency: Histogram
    first_event: Histogram
    tokens: Counter
    events: Counter
    active: Gauge


def _instruments(registry: CollectorRegistry | None) -> _Instruments:
    tokens = Counter("rx_agent_serve_tokens", "Model tokens used by served calls.",
                     ["kind"], registry=registry)
    for kind in ("input", "output"):  # both shown from the start, at 0
        tokens.labels(kind)
    return _Instruments(
        calls=Counter("rx_agent_serve_calls", "Calls run, by kind (message, confirm, "
                      "external) and outcome (completed, failed, disconnected).",
                      ["kind", "outcome"], registry=registry),
        errors=Counter("rx_agent_serve_errors", "Error answers, by code and HTTP status.",
                       ["code", "status"], registry=registry),
        latency=Histogram("rx_agent_serve_call_duration_seconds", "Seconds from the post "
                          "to the call's end, by outcome.", ["outcome"], buckets=BUCKETS,
                          registry=registry),
        first_event=Histogram("rx_agent_serve_first_event_seconds", "Seconds from the "
                              "post to the call's first event.", buckets=BUCKETS,
                              registry=registry),
        tokens=tokens,
        events=Counter("rx_agent_serve_events", "Events streamed.", registry=registry),
        active=Gauge("rx_agent_serve_active_calls", "Calls running now (in all live "
                     "workers).", registry=registry, multiprocess_mode="livesum"),
    )


_shared: _Instruments | None = None


def _process_instruments() -> _Instruments:
    """One set per process in multiprocess mode: the values live in files keyed by
    metric name and pid, so a second set would overwrite the first's."""
    global _shared
    if _shared is None:
        _sweep_dead_workers()
        _shared = _instruments(None)  # exposed through MultiProcessCollector only
    return _shared


_LIVE_FILE = re.compile(r"gauge_live\w+?_(\d+)\.db$")


def _sweep_dead_workers() -> None:
    """Drop the live gauges of workers that died without saying so (killed, crashed)."""
    directory = os.environ.get(MULTIPROC_ENV)
    if not directory:
        return
    for path in glob.glob(os.path.join(directory, "gauge_live*_*.db")):
        found = _LIVE_FILE.search(os.path.basename(path))
        if found is None:
            continue
        pid = int(found.group(1))
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
        except PermissionError:  # alive, someone else's
            pass


class Metrics:
    """The server's counters; :meth:`render` is the Prometheus text of ``/metrics``."""

    def __init__(self) -> None:
        self.multiprocess = multiprocess()
        self._registry: CollectorRegistry | None = None
        if self.multiprocess:
            self._m = _process_instruments()
        else:
            self._registry = CollectorRegistry()
            self._m = _instruments(self._registry)

    def call_started(self) -> None:
        self._m.active.inc()

    def call_ended(self, kind: str, outcome: str, seconds: float, events: int) -> None:
        m = self._m
        m.active.dec()
        m.calls.labels(kind, outcome).inc()
        m.latency.labels(outcome).observe(seconds)
        if events:
            m.events.inc(events)

    def first_event(self, seconds: float) -> None:
        self._m.first_event.observe(seconds)

    def tokens(self, input_tokens: int, output_tokens: int) -> None:
        tokens = self._m.tokens
        if input_tokens:
            tokens.labels("input").inc(input_tokens)
        if output_tokens:
            tokens.labels("output").inc(output_tokens)

    def error(self, code: str, status: int) -> None:
        self._m.errors.labels(code, str(status)).inc()

    def render(self) -> bytes:
        if self._registry is not None:
            return generate_latest(self._registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    def close(self) -> None:
        """This worker is stopping: its calls no longer count as active."""
        if self.multiprocess and os.environ.get(MULTIPROC_ENV):
            with contextlib.suppress(OSError):
                mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
