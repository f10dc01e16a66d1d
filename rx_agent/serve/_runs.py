"""The calls this worker ran recently: their events (for replay after a dropped
connection and for the console's timeline) and who may read them."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..session import SessionKey

__all__ = ["MAX_EVENTS", "RunLog", "RunRecord"]

MAX_EVENTS = 10_000
"""Events kept per run; a longer run keeps its first ones and says it was cut."""


@dataclass(eq=False)
class RunRecord:
    run_id: str
    key: SessionKey
    kind: str
    started: float = field(default_factory=time.time)
    ended: float | None = None
    status: str = "running"
    """``running``, ``completed``, ``failed`` or ``disconnected``."""
    error: str | None = None
    events: list[tuple[float, str, str]] = field(default_factory=list)
    """``(time, type, event JSON)`` in stream order; the SSE id is ``<run id>.<index>``."""
    count: int = 0
    """Events streamed (more than ``events`` holds once it was cut)."""
    input_tokens: int = 0
    output_tokens: int = 0
    """Tokens of the run's model calls, from their ``model_call_end`` usage."""
    model_calls: int = 0
    tool_calls: int = 0
    """Tool calls whose result the run streamed (``tool_result_end``: ran, failed or
    denied); a call paused for confirmation counts in the run that answers it."""

    @property
    def truncated(self) -> bool:
        return self.count > len(self.events)

    def add(self, type_: str, data: str) -> int:
        """Record one event; its number in the stream."""
        seq = self.count
        self.count += 1
        if type_ == "tool_result_end":
            self.tool_calls += 1
        elif type_ == "model_call_end":
            self.model_calls += 1
        if seq < MAX_EVENTS:
            self.events.append((time.time(), type_, data))
        return seq

    def used(self, input_tokens: int, output_tokens: int) -> None:
        """Add one model call's usage."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens

    def finish(self, status: str, error: str | None = None) -> None:
        self.status = status
        self.error = error
        self.ended = time.time()

    def summary(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "session_id": self.key.session_id, "kind": self.kind,
                "status": self.status, "started": self.started, "ended": self.ended,
                "duration": None if self.ended is None else self.ended - self.started,
                "error": self.error, "events": self.count, "truncated": self.truncated,
                "tokens": {"input": self.input_tokens, "output": self.output_tokens},
                "model_calls": self.model_calls, "tool_calls": self.tool_calls}


class RunLog:
    """The last ``keep`` runs of this worker, oldest dropped first."""

    def __init__(self, keep: int = 200) -> None:
        self.keep = keep
        self._runs: OrderedDict[str, RunRecord] = OrderedDict()

    def start(self, run_id: str, key: SessionKey, kind: str) -> RunRecord:
        record = RunRecord(run_id, key, kind)
        self._runs[run_id] = record
        while len(self._runs) > self.keep:
            self._runs.popitem(last=False)
        return record

    def get(self, run_id: str, key: SessionKey) -> RunRecord | None:
        """The run, only for the session (and so the user) it belongs to."""
        record = self._runs.get(run_id)
        return record if record is not None and record.key == key else None

    def of_session(self, key: SessionKey) -> list[RunRecord]:
        return [r for r in self._runs.values() if r.key == key]
