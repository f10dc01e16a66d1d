"""The server's small parts: run records, keepalives."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from rx_agent import ReActAgent
from rx_agent.serve import _calls, _runs, create_app
from rx_agent.session import SessionKey

from .conftest import SlowModel


def test_a_run_keeps_its_first_events_and_counts_the_rest(monkeypatch: Any) -> None:
    monkeypatch.setattr(_runs, "MAX_EVENTS", 3)
    record = _runs.RunRecord("r1", SessionKey("u", "s"), "message")
    assert [record.add("x", "{}") for _ in range(5)] == [0, 1, 2, 3, 4]
    assert len(record.events) == 3 and record.truncated
    assert record.summary()["events"] == 5


def test_the_run_log_forgets_the_oldest_and_hides_other_sessions() -> None:
    log = _runs.RunLog(keep=2)
    mine, theirs = SessionKey("alice", "s"), SessionKey("bob", "s")
    log.start("r1", mine, "message")
    log.start("r2", theirs, "message")
    log.start("r3", mine, "message")
    assert log.get("r1", mine) is None  # forgotten
    assert log.get("r2", mine) is None  # not alice's
    assert [r.run_id for r in log.of_session(mine)] == ["r3"]


def test_a_quiet_stream_sends_keepalive_comments(live: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_calls, "KEEPALIVE", 0.1)
    server = live(create_app(ReActAgent(name="a", model=SlowModel(["a", "b"], delay=0.5))))
    with httpx.stream("POST", server.url + "/v1/sessions/s/messages",
                      json={"message": "hi"}) as resp:
        lines = list(resp.iter_lines())
    assert ": keepalive" in lines
    assert lines.index(": keepalive") < lines.index("event: agent_end")


def test_a_quiet_openai_stream_sends_keepalive_comments(
        live: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_calls, "KEEPALIVE", 0.1)
    server = live(create_app(ReActAgent(name="a", model=SlowModel(["a", "b"], delay=0.5))))
    with httpx.stream("POST", server.url + "/v1/chat/completions", json={
            "model": "a", "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}) as resp:
        lines = list(resp.iter_lines())
    assert ": keepalive" in lines
    assert lines.index(": keepalive") < lines.index("data: [DONE]")
