"""Several worker processes on one real redis-server: any worker serves any session,
a busy session answers 409 from every worker, an interrupt reaches the worker running
the call, and `rx-agent serve --workers 2` starts two workers."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

TESTS = Path(__file__).resolve().parent.parent
TOKEN = "worker-token-77"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {**AUTH, "Accept": "application/json"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Worker:
    """``rx-agent serve`` in its own process (its stderr goes to a file we show on
    failure)."""

    def __init__(self, store: str, tmp: Path, *extra: str,
                 env: dict[str, str] | None = None,
                 target: str = "serve.served_agents:build_echo") -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"worker-{self.port}.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rx_agent", "serve", target,
                 "--store", store, "--port", str(self.port), "--token", TOKEN,
                 "--log-level", "warning", *extra],
                cwd=TESTS, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"worker did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def workers(redis_url: str, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[Worker, Worker]]:
    """Two worker processes on one store, shared by the tests of this module (each test
    uses its own sessions)."""
    store = f"{redis_url}?prefix=serve-{uuid.uuid4().hex[:8]}"
    tmp = tmp_path_factory.mktemp("workers")
    pair = (Worker(store, tmp), Worker(store, tmp))
    try:
        for w in pair:
            w.wait_ready()
        yield pair
    finally:
        for w in pair:
            w.stop()


def _reply(worker: Worker, session: str, text: str) -> str:
    r = httpx.post(f"{worker.url}/v1/sessions/{session}/messages", json={"message": text},
                   headers=JSON, timeout=20)
    assert r.status_code == 200, r.text
    out: str = r.json()["content"][0]["text"]
    return out


def test_calls_alternating_between_two_workers_continue_one_conversation(
    workers: tuple[Worker, Worker],
) -> None:
    a, b = workers
    texts = ["one", "two", "three", "four", "five", "six"]
    replies = [_reply((a, b)[i % 2], "trip", t) for i, t in enumerate(texts)]
    pids = [int(re.match(r"echo \d+ @(\d+):", r).group(1)) for r in replies]  # type: ignore[union-attr]
    assert pids[0::2] == [pids[0]] * 3 and pids[1::2] == [pids[1]] * 3
    assert pids[0] != pids[1]  # two processes answered
    # Each call saw the whole conversation so far: 1, 3, 5, ... messages.
    assert [r.split(" @")[0] for r in replies] == [f"echo {2 * i + 1}" for i in range(6)]

    expected = []
    for text, reply in zip(texts, replies, strict=True):
        expected += [("user", text), ("assistant", reply)]
    for worker in (a, b):  # the same context, message by message, from either worker
        state = httpx.get(f"{worker.url}/v1/sessions/trip", headers=AUTH).json()
        assert [(m["role"], m["content"][0]["text"]) for m in state["messages"]] == expected
        assert state["status"] == "idle"


def test_a_session_busy_on_one_worker_is_409_on_the_other_and_interruptible_there(
    workers: tuple[Worker, Worker],
) -> None:
    a, b = workers
    result: list[httpx.Response] = []
    slow = threading.Thread(target=lambda: result.append(httpx.post(
        f"{a.url}/v1/sessions/s1/messages", json={"message": "slow please"}, headers=JSON,
        timeout=30)))
    slow.start()
    deadline = time.monotonic() + 20
    while httpx.get(f"{b.url}/v1/sessions/s1", headers=AUTH).status_code == 404:
        assert time.monotonic() < deadline, (
            f"the slow call never started: {[(r.status_code, r.text[:300]) for r in result]}")
        time.sleep(0.05)

    busy = httpx.post(f"{b.url}/v1/sessions/s1/messages", json={"message": "me too"},
                      headers=JSON, timeout=10)
    assert busy.status_code == 409, busy.text
    assert busy.headers["retry-after"] == "1"
    assert busy.json()["error"]["code"] == "session_busy"
    assert httpx.get(f"{b.url}/v1/sessions/s1", headers=AUTH).json()["status"] == "running"
    assert httpx.delete(f"{b.url}/v1/sessions/s1", headers=AUTH).status_code == 409
    other = httpx.post(f"{b.url}/v1/sessions/s2/messages", json={"message": "hi"},
                       headers=JSON, timeout=10)
    assert other.status_code == 200  # only that session is busy

    # The interrupt goes to the worker that is not running the call.
    stopped = httpx.post(f"{b.url}/v1/sessions/s1/interrupt", headers=AUTH, timeout=10)
    assert stopped.json() == {"interrupted": True}
    slow.join(10)
    assert result[0].status_code == 200
    assert result[0].json()["generate_reason"] == "INTERRUPTED"
    # Free again, from either worker; the next call sees the interrupted reply.
    assert re.fullmatch(r"echo \d+ @\d+: after", _reply(b, "s1", "after"))
    state = httpx.get(f"{a.url}/v1/sessions/s1", headers=AUTH).json()
    assert state["messages"][0]["content"][0]["text"] == "slow please"
    reasons = [m["generate_reason"] for m in state["messages"] if m["role"] == "assistant"]
    assert reasons[-2:] == ["INTERRUPTED", "MODEL_STOP"]


def test_a_disconnect_disposes_the_call_and_saves_it_for_the_other_worker(
    workers: tuple[Worker, Worker],
) -> None:
    a, b = workers
    with httpx.stream("POST", f"{a.url}/v1/sessions/s3/messages", headers=AUTH,
                      json={"message": "slow story"}, timeout=20) as resp:
        for line in resp.iter_lines():
            if line == "event: text_block_delta":
                break  # hang up mid-stream
    # Worker A disposes the call at once: the state is saved, both leases freed.
    deadline = time.monotonic() + 10
    while True:
        state = httpx.get(f"{b.url}/v1/sessions/s3", headers=AUTH).json()
        if state.get("status") == "idle" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert state["status"] == "idle", state
    assert state["messages"][0]["content"][0]["text"] == "slow story"
    assert re.fullmatch(r"echo \d+ @\d+: next", _reply(b, "s3", "next"))


def test_queued_workers_report_a_running_session_and_refuse_to_delete_it(
    store_url: str, tmp_path: Path,
) -> None:
    a, b = (Worker(store_url, tmp_path, "--queue", target="serve.served_agents:build_echo_queued")
            for _ in range(2))
    try:
        for w in (a, b):
            w.wait_ready()
        result: list[httpx.Response] = []
        slow = threading.Thread(target=lambda: result.append(httpx.post(
            f"{a.url}/v1/sessions/q1/messages", json={"message": "slow please"},
            headers=JSON, timeout=30)))
        slow.start()
        deadline = time.monotonic() + 20
        while httpx.get(f"{b.url}/v1/sessions/q1", headers=AUTH).status_code == 404:
            assert time.monotonic() < deadline, (
            f"the slow call never started: {[(r.status_code, r.text[:300]) for r in result]}")
            time.sleep(0.05)
        assert httpx.get(f"{b.url}/v1/sessions/q1", headers=AUTH).json()["status"] == "running"
        refused = httpx.delete(f"{b.url}/v1/sessions/q1", headers=AUTH)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "session_busy"

        # A post to the other worker waits its turn, and an interrupt posted there
        # reaches the running call (the serving lease names its run).
        queued: list[httpx.Response] = []
        later = threading.Thread(target=lambda: queued.append(httpx.post(
            f"{b.url}/v1/sessions/q1/messages", json={"message": "next"}, headers=JSON,
            timeout=30)))
        later.start()
        time.sleep(0.3)
        assert not queued
        stopped = httpx.post(f"{b.url}/v1/sessions/q1/interrupt", headers=AUTH, timeout=10)
        assert stopped.json() == {"interrupted": True}
        slow.join(20)
        later.join(20)
        assert result[0].json()["generate_reason"] == "INTERRUPTED"
        assert re.fullmatch(r"echo \d+ @\d+: next", queued[0].json()["content"][0]["text"])
        assert httpx.get(f"{a.url}/v1/sessions/q1", headers=AUTH).json()["status"] == "idle"
        assert httpx.delete(f"{b.url}/v1/sessions/q1", headers=AUTH).status_code == 204
        assert httpx.get(f"{a.url}/v1/sessions/q1", headers=AUTH).status_code == 404
    finally:
        for w in (a, b):
            w.stop()


def test_rx_agent_serve_with_two_workers_serves_from_both(store_url: str,
                                                          tmp_path: Path) -> None:
    server = Worker(store_url, tmp_path, "--workers", "2")
    try:
        server.wait_ready()
        children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children")
        workers_seen: set[int] = set()
        deadline = time.monotonic() + 20
        replies = []
        while time.monotonic() < deadline:
            # A new connection each time: the kernel hands them to either worker.
            replies.append(_reply(server, "many", f"m{len(replies)}"))
            workers_seen.add(int(replies[-1].split("@")[1].split(":")[0]))
            if len(workers_seen) == 2 and len(replies) >= 4:
                break
        assert len(workers_seen) == 2, replies
        if children.exists():
            assert workers_seen <= {int(p) for p in children.read_text().split()}
        assert [r.split(" @")[0] for r in replies] == [
            f"echo {2 * i + 1}" for i in range(len(replies))]
    finally:
        server.stop()


def test_more_than_one_worker_needs_a_shared_store(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rx_agent", "serve", "serve.served_agents:build_echo",
         "--workers", "2", "--port", str(_free_port())],
        cwd=TESTS, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "needs a session store the workers share" in done.stderr


def test_serve_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rx_agent", "serve", "serve.served_agents:build_echo",
         "--host", "0.0.0.0", "--port", str(_free_port())],
        cwd=TESTS, capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if k != "RX_AGENT_TOKEN"})
    assert done.returncode == 2 and "without a token" in done.stderr


