"""The middleware examples run offline, exit 0 and print what they should; the docs
include code from them only through sections that exist."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The module fixture runs every block (example) side by side before the first test: its
# time is charged to that test, so the limit covers the whole batch on a loaded machine.
pytestmark = pytest.mark.timeout(900)
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"

NAMES = [
    "full_observability",
    "session_bootstrap",
    "request_context",
    "timing",
    "rate_limit",
    "dynamic_system_prompt",
    "model_fallback",
    "final_answer_filter",
    "task_list",
    "reply_budget",
    "tracing_otel",
    "durable_sessions",
    "json_file_store",
    "continue_once",
    "serve_app",
    "openai_client",
    "agui_client",
    "support_desk",
    "mcp_tools",
    "tool_middleware",
    "tool_flags",
    "a2a_client",
    "a2a_remote_tool",
]


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


def _run(name: str) -> Run:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
    )
    return Run(done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, Run]]:
    # All at once: each run is mostly interpreter start-up and imports.
    with ThreadPoolExecutor(max_workers=len(NAMES)) as pool:
        yield dict(zip(NAMES, pool.map(_run, NAMES), strict=True))


def ok(runs: dict[str, Run], name: str) -> Run:
    run = runs[name]
    assert run.returncode == 0, f"{name}.py failed:\n{run.stderr}"
    return run


def test_full_observability(runs: dict[str, Run]) -> None:
    assert ok(runs, "full_observability").lines == [
        "[agent] start for assistant",
        "[system_prompt] length=28",
        "[reasoning] start",
        "[model_call] ScriptedModel",
        "[model_call] done",
        "[reasoning] end",
        "[reasoning] start",
        "[model_call] ScriptedModel",
        "[model_call] done",
        "[reasoning] end",
        "[agent] end for assistant",
        "answer: It is sunny and 24 C in Paris.",
    ]


def test_session_bootstrap(runs: dict[str, Run]) -> None:
    out = ok(runs, "session_bootstrap").stdout
    assert out.count("user: [user profile] Alice prefers metric units") == 2  # seen twice
    assert "  assistant: It is 24 C.\n  user: And in Fahrenheit?" in out
    assert "profile messages in the session: 1" in out  # but added once


def test_json_file_store(runs: dict[str, Run]) -> None:
    assert ok(runs, "json_file_store").lines == [
        "You are Ada. [SessionKey(user_id='ada', session_id='s1')] 2",
        "['ada+s1.json']",
    ]


def test_request_context(runs: dict[str, Run]) -> None:
    assert ok(runs, "request_context").lines == [
        "[req] user=alice session=s-42 reqId=req-7f3a",
        "answer: Done, the export is logged.",
        "tool saw one trace id: True",
        "caller ctx has trace_id: False",
    ]


def test_timing(runs: dict[str, Run]) -> None:
    run = ok(runs, "timing")
    times = [int(m) for m in re.findall(r"^\[timing\] assistant: (\d+)ms$", run.stdout, re.M)]
    # Three and four chunks, 20 ms apart.
    assert len(times) == 2 and times[0] >= 55 and times[1] >= 75, run.stdout
    assert run.lines[-1] == "answer: RxPY is a reactive stream library."


def test_rate_limit(runs: dict[str, Run]) -> None:
    run = ok(runs, "rate_limit")
    found = re.findall(r"^\[model\] call \d at \+([\d.]+)s$", run.stdout, re.M)
    stamps = [float(s) for s in found]
    assert len(stamps) == 3, run.stdout
    # Slots are reserved 0.2 s apart; a call never starts before its slot (a busy
    # machine may start it later).
    for k, stamp in enumerate(stamps):
        assert stamp >= 0.2 * k - 0.01, stamps
    assert "replies: ['answer 0', 'answer 1', 'answer 2']" in run.stdout


def test_dynamic_system_prompt(runs: dict[str, Run]) -> None:
    run = ok(runs, "dynamic_system_prompt")
    assert run.lines[0] == "answer: Good afternoon!"
    prompt = run.stdout.split("system prompt the model saw:\n", 1)[1]
    assert re.fullmatch(
        r"You are a helpful assistant\.\n\n## Current Context\nTime: \d{4}-\d\d-\d\d \d\d:\d\d UTC"
        r"\n\n## Current Context\nUser locale: en-GB\n",
        prompt,
    ), prompt


def test_model_fallback(runs: dict[str, Run]) -> None:
    run = ok(runs, "model_fallback")
    switched = "  primary failed: ModelServerError: 503 Service Unavailable; switching to fallback"
    answer = "; answer: Answer from the backup model."
    assert run.lines == [
        "fail over at once: 1 scripted failure(s), max_retries(1)",
        switched,
        "  attempts on the primary: 1" + answer,
        "retry, then fail over: 3 scripted failure(s), max_retries(3)",
        switched,
        "  attempts on the primary: 3" + answer,
        # The built-in retries below on_model_call used up the script: the middleware
        # sees that, not the 503.
        "the real error hidden: 1 scripted failure(s), max_retries(3)",
        "  primary failed: ScriptExhaustedError: ScriptedModel 'primary' has no response "
        "for call #2: the script has 1 response(s); switching to fallback",
        "  attempts on the primary: 2" + answer,
        "failover from primary: ModelServerError: 503 Service Unavailable",
        "builder: Answer from the backup model.",
    ]
    # The agent logs the failover, but an application without logging set up sees
    # nothing on stderr.
    assert run.stderr == ""


def test_final_answer_filter(runs: dict[str, Run]) -> None:
    assert ok(runs, "final_answer_filter").lines == [
        "without filter: 'Let me check the weather. It is sunny and 24 C in Paris.' "
        "(tool results: 1)",
        "with filter:    'It is sunny and 24 C in Paris.' (tool results: 1)",
    ]


def test_task_list(runs: dict[str, Run]) -> None:
    out = ok(runs, "task_list").stdout
    assert "on_reasoning          TaskReminderMiddleware(1)" in out
    assert "step 1 reminder: The task list is empty." in out
    assert ("step 2 reminder: Current task list (update it with todo_write as you make "
            "progress): | 1. [~] Search for sources (in_progress) | "
            "2. [ ] Write the summary (pending)") in out
    assert "step 4 reminder: " in out and "1. [x] Search for sources (completed)" in out
    assert "answer: RxPY has schedulers for threads, asyncio and timers." in out
    assert ("stored list: [{'content': 'Search for sources', 'status': 'completed'}, "
            "{'content': 'Write the summary', 'status': 'in_progress'}]") in out
    assert "reminders stored in the conversation: False" in out


def test_reply_budget(runs: dict[str, Run]) -> None:
    lines = ok(runs, "reply_budget").lines
    calls = [line for line in lines if line.startswith("model call")]
    assert len(calls) == 4
    assert all("tool_choice=None hint=False" in line for line in calls[:3])
    assert "tool_choice=none hint=True" in calls[3]
    assert lines[-2].startswith("hint event: The token budget for this reply is used up.")
    assert lines[-1] == "answer: Here is what I found so far."


def test_continue_once(runs: dict[str, Run]) -> None:
    assert ok(runs, "continue_once").lines == [
        "model call 1 ends with user: What is 2 + 2?",
        "model call 2 ends with user: Before you finish, check your result once more.",
        "answer: Checked again: 2 + 2 = 4. (MODEL_STOP)",
    ]


def test_tool_middleware(runs: dict[str, Run]) -> None:
    assert ok(runs, "tool_middleware").lines == [
        "weather {'city': 'Paris'} -> SUCCESS: Paris: sunny, 24 C",
        "weather {'city': 'Paris'} -> SUCCESS: Paris: sunny, 24 C",
        "exchange_rate {'currency': 'USD'} -> SUCCESS: rates are unavailable right now",
        "convert {'amount': -5} -> ERROR: Error: amount must be a positive number, got -5",
        "convert {'amount': 10.57} -> SUCCESS: 10.57 EUR = 11.42 USD",
        "weather ran 1 time(s); cache hits: 1",
        "direct: Paris: sunny, 24 C (cache hits: 2)",
    ]


def test_tracing_otel(runs: dict[str, Run]) -> None:
    lines = ok(runs, "tracing_otel").lines
    assert lines[0] == "answer: It is 15:04 and sunny (24 C) in Paris."
    tree = [re.sub(r" \[OK\].*", "", line) for line in lines[1:]]
    assert tree == [
        "invoke_agent assistant",
        "    chat gpt-4o-mini",
        "    execute_tool get_weather (+1 more)",
        "        execute_tool get_weather",
        "        execute_tool get_time",
        "    chat gpt-4o-mini",
    ]
    assert "conversation.id=demo-1" in lines[1]
    assert "response.finish_reasons=('tool_calls',)" in lines[2]
    assert lines[3].endswith("tool.call.id=w1,t1")
    assert lines[4].endswith("tool.call.id=w1")


def test_tool_flags(runs: dict[str, Run]) -> None:
    assert ok(runs, "tool_flags").lines == [
        "worker exit code: 1",
        "the model saw: INTERRUPTED - Unknown outcome",
        "payments made: ['paid INV-7']",
        "reply: I can't tell whether INV-7 was paid; let me check first.",
        "save_draft: SUCCESS 'saved 13 characters' (reply INTERRUPTED)",
        "search: INTERRUPTED 'Interrupted before it finished.' (reply INTERRUPTED)",
    ]


def test_durable_sessions(runs: dict[str, Run]) -> None:
    assert ok(runs, "durable_sessions").lines == [
        "after a restart: 'Your order is 1234.', the model saw 3 messages",
        "recovered: ['r1']",
        "  user: Refund order 1234.",
        "  assistant: refund({'order': '1234'})",
        "  tool: INTERRUPTED: Interrupted: the worker serving this session stopped before the "
        "tool finished.",
        "  user: Is my refund done?",
        "  assistant: The refund did not finish. Shall I try again?",
        "busy: support-42 (held by another-worker)",
        "worker A asks before refund, refunds so far: []",
        "worker B: 'Order 1234 is refunded.', refunds: ['1234']",
    ]


# Runs a script with the OpenTelemetry SDK made unimportable (as if not installed).
_WITHOUT_SDK = """
import runpy, sys

class BlockSdk:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "opentelemetry.sdk" or name.startswith("opentelemetry.sdk."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, BlockSdk)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_tracing_otel_without_the_sdk_says_what_to_install() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_SDK, str(EXAMPLES / "tracing_otel.py")],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
    )
    assert done.returncode == 1, done.stderr
    assert "pip install -e '.[otel]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


# -- docs include example code through snippet sections that exist -----------------------

SNIPPET = re.compile(r'^\s*--8<--\s+"(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$', re.M)


def _snippets() -> list[tuple[str, str, str | None]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for match in SNIPPET.finditer(page.read_text(encoding="utf-8")):
            found.append((str(page.relative_to(ROOT)), match["path"], match["section"]))
    return found


def test_every_example_is_documented() -> None:
    included = {path for _, path, _ in _snippets()}
    examples_page = (DOCS / "examples.md").read_text(encoding="utf-8")
    for name in NAMES:
        assert f"examples/{name}.py" in included, name
        assert f"`{name}.py`" in examples_page, name


@pytest.mark.parametrize(("page", "path", "section"), _snippets())
def test_snippet_sources_exist(page: str, path: str, section: str | None) -> None:
    source = ROOT / path
    assert source.is_file(), f"{page} includes missing {path}"
    if section is not None:
        text = source.read_text(encoding="utf-8")
        start = f"--8<-- [start:{section}]"
        end = f"--8<-- [end:{section}]"
        assert start in text and end in text, f"{page}: {path} has no section {section!r}"
        assert text.index(start) < text.index(end)


def test_agui_client(runs: dict[str, Run]) -> None:
    assert ok(runs, "agui_client").lines == [
        "run 1: RUN_STARTED STATE_SNAPSHOT TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END "
        "TOOL_CALL_RESULT TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END "
        "STATE_SNAPSHOT RUN_FINISHED",
        "  tool: sunny and 21 °C in Paris",
        "  text: Sunny and 21 °C in Paris.",
        "run 2: the agent calls the front end's pick_city; pending: ['call-5']",
        "run 3: text: Rome.",
        'run 4: interrupt (tool_approval): Approve this tool call: refund({"order": "1234"})',
        "run 5: text: Order 1234 refunded.",
        'state: {"sessionId": "thread-1", "status": "idle", "tasks": [], "pending": null}',
    ]


def test_serve_app(runs: dict[str, Run]) -> None:
    lines = ok(runs, "serve_app").lines
    assert lines[0].startswith("events: agent_start model_call_start tool_call_start")
    assert lines[0].endswith("agent_result agent_end")
    assert lines[1:] == [
        "streamed: It is sunny and 21 °C in Paris.",
        "reply: You said: Thanks!",
        "stored: ['user', 'assistant', 'tool', 'assistant', 'user', 'assistant']",
        "without a token: 401",
    ]


def test_openai_client(runs: dict[str, Run]) -> None:
    assert ok(runs, "openai_client").lines == [
        "models: ['weather']",
        "answer: Sunny and 21 °C in Paris.",
        "streamed: Sunny and 21 °C in Paris. (6 pieces, 56 tokens)",
        "finish_reason: tool_calls",
        "the client runs show_map({'city': 'Rome'})",
        "after the tool: A map of Rome is on the screen.",
        "stored: ['user', 'assistant', 'tool', 'assistant', 'user', 'assistant']",
    ]


def test_a2a_client(runs: dict[str, Run]) -> None:
    assert ok(runs, "a2a_client").lines == [
        "card: shop | skills: ['refund'] | streaming: True",
        "streamed: ['Order 1234 ', 'ships ', 'tomorrow.'] | states: ['working', 'completed']",
        'input_required: Approve refund({"order": "1234"})? Answer yes or no, or send a data '
        'part {"approved": true} or {"approved": false}.',
        "answered: completed | Done: order 1234 is refunded.",
    ]


def test_a2a_remote_tool(runs: dict[str, Run]) -> None:
    assert ok(runs, "a2a_remote_tool").lines == [
        "remote: weather | The agent 'weather', served by rx_agent. Skills: get_weather (The "
        "weather in a city).",
        "remote said: It is sunny and 21 °C in Paris.",
        "nested events from {'weather'} for call {'c1'}",
        "lead says: Pack sunglasses: it is sunny in Paris.",
    ]


def test_support_desk(runs: dict[str, Run]) -> None:
    assert ok(runs, "support_desk").lines == [
        "ada/monday: You can ask for a refund within 30 days [1].",
        "  saw: <knowledge> [1] source: refunds.md",
        "  saw: <long-term-memory> - The user pays by credit card.",
        "ada/friday: Refunds go back to your credit card [1].",
        "  saw: <knowledge> [1] source: refunds.md",
        "  saw: <long-term-memory> - The user pays by credit card.",
        "bob/friday: Express orders arrive the next working day [1].",
        "  saw: <knowledge> [1] source: shipping.md",
    ]


def test_mcp_tools(runs: dict[str, Run]) -> None:
    lines = ok(runs, "mcp_tools").lines
    assert lines[:2] == ["  units_delete_everything: permission denied by rules",
                         "  units_delete_everything -> DENIED"]
    assert lines[2:] == [
        "  units_to_celsius: 100.0 C",
        "  units_to_celsius -> SUCCESS",
        "  units_count_words: [1/3]",
        "  units_count_words: [2/3]",
        "  units_count_words: [3/3]",
        "  units_count_words: 3",
        "  units_count_words -> SUCCESS",
        "answer: Water boils at 100 C; the text has 3 words.",
        "tools: units_to_celsius, units_count_words, units_delete_everything",
    ]
