"""Resuming a stream on another worker through the run journal: two real ``rx-agent
serve`` processes share one store (a real redis-server, a real PostgreSQL); a client
reads part of a call's stream from worker A, drops, reconnects to worker B with
``Last-Event-ID`` and gets exactly the rest, no gap and no duplicate. Also: the
answers for bad or expired ids, another worker's run summary, the session-wide stream,
and ``subscribe_durable_events`` reading what the server wrote."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _services import postgres_url  # noqa: F401  (the fixture)

from rx_agent import ReActAgent
from rx_agent.serve import create_app
from rx_agent.session import (
    JournalEntry,
    SessionKey,
    session_store_from_url,
    subscribe_durable_events,
)

from .conftest import LiveServer, SlowModel
from .test_workers import AUTH, Worker

SSE = {**AUTH, "Accept": "text/event-stream"}
USER = "default"  # the user of --token


def frames(response: httpx.Response) -> Iterator[dict[str, str]]:
    """The SSE frames of a streamed response: ``{"id", "event", "data"}`` (what it has)."""
    frame: dict[str, str] = {}
    for line in response.iter_lines():
        if not line:
            if frame:
                yield frame
            frame = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            frame[name] = value.removeprefix(" ")
    if frame:
        yield frame


def _text(got: list[dict[str, str]]) -> str:
    return "".join(json.loads(f["data"])["delta"] for f in got
                   if f.get("event") == "text_block_delta")


@pytest.fixture(scope="module", params=["redis", "postgres"])
def pair(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Worker, Worker, str]]:
    """Two ``rx-agent serve --keep-running`` workers on one store, and its URL."""
    if request.param == "redis":
        url = f"{request.getfixturevalue('redis_url')}?prefix=resume-{uuid.uuid4().hex[:8]}"
    else:
        url = f"{request.getfixturevalue('postgres_url')}?prefix=resume_{uuid.uuid4().hex[:8]}"
    tmp = tmp_path_factory.mktemp("resume")
    workers = [Worker(url, tmp, "--keep-running", target="serve.served_agents:build_stream")
               for _ in range(2)]
    try:
        for w in workers:
            w.wait_ready()
        yield workers[0], workers[1], url
    finally:
        for w in workers:
            w.stop()


def _start_and_drop(a: Worker, session: str, words: int, keep: int,
                    ) -> tuple[str, list[dict[str, str]]]:
    """Post to A, read ``keep`` event frames, drop the connection: (run id, frames)."""
    got: list[dict[str, str]] = []
    with httpx.stream("POST", f"{a.url}/v1/sessions/{session}/messages", headers=SSE,
                      json={"message": f"stream {words}"}, timeout=30) as response:
        assert response.status_code == 200, response.read()
        run_id = response.headers["x-run-id"]
        for frame in frames(response):
            got.append(frame)
            if len(got) == keep:
                break
    return run_id, got


def test_a_client_drops_on_one_worker_and_gets_exactly_the_rest_from_the_other(
    pair: tuple[Worker, Worker, str],
) -> None:
    a, b, _ = pair
    run_id, first = _start_and_drop(a, "resume-1", words=60, keep=8)
    assert [f["id"] for f in first] == [f"{run_id}.{i}" for i in range(8)]

    with httpx.stream("GET", f"{b.url}/v1/sessions/resume-1/runs/{run_id}/events",
                      headers={**SSE, "Last-Event-ID": first[-1]["id"]},
                      timeout=30) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["x-run-id"] == run_id
        rest = list(frames(response))
    # No gap, no duplicate: the ids go on from the last one A sent.
    assert [f["id"] for f in rest] == [f"{run_id}.{i}" for i in range(8, 8 + len(rest))]
    end = rest[-1]
    assert end["event"] == "run_end"
    assert json.loads(end["data"]) == {"run_id": run_id, "status": "completed", "error": None}
    # The call ran on to its end on A after the drop (--keep-running): the whole reply.
    text = _text(first + rest)
    assert text.startswith(" ".join(f"w{i}" for i in range(60)) + " done @")
    assert [f["event"] for f in rest[-3:-1]] == ["agent_result", "agent_end"]
    # Resending the id of the run's end: nothing follows (204: an EventSource stops).
    after_end = httpx.get(f"{b.url}/v1/sessions/resume-1/runs/{run_id}/events",
                          headers={**SSE, "Last-Event-ID": end["id"]}, timeout=10)
    assert after_end.status_code == 204 and after_end.content == b""
    # Read again from the start, on either worker: the same frames.
    for worker in (a, b):
        with httpx.stream("GET", f"{worker.url}/v1/sessions/resume-1/runs/{run_id}/events",
                          headers=SSE, timeout=30) as response:
            assert list(frames(response)) == first + rest
    # The conversation was saved by the call that ran on.
    state = httpx.get(f"{b.url}/v1/sessions/resume-1", headers=AUTH, timeout=10).json()
    assert [m["role"] for m in state["messages"]] == ["user", "assistant"]
    assert state["messages"][1]["content"][0]["text"] == text


def test_a_reconnect_while_the_call_runs_follows_it_live(
    pair: tuple[Worker, Worker, str],
) -> None:
    a, b, _ = pair
    run_id, first = _start_and_drop(a, "resume-live", words=150, keep=3)
    # Straight away: the call is still streaming on A.
    assert httpx.get(f"{b.url}/v1/sessions/resume-live", headers=AUTH,
                     timeout=10).json()["status"] == "running"
    with httpx.stream("GET", f"{b.url}/v1/sessions/resume-live/runs/{run_id}/events",
                      headers={**SSE, "Last-Event-ID": first[-1]["id"]},
                      timeout=30) as response:
        rest = list(frames(response))
    assert [f["id"] for f in rest] == [f"{run_id}.{i}" for i in range(3, 3 + len(rest))]
    assert rest[-1]["event"] == "run_end"
    assert _text(first + rest).startswith(" ".join(f"w{i}" for i in range(150)) + " done")


def test_another_workers_run_is_summarised_from_the_journal(
    pair: tuple[Worker, Worker, str],
) -> None:
    a, b, _ = pair
    r = httpx.post(f"{a.url}/v1/sessions/resume-sum/messages", json={"message": "stream 5"},
                   headers={**AUTH, "Accept": "application/json"}, timeout=30)
    run_id = r.headers["x-run-id"]
    summary = httpx.get(f"{b.url}/v1/sessions/resume-sum/runs/{run_id}?after=2",
                        headers=AUTH, timeout=10).json()
    assert summary["from_journal"] is True
    assert summary["status"] == "completed" and summary["model_calls"] == 1
    assert summary["tokens"] == {"input": 5, "output": 5}
    local = httpx.get(f"{a.url}/v1/sessions/resume-sum/runs/{run_id}?after=2",
                      headers=AUTH, timeout=10).json()
    assert summary["events"] == local["events"]
    def untimed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in e.items() if k != "time"} for e in events]

    # The same events with the same ids (each side stamps its own receipt time).
    assert untimed(summary["events_after"]) == untimed(local["events_after"])


def test_bad_and_unknown_points_are_clear_errors(pair: tuple[Worker, Worker, str]) -> None:
    a, b, _ = pair
    r = httpx.post(f"{a.url}/v1/sessions/resume-bad/messages", json={"message": "stream 2"},
                   headers={**AUTH, "Accept": "application/json"}, timeout=30)
    run_id = r.headers["x-run-id"]
    base = f"{b.url}/v1/sessions/resume-bad"
    bad = httpx.get(f"{base}/runs/{run_id}/events",
                    headers={**SSE, "Last-Event-ID": "garbage"}, timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_last_event_id"
    other = httpx.get(f"{base}/runs/{run_id}/events",
                      headers={**SSE, "Last-Event-ID": "someotherrun.3"}, timeout=10)
    assert other.status_code == 400 and "names run 'someotherrun'" in other.text
    gone = httpx.get(f"{base}/runs/nosuchrun/events",
                     headers={**SSE, "Last-Event-ID": "nosuchrun.3"}, timeout=10)
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "events_gone"
    assert "retention" in gone.json()["error"]["message"]
    missing = httpx.get(f"{base}/runs/nosuchrun/events", headers=SSE, timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "no_run"
    session_gone = httpx.get(f"{base}/events", headers={**SSE, "Last-Event-ID": "nope.1"},
                             timeout=10)
    assert session_gone.status_code == 410


def test_the_session_stream_follows_every_run_and_resumes_across_runs(
    pair: tuple[Worker, Worker, str],
) -> None:
    a, b, _ = pair
    got: list[dict[str, str]] = []
    ready = threading.Event()

    def follow() -> None:
        with httpx.stream("GET", f"{b.url}/v1/sessions/resume-all/events", headers=SSE,
                          timeout=30) as response:
            ready.set()
            for frame in frames(response):
                got.append(frame)
                if sum(f.get("event") == "run_end" for f in got) == 2:
                    return

    reader = threading.Thread(target=follow)
    reader.start()
    assert ready.wait(10)
    runs = []
    for worker in (a, b):  # one run on each worker
        r = httpx.post(f"{worker.url}/v1/sessions/resume-all/messages",
                       json={"message": "stream 3"},
                       headers={**AUTH, "Accept": "application/json"}, timeout=30)
        runs.append(r.headers["x-run-id"])
    reader.join(30)
    assert not reader.is_alive()
    assert [f["id"].rpartition(".")[0] for f in got if f.get("event") == "run_end"] == runs
    # From a point in the first run: the rest of it, then the second run.
    point = got[4]["id"]
    with httpx.stream("GET", f"{a.url}/v1/sessions/resume-all/events",
                      headers={**SSE, "Last-Event-ID": point}, timeout=30) as response:
        rest: list[dict[str, str]] = []
        for frame in frames(response):
            rest.append(frame)
            if len(rest) == len(got) - 5:
                break
    assert rest == got[5:]


async def test_subscribe_durable_events_reads_what_the_workers_wrote(
    pair: tuple[Worker, Worker, str],
) -> None:
    a, _, url = pair
    store = session_store_from_url(url)
    key = SessionKey(USER, "resume-sub")
    entries: list[JournalEntry] = []
    ended = asyncio.Event()

    def on_next(entry: JournalEntry) -> None:
        entries.append(entry)
        if entry.is_end:
            ended.set()

    subscription = subscribe_durable_events(store, key).subscribe(on_next)
    await asyncio.sleep(0.3)
    async with httpx.AsyncClient(timeout=30) as client:
        posted = await client.post(f"{a.url}/v1/sessions/resume-sub/messages",
                                   json={"message": "stream 4"}, headers=SSE)
    await asyncio.wait_for(ended.wait(), 10)
    subscription.dispose()
    streamed = list(frames(posted))
    run_id = posted.headers["x-run-id"]
    events = [e for e in entries if not e.is_end]
    assert [e.id for e in events] == [f["id"] for f in streamed]
    assert [e.event.type for e in events] == [f["event"] for f in streamed]
    assert [e.event.model_dump_json() for e in events] == [f["data"] for f in streamed]
    # From a point, not live: the rest of the run.
    later = [e async for e in store.journal().follow(key, events[2].seq, live=False)]
    assert [e.index for e in later] == list(range(3, len(events) + 1))
    assert later[-1].is_end and later[-1].run_id == run_id
    if hasattr(store, "aclose"):
        await store.aclose()


# -- one worker in this process (uvicorn on loopback), the default disconnect ----------


def test_without_keep_running_a_drop_disposes_the_call_and_the_rest_is_what_it_made(
    live: Any,
) -> None:
    model = SlowModel([f"c{i} " for i in range(200)], delay=0.02)
    app = create_app(ReActAgent(name="slow", model=model), auth={"tok-12345678": "default"})
    server: LiveServer = live(app)
    headers = {"Authorization": "Bearer tok-12345678", "Accept": "text/event-stream"}
    got: list[dict[str, str]] = []
    with httpx.stream("POST", f"{server.url}/v1/sessions/d1/messages", headers=headers,
                      json={"message": "hi"}, timeout=30) as response:
        run_id = response.headers["x-run-id"]
        for frame in frames(response):
            got.append(frame)
            if len(got) == 5:
                break
    assert model.cancelled.wait(10)  # disposed
    with httpx.stream("GET", f"{server.url}/v1/sessions/d1/runs/{run_id}/events",
                      headers={**headers, "Last-Event-ID": got[-1]["id"]},
                      timeout=30) as response:
        rest = list(frames(response))
    assert [f["id"] for f in rest] == [f"{run_id}.{i}" for i in range(5, 5 + len(rest))]
    assert json.loads(rest[-1]["data"])["status"] == "disconnected"
    assert len(_text(got + rest).split()) < 200


def test_an_app_without_a_journal_says_so_and_keep_running_needs_one(live: Any) -> None:
    with pytest.raises(ValueError, match="keep_running=True needs a journal"):
        create_app(ReActAgent(name="e", model=SlowModel(["a"], 0)), journal=False,
                   keep_running=True)
    with pytest.raises(TypeError, match="journal must be"):
        create_app(ReActAgent(name="e", model=SlowModel(["a"], 0)), journal="yes")  # type: ignore[arg-type]
    server: LiveServer = live(create_app(ReActAgent(name="e", model=SlowModel(["a"], 0)),
                                         journal=False))
    r = httpx.post(f"{server.url}/v1/sessions/n1/messages", json={"message": "hi"},
                   headers={"Accept": "application/json"}, timeout=10)
    run_id = r.headers["x-run-id"]
    off = httpx.get(f"{server.url}/v1/sessions/n1/runs/{run_id}/events", timeout=10)
    assert off.status_code == 501 and off.json()["error"]["code"] == "no_journal"
    # The run log of this worker still answers.
    assert httpx.get(f"{server.url}/v1/sessions/n1/runs/{run_id}",
                     timeout=10).json()["status"] == "completed"
    paths = httpx.get(f"{server.url}/openapi.json", timeout=10).json()["paths"]
    assert "/v1/sessions/{session_id}/runs/{run_id}/events" in paths
    assert "410" in paths["/v1/sessions/{session_id}/events"]["get"]["responses"]


def test_the_journal_benchmark_runs(redis_url: str, postgres_url: str) -> None:  # noqa: F811
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_journal.py"
    done = subprocess.run([sys.executable, str(bench), "--smoke", "--redis-url", redis_url,
                           "--postgres-url", postgres_url], check=False, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[2:]]
    assert [row[0] for row in rows] == ["memory", "sqlite", "redis", "postgres"]
    assert all(float(row[3]) > 0 for row in rows)  # the ratios
