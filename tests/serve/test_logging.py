"""What the long-running commands log: `rx-agent serve` (a real process on loopback,
its stderr read) and `rx-agent chat` print a failure's traceback with its session and
run id, at the `--log-level` asked for, and never a token or an API key."""

from __future__ import annotations

import http.server
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rx_agent.cli._logging import REDACTED, Redactor, configure_logging

from .test_workers import TESTS, Worker, _free_port

TOKEN = "serve-log-token-8c1f"
API_KEY = "sk-env-key-5d2e9b7a0c"  # the shape of an OpenAI key, in $OPENAI_API_KEY
SECRETS = (TOKEN, API_KEY, "unseen-bearer-42", "sk-unseenkey123456")


def _serve(tmp: Path, level: str) -> Worker:
    server = Worker.__new__(Worker)
    server.port = _free_port()
    server.url = f"http://127.0.0.1:{server.port}"
    server.log = tmp / f"serve-{level}.log"
    with server.log.open("w") as out:
        server.proc = subprocess.Popen(
            [sys.executable, "-m", "rx_agent", "serve", "serve.served_agents:build_failing",
             "--port", str(server.port), "--log-level", level],
            cwd=TESTS, stdout=subprocess.DEVNULL, stderr=out,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "RX_AGENT_TOKEN": TOKEN,
                 "OPENAI_API_KEY": API_KEY})
    return server


@pytest.mark.parametrize("level", ["info", "error"])
def test_serve_logs_a_failed_calls_traceback_with_its_ids_and_no_secret(
    tmp_path: Path, level: str,
) -> None:
    server = _serve(tmp_path, level)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        server.wait_ready()
        early = httpx.post(f"{server.url}/v1/sessions/trip-1/messages", timeout=20,
                           json={"message": "hi"}, headers={**auth, "Accept": "application/json"})
        late = httpx.post(f"{server.url}/v1/sessions/trip-2/messages", timeout=20,
                          json={"message": "late please"}, headers=auth)
    finally:
        server.stop()
    err = server.log.read_text()
    assert early.status_code == 500, early.text
    run_id = early.headers["x-run-id"]  # the answer says which run to look for
    assert "server log has the details" in early.json()["error"]["message"]
    assert run_id in early.json()["error"]["message"]
    assert late.status_code == 200 and "event: error" in late.text
    late_run = late.headers["x-run-id"]

    assert f"run {run_id} on session 'trip-1' failed with RuntimeError" in err, err
    assert f"run {late_run} on session 'trip-2' failed with RuntimeError" in err, err
    assert err.count("Traceback (most recent call last)") == 2, err
    assert "RuntimeError: upstream refused: token=[redacted]" in err
    for secret in SECRETS:
        assert secret not in err, f"{secret!r} leaked into the log:\n{err}"
    assert err.count(REDACTED) >= 8
    console = f"http://127.0.0.1:{server.port}/console"
    assert (console in err) is (level == "info"), err


def test_serve_help_states_the_token_rule() -> None:
    done = subprocess.run([sys.executable, "-m", "rx_agent", "serve", "--help"],
                          capture_output=True, text=True, timeout=60, check=True)
    text = " ".join(done.stdout.split())
    assert "at least 8 characters" in text and "--log-level" in text


class _Refusing(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that refuses every call, quoting the key it got
    (as some proxies do)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        body = json.dumps({"error": {"message": "bad request from "
                                     f"{self.headers.get('authorization')}"}}).encode()
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("level", ["info", "warning"])
def test_chat_logs_a_failed_reply_at_info_with_its_ids_and_no_key(
    refusing_endpoint: str, level: str,
) -> None:
    key = "sk-chat-key-0f3a8e21"
    done = subprocess.run(
        [sys.executable, "-m", "rx_agent", "chat", "--base-url", refusing_endpoint,
         "--api-key", key, "--model", "m", "--no-color", "--log-level", level],
        input="hello\n", capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")})
    assert done.returncode == 1, done.stderr
    *logged, last = done.stderr.rstrip().splitlines()
    assert last.startswith("rx-agent: error: ")  # the one-line error (the model's message)
    log = "\n".join(logged)
    assert key not in log and key not in done.stdout
    assert key not in last  # the model's error never quotes the configured key
    if level == "info":
        assert "the reply on session 'chat' (run " in log, log
        assert "Traceback (most recent call last)" in log
        assert f"bad request from Bearer {REDACTED}" in log
    else:
        assert "Traceback" not in log, log


def test_the_redactor_hides_configured_env_and_shaped_secrets() -> None:
    redact = Redactor(["tok-12345678", "short"],
                      environ={"ANTHROPIC_API_KEY": "ant-key-abcdefgh", "HOME": "/home/user1",
                               "GITHUB_TOKEN": "ghp_0123456789"})
    text = redact("tok-12345678 ant-key-abcdefgh ghp_0123456789 /home/user1 short "
                  "Authorization: Bearer abc.def sk-proj-0123456789 "
                  '{"x-api-key": "k-000111222"} OPENAI_API_KEY=xyz max_tokens=5')
    assert text == ("[redacted] [redacted] [redacted] /home/user1 short "
                    "Authorization: Bearer [redacted] sk-[redacted] "
                    '{"x-api-key": "[redacted]"} OPENAI_API_KEY=[redacted] max_tokens=5')
    assert "tok-" not in repr(redact)


def test_configure_logging_writes_to_stderr_as_it_is_now(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging("info", ["inline-secret-99"])
        try:
            raise ValueError("has inline-secret-99")
        except ValueError:
            logging.getLogger("rx_agent.test").exception("it failed")
        err = capsys.readouterr().err
        assert "rx_agent.test: it failed" in err and "ValueError: has [redacted]" in err
        with pytest.raises(ValueError, match="log level must be one of"):
            configure_logging("loud")
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
