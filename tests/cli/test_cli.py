"""The ``rx-agent`` command, run for real in a subprocess (``python -m rx_agent``).

The chat command talks to a small OpenAI-compatible server started here on
127.0.0.1 (stdlib ``http.server`` in a thread), driven through the CLI's stdin.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rx_agent import (
    AgentEndEvent,
    AgentResultEvent,
    AgentStartEvent,
    CustomEvent,
    GenerateReason,
    ThinkingBlockDeltaEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    parse_event,
)

ANSI = "\x1b["


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"OPENAI_API_KEY", "OPENAI_BASE_URL", "RX_AGENT_MODEL", "FORCE_COLOR",
                     "NO_COLOR", "COLUMNS"}
    }
    env.update(extra)
    return env


def run_cli(
    *args: str,
    input: str | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 30,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rx_agent", *args],
        check=False,
        input=input,
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=cwd,
        env=env if env is not None else _env(),
        timeout=timeout,
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rx-agent: error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


# -- help ----------------------------------------------------------------------------


def run_many(
    commands: dict[str, tuple[str, ...]],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run several commands at once (each in its own process): start-up dominates."""
    started = {
        key: subprocess.Popen(
            [sys.executable, "-m", "rx_agent", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            cwd=cwd,
            env=env if env is not None else _env(),
        )
        for key, args in commands.items()
    }
    done = {}
    for key, proc in started.items():
        out, err = proc.communicate(timeout=30)
        done[key] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


HELP_CASES = {
    "rx-agent": ((), "demo"),
    "demo": (("demo",), "--json"),
    "chat": (("chat",), "--base-url"),
    "plan": (("plan",), "MODULE:ATTR"),
    "sessions": (("sessions",), "delete"),
}


@pytest.fixture(scope="module")
def helps() -> dict[str, subprocess.CompletedProcess[str]]:
    return run_many({key: (*args, "--help") for key, (args, _) in HELP_CASES.items()})


@pytest.mark.parametrize("command", list(HELP_CASES))
def test_help(helps: dict[str, subprocess.CompletedProcess[str]], command: str) -> None:
    proc = helps[command]
    needle = HELP_CASES[command][1]
    assert proc.returncode == 0, proc.stderr
    assert needle in proc.stdout
    assert proc.stdout.startswith("usage: rx-agent")


def test_no_command_is_a_usage_error() -> None:
    proc = run_cli()
    assert proc.returncode == 2
    assert "rx-agent: error:" in proc.stderr


# -- demo ----------------------------------------------------------------------------


def test_demo_plain_output() -> None:
    started = time.perf_counter()
    proc = run_cli("demo")
    elapsed = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout
    assert ANSI not in out  # not a terminal: plain text
    # The plan first, then the run.
    assert out.index("on_model_call") < out.index("you > ")
    assert "RunLogMiddleware (100)" in out
    assert "TimingMiddleware (0)" in out
    assert "DynamicPromptMiddleware (1)" in out
    assert "thinking > The user wants the current weather in Paris" in out
    assert "tool call · get_weather" in out
    assert '{"city": "Paris"}' in out
    assert "tool result · get_weather · SUCCESS" in out
    assert "tool result · calculate · SUCCESS" in out
    assert "demo > Right now in Paris it's sunny with a light breeze, 21 °C (69.8 °F)." in out
    assert "system prompt: You are a concise weather assistant." in out
    assert "done · MODEL_STOP · 3 model call(s) · tokens:" in out
    # Streaming is visible (the scripted model waits between chunks) yet quick.
    assert 0.5 < elapsed < 10


def test_demo_no_color_strips_styles_even_on_forced_colour() -> None:
    runs = run_many(
        {"coloured": ("demo", "--delay", "0"), "plain": ("demo", "--delay", "0", "--no-color")},
        env=_env(FORCE_COLOR="1"),
    )
    coloured, plain = runs["coloured"], runs["plain"]
    assert coloured.returncode == 0
    assert ANSI in coloured.stdout
    assert plain.returncode == 0
    assert ANSI not in plain.stdout
    assert "tool call · calculate" in plain.stdout


def test_demo_json_is_one_event_per_line() -> None:
    proc = run_cli("demo", "--json", "--delay", "0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    events = [parse_event(line) for line in lines]  # every line, nothing else
    assert isinstance(events[0], AgentStartEvent)
    assert isinstance(events[-1], AgentEndEvent)
    assert [e.tool_call_name for e in events if isinstance(e, ToolCallStartEvent)] == [
        "get_weather",
        "calculate",
    ]
    assert all(e.state.value == "SUCCESS" for e in events if isinstance(e, ToolResultEndEvent))
    assert any(isinstance(e, ThinkingBlockDeltaEvent) for e in events)
    assert any(isinstance(e, CustomEvent) and e.name == "log" for e in events)
    (result,) = [e for e in events if isinstance(e, AgentResultEvent)]
    assert result.result.generate_reason is GenerateReason.MODEL_STOP
    assert "69.8 °F" in result.result.text
    # Round trip: what was printed is what parse_event rebuilds.
    assert [json.loads(e.model_dump_json()) for e in events] == [json.loads(x) for x in lines]


def test_demo_into_a_closed_pipe_is_quiet() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rx_agent", "demo", "--delay", "0.005"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # like `rx-agent demo | head -1`
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=20) in (0, 141)
    assert "Traceback" not in stderr
    assert "Exception ignored" not in stderr


# -- plan ----------------------------------------------------------------------------

AGENTS_MODULE = textwrap.dedent(
    """
    from rx_agent import ExtensionPoint, MiddlewareBase, ReActAgent, ScriptedModel

    class Outer(MiddlewareBase):
        def order(self):
            return 10

    class Inner(MiddlewareBase):
        def active_points(self):
            return {ExtensionPoint.ON_MODEL_CALL}

    class Silent(MiddlewareBase):
        def active_points(self):
            return set()

    def factory():
        return ReActAgent(
            name="planned",
            model=ScriptedModel(["hi"]),
            middlewares=[Inner(), Silent(), Outer()],
        )

    async def async_factory():
        return factory()

    agent = factory()
    number = 42

    def needs_args(x):
        return factory()

    def needs_two(x, y):
        return factory()

    def store_factory(store):
        return ReActAgent(
            name="planned",
            model=ScriptedModel(["hi"]),
            middlewares=[Inner(), Silent(), Outer()],
            session_store=store,
        )

    def explodes():
        raise RuntimeError("no agent today")

    def wrong_type():
        return "an agent, honest"
    """
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("project")
    (root / "myagents.py").write_text(AGENTS_MODULE)
    (root / "broken.py").write_text("raise ValueError('config missing')\n")
    (root / "exits.py").write_text("import sys\nsys.exit(3)\n")
    (root / "needs_dep.py").write_text("import no_such_dependency_xyz\n")
    return root


PLAN_TARGETS = ["myagents:agent", "myagents:factory", "myagents:async_factory",
                "myagents:store_factory"]


@pytest.fixture(scope="module")
def plans(project: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    return run_many({target: ("plan", target) for target in PLAN_TARGETS}, cwd=project)


@pytest.mark.parametrize("target", PLAN_TARGETS)
def test_plan_table_from_the_current_directory(
    plans: dict[str, subprocess.CompletedProcess[str]], target: str
) -> None:
    proc = plans[target]
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Execution plan of 'planned'" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") >= 3}
    assert "Outer (10) → Inner (1)" in rows["on_model_call"]
    assert "onion" in rows["on_model_call"]
    assert "Outer (10)" in rows["on_agent"] and "Inner" not in rows["on_agent"]
    assert "transformer" in rows["on_system_prompt"]
    assert "notification" in rows["on_agent_finish"]
    assert "registered but silent: Silent" in " ".join(out.split())


def test_plan_of_the_demo_agent() -> None:
    proc = run_cli("plan", "rx_agent._demo:build_demo_agent")
    assert proc.returncode == 0, proc.stderr
    assert "RunLogMiddleware (100)" in proc.stdout
    assert "3 middleware(s) registered" in " ".join(proc.stdout.split())


def test_plan_mermaid(project: Path) -> None:
    proc = run_cli("plan", "myagents:factory", "--mermaid", cwd=project)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "flowchart TD"
    assert '    on_model_call_0["Outer (order 10)"]' in lines
    assert '    on_model_call_1["Inner (order 1)"]' in lines
    assert ANSI not in proc.stdout


BAD_TARGETS = {
    "no_such_module_abc:agent": ("cannot import 'no_such_module_abc'",),
    "myagents:missing": ("has no attribute 'missing'",),
    "myagents:number": ("is a int", "not a ReActAgent"),
    "myagents:needs_args": ("myagents:needs_args(store) built the agent on another session "
                            "store",),
    "myagents:needs_two": ("myagents:needs_two needs the arguments (x, y)",),
    "myagents.py:agent": ("drop .py and write myagents:agent",),
    "myagents:explodes": ("RuntimeError: no agent today",),
    "myagents:wrong_type": ("returned a str, not a ReActAgent",),
    "broken:agent": ("importing 'broken' failed", "ValueError: config missing"),
    "exits:agent": ("importing 'exits' failed", "SystemExit"),
    "needs_dep:agent": ("importing 'needs_dep' failed", "no_such_dependency_xyz"),
    "myagents": ("expected MODULE:ATTR",),
    "myagents:": ("expected MODULE:ATTR",),
}


@pytest.fixture(scope="module")
def bad_plans(project: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    return run_many({target: ("plan", target) for target in BAD_TARGETS}, cwd=project)


@pytest.mark.parametrize("target", list(BAD_TARGETS))
def test_plan_bad_input(
    bad_plans: dict[str, subprocess.CompletedProcess[str]], target: str
) -> None:
    proc = bad_plans[target]
    needles = BAD_TARGETS[target]
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert_one_line_error(proc, *needles)


def test_traceback_flag_shows_the_cause(project: Path) -> None:
    proc = run_cli("--traceback", "plan", "myagents:explodes", cwd=project)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr
    assert "no agent today" in proc.stderr


# -- chat: a tiny OpenAI-compatible server ---------------------------------------------


class FakeOpenAI:
    """Answers chat completions as SSE, choosing the reply from the last user message.

    ``slow ...``: 200 text chunks 50 ms apart (to be interrupted); ``calc ...``: a
    tool call to ``calculate`` then, once the result is back, the answer; anything
    else: a short greeting. Requests without ``Bearer good-key`` get a 401.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.client_gone = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append(body)
                if self.headers.get("Authorization") != "Bearer good-key":
                    payload = json.dumps(
                        {"error": {"message": "Incorrect API key provided", "code": "bad_key"}}
                    ).encode()
                    self.send_response(401)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for delta, finish, pause in owner.reply(body["messages"]):
                        time.sleep(pause)
                        self.chunk({"index": 0, "delta": delta, "finish_reason": finish})
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    owner.client_gone.set()

            def chunk(self, choice: dict[str, Any]) -> None:
                payload = {"id": "x", "object": "chat.completion.chunk", "choices": [choice]}
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    @staticmethod
    def reply(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str | None, float]]:
        users = [m for m in messages if m["role"] == "user"]
        question = users[-1]["content"] if users else ""
        if isinstance(question, list):
            question = "".join(part.get("text", "") for part in question)
        if question.startswith("slow"):
            return [({"content": f"word{i} "}, None, 0.05) for i in range(200)] + [
                ({}, "stop", 0)
            ]
        if question.startswith("calc"):
            if messages[-1]["role"] != "tool":
                call = {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calculate", "arguments": '{"expression": "6 * 7"}'},
                }
                return [({"tool_calls": [call]}, None, 0), ({}, "tool_calls", 0)]
            return [({"content": f"The answer is {messages[-1]['content']}."}, "stop", 0)]
        return [({"content": "Hello "}, None, 0), ({"content": "from the server."}, "stop", 0)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    yield fake
    fake.close()


def chat_env(server: FakeOpenAI, key: str = "good-key") -> dict[str, str]:
    return _env(OPENAI_BASE_URL=server.url, OPENAI_API_KEY=key, RX_AGENT_MODEL="test-model")


def test_chat_without_endpoint_says_how_to_configure() -> None:
    proc = run_cli("chat", input="hi\n")
    assert proc.returncode == 2
    assert_one_line_error(proc, "OPENAI_API_KEY", "OPENAI_BASE_URL", "--offline")


def test_chat_needs_a_model_name_for_a_custom_endpoint() -> None:
    proc = run_cli("chat", "--base-url", "http://127.0.0.1:9/v1", input="hi\n")
    assert_one_line_error(proc, "--model", "RX_AGENT_MODEL")


def test_chat_streams_and_keeps_the_session(server: FakeOpenAI) -> None:
    proc = run_cli("chat", "--session", "s1", input="hi\nhello again\n/exit\n",
                   env=chat_env(server))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout
    assert "test-model at " + server.url in out
    assert "session 's1'" in out
    assert out.count("assistant > Hello from the server.") == 2
    assert out.count("done · MODEL_STOP") == 2
    first, second = server.requests
    assert first["model"] == "test-model"
    assert first["stream"] is True
    # The second call continues the session: the first exchange is in its input.
    contents = [m.get("content") for m in second["messages"]]
    assert "hi" in contents and "Hello from the server." in contents and "hello again" in contents


def test_chat_session_continues_after_a_restart(server: FakeOpenAI, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    for line in ("hi", "hello again"):
        proc = run_cli("chat", "--session", "s1", "--store", store, input=line + "\n",
                       env=chat_env(server))
        assert proc.returncode == 0, proc.stderr
    assert "continuing, 2 earlier message(s)" in proc.stdout
    # The second process sent the first one's exchange to the model.
    contents = [m.get("content") for m in server.requests[1]["messages"]]
    assert contents[1:] == ["hi", "Hello from the server.", "hello again"]


def test_chat_options_override_the_environment(server: FakeOpenAI) -> None:
    proc = run_cli(
        "chat", "--base-url", server.url, "--api-key", "good-key", "--model", "other",
        input="hi\n", env=_env(OPENAI_API_KEY="bad", RX_AGENT_MODEL="ignored"),
    )
    assert proc.returncode == 0, proc.stderr  # EOF (Ctrl-D) quits cleanly
    assert server.requests[0]["model"] == "other"


def test_chat_shows_tool_calls(server: FakeOpenAI) -> None:
    proc = run_cli("chat", input="calc six times seven\n", env=chat_env(server))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "tool call · calculate" in out
    assert '{"expression": "6 * 7"}' in out
    assert "tool result · calculate · SUCCESS" in out
    assert "assistant > The answer is 42." in out
    assert len(server.requests) == 2
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == [
        "calculate",
        "current_time",
        "get_weather",
    ]


def test_chat_bad_key_is_one_line_error(server: FakeOpenAI) -> None:
    proc = run_cli("chat", input="hi\n", env=chat_env(server, key="wrong"))
    assert proc.returncode == 1
    assert_one_line_error(proc, "401", "Incorrect API key")
    assert len(server.requests) == 1  # an authentication error is not retried


def test_chat_unreachable_endpoint_is_one_line_error() -> None:
    with socket.socket() as sock:  # a port that nobody listens on any more
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = _env(OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1", RX_AGENT_MODEL="m")
    proc = run_cli("chat", input="hi\n", env=env)
    assert proc.returncode == 1
    assert_one_line_error(proc, "cannot connect", str(port))


def test_chat_offline_needs_no_endpoint() -> None:
    proc = run_cli("chat", "--offline", "--delay", "0", input="weather in London?\n")
    assert proc.returncode == 0, proc.stderr
    assert "London: overcast with drizzle, 14 °C" in proc.stdout
    assert "assistant > Right now in London" in proc.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery to a child is POSIX")
def test_chat_ctrl_c_interrupts_the_reply_not_the_chat(server: FakeOpenAI) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rx_agent", "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=chat_env(server),
    )
    assert proc.stdin is not None and proc.stdout is not None
    output = bytearray()
    seen = threading.Condition()

    def read() -> None:
        assert proc.stdout is not None
        while chunk := proc.stdout.read1(4096):
            with seen:
                output.extend(chunk)
                seen.notify_all()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def wait_for(needle: bytes, after: int = 0) -> int:
        with seen:
            assert seen.wait_for(lambda: output.find(needle, after) >= 0, timeout=15), bytes(
                output
            ).decode(errors="replace")
            return output.find(needle, after)

    try:
        proc.stdin.write(b"slow story please\n")
        proc.stdin.flush()
        wait_for(b"word3 ")  # the reply is streaming
        proc.send_signal(signal.SIGINT)
        end = wait_for(b"done \xc2\xb7 INTERRUPTED")
        assert server.client_gone.wait(5)  # the HTTP stream was closed, not left running
        proc.stdin.write(b"hi\n")
        proc.stdin.flush()
        wait_for(b"Hello from the server.", end)
        proc.stdin.write(b"/exit\n")
        proc.stdin.flush()
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(5)
    text = output.decode()
    assert "word199" not in text
    assert proc.stderr is not None
    assert "Traceback" not in proc.stderr.read().decode()
    proc.stdin.close()
    proc.stdout.close()
    proc.stderr.close()
    # The interrupted exchange stays consistent: the next call saw it in the session.
    assert len(server.requests) == 2
    assert any(m["role"] == "assistant" for m in server.requests[1]["messages"])
