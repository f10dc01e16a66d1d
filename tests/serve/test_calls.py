"""Posting messages over real HTTP: SSE events, JSON answers, disconnects, busy sessions."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from rx_agent import (
    InMemorySessionStore,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    SessionKey,
    parse_event,
)
from rx_agent.serve import create_app

from .conftest import EchoModel, SlowModel
from .test_metrics import samples, value


def read_sse(lines: Any) -> list[dict[str, str]]:
    """Parse an SSE body (an iterator of lines) into frames."""
    frames: list[dict[str, str]] = []
    frame: dict[str, str] = {}
    for line in lines:
        if line == "":
            if frame:
                frames.append(frame)
            frame = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            frame[name] = value
    if frame:
        frames.append(frame)
    return frames


def test_sse_stream_carries_every_event_with_its_type_and_a_resumable_id(live: Any) -> None:
    agent = ReActAgent(name="assistant", model=ScriptedModel([["Hel", "lo."]]))
    server = live(create_app(agent))
    with httpx.stream("POST", server.url + "/v1/sessions/s1/messages",
                      json={"message": "hi"}) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        run_id = resp.headers["x-run-id"]
        frames = read_sse(resp.iter_lines())
    events = [parse_event(f["data"]) for f in frames]
    assert [f["event"] for f in frames] == [e.type for e in events]
    assert events[0].type == "agent_start" and events[-1].type == "agent_end"
    deltas = [e.delta for e in events if e.type == "text_block_delta"]  # type: ignore[attr-defined]
    assert deltas == ["Hel", "lo."]
    assert [f["id"] for f in frames] == [f"{run_id}.{i}" for i in range(len(frames))]
    result = next(e for e in events if e.type == "agent_result")
    assert result.result.text == "Hello."  # type: ignore[attr-defined]

    # The run's events can be read again after the last one the client got.
    replay = httpx.get(server.url + f"/v1/sessions/s1/runs/{run_id}",
                       headers={"Last-Event-ID": f"{run_id}.2"}).json()
    assert [e["id"] for e in replay["events_after"]] == [f["id"] for f in frames[3:]]
    assert replay["status"] == "completed"


def test_accept_json_returns_the_final_message(live: Any) -> None:
    agent = ReActAgent(name="assistant", model=EchoModel())
    server = live(create_app(agent))
    url = server.url + "/v1/sessions/s1/messages"
    first = httpx.post(url, json={"message": "one"}, headers={"Accept": "application/json"})
    assert first.status_code == 200, first.text
    assert first.json()["content"][0]["text"] == "echo 1: one"
    second = httpx.post(url, json={"messages": [{"role": "user", "content": "two"}]},
                        headers={"Accept": "application/json"})
    assert second.json()["content"][0]["text"] == "echo 3: two"
    assert second.json()["generate_reason"] == "MODEL_STOP"

    state = httpx.get(server.url + "/v1/sessions/s1").json()
    assert [m["content"][0]["text"] for m in state["messages"]] == [
        "one", "echo 1: one", "two", "echo 3: two"]
    assert state["status"] == "idle" and state["pending"] is None
    assert httpx.get(server.url + "/v1/sessions").json() == {"sessions": ["s1"]}


def test_client_disconnect_disposes_the_call_and_keeps_the_session_usable(live: Any) -> None:
    slow = SlowModel(["a", "b", "c", "d", "e", "f"], delay=0.5)
    store = InMemorySessionStore()
    agent = ReActAgent(name="assistant", model=slow, session_store=store)
    app = create_app(agent)
    server = live(app)
    with httpx.stream("POST", server.url + "/v1/sessions/s1/messages",
                      json={"message": "tell me"}) as resp:
        run_id = resp.headers["x-run-id"]
        for line in resp.iter_lines():
            if line.startswith("event: text_block_delta"):
                break  # the first delta arrived: hang up mid-stream
    # The model stream is closed long before the script would have ended (3 s).
    assert slow.closed.wait(2), "the model stream was not closed after the disconnect"
    assert slow.cancelled.is_set() and slow.sent < len(slow.chunks)

    deadline = time.monotonic() + 3
    while True:
        run = httpx.get(server.url + f"/v1/sessions/s1/runs/{run_id}").json()
        if run["status"] == "disconnected" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert run["status"] == "disconnected"
    # The state was kept (the input is in the session) and the session is free again.
    state = store.load(SessionKey("__anon__", "s1"))
    assert state is not None and state.context[0].text == "tell me"
    metrics = samples(httpx.get(server.url + "/metrics").text)
    assert value(metrics, "rx_agent_serve_calls_total", kind="message",
                 outcome="disconnected") == 1

    slow.chunks = ["ok"]
    answer = httpx.post(server.url + "/v1/sessions/s1/messages", json={"message": "again"},
                        headers={"Accept": "application/json"})
    assert answer.status_code == 200 and answer.json()["content"][0]["text"] == "ok"


def test_a_post_to_a_running_session_gets_409_with_retry_after(live: Any) -> None:
    gate = threading.Event()
    slow = SlowModel(["x", "y"], delay=0.0, gate=gate)
    server = live(create_app(ReActAgent(name="assistant", model=slow)))
    url = server.url + "/v1/sessions/s1/messages"
    answers: list[httpx.Response] = []
    first = threading.Thread(target=lambda: answers.append(
        httpx.post(url, json={"message": "one"}, headers={"Accept": "application/json"})))
    first.start()
    assert slow.started.wait(5)
    busy = httpx.post(url, json={"message": "two"})
    assert busy.status_code == 409
    assert busy.headers["retry-after"] == "1"
    assert busy.json()["error"]["code"] == "session_busy"
    assert httpx.get(server.url + "/v1/sessions/s1").json()["status"] == "running"
    # Another session is not blocked.
    other = httpx.post(server.url + "/v1/sessions/s2/messages", json={"message": "hi"},
                       headers={"Accept": "application/json"})
    assert other.status_code == 200
    gate.set()
    first.join(10)
    assert answers[0].status_code == 200 and answers[0].json()["content"][0]["text"] == "xy"


def test_queue_mode_runs_concurrent_posts_one_after_another(live: Any) -> None:
    agent = ReActAgent(name="assistant", model=EchoModel(delay=0.2))
    server = live(create_app(agent, queue=True))
    url = server.url + "/v1/sessions/s1/messages"
    answers: dict[str, str] = {}

    def post(text: str) -> None:
        r = httpx.post(url, json={"message": text}, headers={"Accept": "application/json"},
                       timeout=30)
        answers[text] = r.json()["content"][0]["text"]

    threads = [threading.Thread(target=post, args=(t,)) for t in ("one", "two")]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join(10)
    # Both ran, one after the other: the later one saw the earlier one's two messages.
    seen = sorted(answers[text].split(":")[0] for text in ("one", "two"))
    assert seen == ["echo 1", "echo 3"], answers
    assert all(answers[text].endswith(f": {text}") for text in ("one", "two"))


def test_interrupt_ends_the_running_call(live: Any) -> None:
    slow = SlowModel(["a"] * 20, delay=0.2)
    server = live(create_app(ReActAgent(name="assistant", model=slow)))
    results: list[httpx.Response] = []
    t = threading.Thread(target=lambda: results.append(httpx.post(
        server.url + "/v1/sessions/s1/messages", json={"message": "go"},
        headers={"Accept": "application/json"}, timeout=10)))
    t.start()
    assert slow.started.wait(5)
    time.sleep(0.3)
    r = httpx.post(server.url + "/v1/sessions/s1/interrupt", json={"message": "stop please"})
    assert r.json() == {"interrupted": True}
    t.join(10)
    assert results[0].json()["generate_reason"] == "INTERRUPTED"
    assert httpx.post(server.url + "/v1/sessions/s1/interrupt").json() == {"interrupted": False}


def test_delete_and_plan_and_health_and_openapi(live: Any) -> None:
    agent = ReActAgent(name="assistant", model=EchoModel())
    server = live(create_app(agent))
    httpx.post(server.url + "/v1/sessions/s1/messages", json={"message": "x"},
               headers={"Accept": "application/json"})
    assert httpx.delete(server.url + "/v1/sessions/s1").status_code == 204
    gone = httpx.get(server.url + "/v1/sessions/s1")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "no_session"
    assert httpx.delete(server.url + "/v1/sessions/s1").status_code == 404

    plan = httpx.get(server.url + "/v1/plan").json()
    assert plan["agent"] == "assistant" and plan["mermaid"] == agent.plan.to_mermaid()
    assert next(p["point"] for p in plan["points"]) == "on_agent"
    assert httpx.get(server.url + "/healthz").json()["status"] == "ok"
    doc = httpx.get(server.url + "/openapi.json").json()
    for path in ("/v1/sessions/{session_id}/messages", "/v1/sessions/{session_id}/confirm",
                 "/v1/sessions/{session_id}/external-results", "/v1/plan", "/metrics"):
        assert path in doc["paths"]


def test_create_app_checks_its_arguments() -> None:
    agent = ReActAgent(name="a", model=EchoModel())
    with pytest.raises(ValueError, match="pass a factory"):
        create_app(agent, session_store=InMemorySessionStore())
    with pytest.raises(TypeError, match="not a ReActAgent"):
        create_app(lambda store: "agent")
    with pytest.raises(ValueError, match="session store it is given"):
        create_app(lambda store: agent)
    with pytest.raises(ValueError, match="max_body"):
        create_app(agent, max_body=0)
    with pytest.raises(TypeError, match="auth must be"):
        create_app(agent, auth=42)  # type: ignore[arg-type]
    store = InMemorySessionStore()
    app = create_app(lambda s: ReActAgent(name="f", model=EchoModel(), session_store=s), store)
    assert app.state.service.store is store
    assert json.dumps(RuntimeContext(session_id="x").session_id) == '"x"'


def test_queue_mode_reports_a_running_session_and_refuses_to_delete_it(live: Any) -> None:
    gate = threading.Event()
    slow = SlowModel(["x", "y"], delay=0.0, gate=gate)
    store = InMemorySessionStore()
    server = live(create_app(ReActAgent(name="assistant", model=slow, session_store=store),
                             queue=True))
    base = server.url + "/v1/sessions/s1"
    answers: dict[str, httpx.Response] = {}

    def post(text: str) -> None:
        answers[text] = httpx.post(base + "/messages", json={"message": text},
                                   headers={"Accept": "application/json"}, timeout=30)

    first = threading.Thread(target=post, args=("one",))
    first.start()
    second = threading.Thread(target=post, args=("two",))  # waits its turn
    try:
        assert slow.started.wait(5)
        assert httpx.get(base).json()["status"] == "running"
        refused = httpx.delete(base)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "session_busy"
        assert "interrupt it first" in refused.json()["error"]["message"]
        second.start()
        time.sleep(0.2)
        assert "two" not in answers
        assert httpx.delete(base).status_code == 409  # a waiting call counts too
    finally:
        gate.set()
    first.join(10)
    assert httpx.get(base).json()["status"] in ("running", "idle")  # two may be running
    second.join(10)
    assert [answers[t].json()["content"][0]["text"] for t in ("one", "two")] == ["xy", "xy"]
    state = httpx.get(base).json()
    assert state["status"] == "idle" and len(state["messages"]) == 4

    # Free now: the delete sticks (no call saves the session back afterwards).
    assert httpx.delete(base).status_code == 204
    time.sleep(0.2)
    assert httpx.get(base).status_code == 404
    assert store.load(SessionKey("__anon__", "s1")) is None


def _connections(events: list[str]) -> Any:
    def trace(name: str, info: dict[str, Any]) -> None:
        if name == "connection.connect_tcp.complete":
            events.append(name)
    return trace


def test_a_500_keeps_the_connection_usable_for_the_next_request(live: Any) -> None:
    def auth(token: str) -> str | None:
        if token == "crash-the-auth":
            raise RuntimeError("the user database is down")  # a bug in the app's own code
        return "ann" if token == "ann-token-1" else None

    model = ScriptedModel([RuntimeError("model exploded"), "fine"])
    server = live(create_app(ReActAgent(name="a", model=model, max_retries=1), auth=auth))
    connects: list[str] = []
    with httpx.Client(base_url=server.url, timeout=10) as client:
        hooks = {"trace": _connections(connects)}
        crashed = client.get("/v1/sessions", extensions=hooks,
                             headers={"Authorization": "Bearer crash-the-auth"})
        assert crashed.status_code == 500
        assert crashed.json()["error"]["code"] == "internal_error"
        assert "RuntimeError" in crashed.text and "database" not in crashed.text
        failed = client.post("/v1/sessions/s1/messages", json={"message": "hi"},
                             extensions=hooks,
                             headers={"Authorization": "Bearer ann-token-1",
                                      "Accept": "application/json"})
        assert failed.status_code == 500 and "run " in failed.json()["error"]["message"]
        after = client.post("/v1/sessions/s2/messages", json={"message": "hi"},
                            extensions=hooks,
                            headers={"Authorization": "Bearer ann-token-1",
                                     "Accept": "application/json"})
        assert after.status_code == 200 and after.json()["content"][0]["text"] == "fine"
    assert connects == ["connection.connect_tcp.complete"]  # all three on one connection
    for answer in (crashed, failed):
        assert answer.headers.get("connection", "keep-alive") != "close"
