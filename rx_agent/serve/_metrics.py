"""Counters for ``GET /metrics`` in the Prometheus text format (per worker process)."""

from __future__ import annotations

import bisect
from collections import Counter

__all__ = ["BUCKETS", "Metrics"]

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Upper bounds (seconds) of the call-latency histogram."""


class Histogram:
    __slots__ = ("counts", "sum", "total")

    def __init__(self) -> None:
        self.counts = [0] * len(BUCKETS)
        self.sum = 0.0
        self.total = 0

    def observe(self, seconds: float) -> None:
        at = bisect.bisect_left(BUCKETS, seconds)
        if at < len(BUCKETS):
            self.counts[at] += 1
        self.sum += seconds
        self.total += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out = []
        running = 0
        for bound, count in zip(BUCKETS, self.counts, strict=True):
            running += count
            out.append(f'{name}_bucket{{{labels}le="{bound}"}} {running}')
        out.append(f'{name}_bucket{{{labels}le="+Inf"}} {self.total}')
        bare = "{" + labels.rstrip(",") + "}" if labels else ""
        out.append(f"{name}_sum{bare} {self.sum:.6f}")
        out.append(f"{name}_count{bare} {self.total}")
        return out


class Metrics:
    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()  # (kind, outcome)
        self.errors: Counter[tuple[str, int]] = Counter()  # (code, status)
        self.tokens: Counter[str] = Counter()
        self.events = 0
        self.active = 0
        self.latency: dict[str, Histogram] = {}
        self.first_event = Histogram()

    def call_ended(self, kind: str, outcome: str, seconds: float) -> None:
        self.calls[kind, outcome] += 1
        hist = self.latency.get(outcome)
        if hist is None:
            hist = self.latency[outcome] = Histogram()
        hist.observe(seconds)

    def error(self, code: str, status: int) -> None:
        self.errors[code, status] += 1

    def render(self) -> str:
        out = [
            "# HELP rx_agent_serve_calls_total Calls run, by kind (message, confirm, "
            "external) and outcome (completed, failed, disconnected).",
            "# TYPE rx_agent_serve_calls_total counter",
        ]
        out += [f'rx_agent_serve_calls_total{{kind="{k}",outcome="{o}"}} {n}'
                for (k, o), n in sorted(self.calls.items())]
        out += ["# HELP rx_agent_serve_errors_total Error answers, by code and HTTP status.",
                "# TYPE rx_agent_serve_errors_total counter"]
        out += [f'rx_agent_serve_errors_total{{code="{c}",status="{s}"}} {n}'
                for (c, s), n in sorted(self.errors.items())]
        out += ["# HELP rx_agent_serve_call_duration_seconds Seconds from the post to the "
                "call's end, by outcome.",
                "# TYPE rx_agent_serve_call_duration_seconds histogram"]
        for outcome, hist in sorted(self.latency.items()):
            out += hist.lines("rx_agent_serve_call_duration_seconds", f'outcome="{outcome}",')
        out += ["# HELP rx_agent_serve_first_event_seconds Seconds from the post to the "
                "call's first event.",
                "# TYPE rx_agent_serve_first_event_seconds histogram"]
        out += self.first_event.lines("rx_agent_serve_first_event_seconds", "")
        out += ["# HELP rx_agent_serve_tokens_total Model tokens used by served calls.",
                "# TYPE rx_agent_serve_tokens_total counter"]
        out += [f'rx_agent_serve_tokens_total{{kind="{k}"}} {self.tokens[k]}'
                for k in ("input", "output")]
        out += ["# HELP rx_agent_serve_events_total Events streamed.",
                "# TYPE rx_agent_serve_events_total counter",
                f"rx_agent_serve_events_total {self.events}",
                "# HELP rx_agent_serve_active_calls Calls running now in this worker.",
                "# TYPE rx_agent_serve_active_calls gauge",
                f"rx_agent_serve_active_calls {self.active}"]
        return "\n".join(out) + "\n"
