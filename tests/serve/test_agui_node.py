"""The official AG-UI client (``@ag-ui/client`` from npm, under Node) consumes full runs
of our server: a server tool, a front-end tool round and an approval interrupt.

The package is installed once into pytest's cache (``.pytest_cache/d/agui-node``) and
reused; without node and npm the test skips (fails under RX_AGENT_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _services import service_missing

from rx_agent import InMemorySessionStore
from rx_agent.serve import create_app

from .agui_agents import build

pytest.importorskip("ag_ui.core", reason="the agui extra: pip install -e '.[agui]'")

CLIENT = "@ag-ui/client@^1.0.0"

SCRIPT = r"""
import { HttpAgent } from "@ag-ui/client";

const [url, token] = process.argv.slice(2);
const agent = new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` },
                              threadId: "node-thread" });
const tools = [{ name: "pick_city", description: "Let the user pick a city",
                 parameters: { type: "object", properties: { region: { type: "string" } } } }];
const runs = [];

async function run(params = {}) {
  const seen = { events: [], outcome: null, pending: [], interrupts: [] };
  await agent.runAgent({ tools, ...params }, {
    onEvent({ event }) { seen.events.push(event.type); },
    onRunFinishedEvent(p) {
      seen.outcome = p.outcome;
      seen.pending = p.pendingToolCallIds ?? [];
      seen.interrupts = p.interrupts ?? [];
    },
  });
  runs.push(seen);
  return seen;
}

agent.addMessage({ id: "u1", role: "user", content: "weather in Paris" });
await run();

agent.addMessage({ id: "u2", role: "user", content: "pick a city" });
const asked = await run();
for (const id of asked.pending) {  // the front end runs its tool
  agent.addMessage({ id: `result-${id}`, role: "tool", toolCallId: id, content: "Rome" });
}
await run();

agent.addMessage({ id: "u3", role: "user", content: "refund 42" });
await run();
const answers = agent.pendingInterrupts.map(
  (i) => ({ interruptId: i.id, status: "resolved", payload: { approved: true } }));
await run({ resume: answers });

agent.addMessage({ id: "u4", role: "user", content: "plan" });
await run();

// A reloaded page: a new client on the same thread, with no messages of its own.
const reloaded = new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` },
                                 threadId: "node-thread" });
await reloaded.runAgent({ tools });

console.log(JSON.stringify({ runs, messages: agent.messages, state: agent.state,
                             pendingInterrupts: agent.pendingInterrupts,
                             reloaded: reloaded.messages, reloadedState: reloaded.state }));
"""


@pytest.fixture(scope="session")
def agui_client(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``@ag-ui/client`` installed (npm), kept in pytest's cache (a fresh
    one per run when the cache plugin is off)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        service_missing("node and npm are needed for the @ag-ui/client test: apt-get install "
                        "nodejs npm")
    cache = getattr(pytestconfig, "cache", None)
    folder = Path(cache.mkdir("agui-node")) if cache is not None \
        else tmp_path_factory.mktemp("agui-node")
    if not (folder / "node_modules" / "@ag-ui" / "client" / "package.json").exists():
        (folder / "package.json").write_text(json.dumps(
            {"name": "agui-node-test", "private": True, "type": "module"}))
        try:
            done = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", CLIENT],
                cwd=folder, capture_output=True, text=True, timeout=600, check=False)
        except subprocess.TimeoutExpired:
            service_missing(f"npm install {CLIENT} timed out (is the npm registry reachable?)")
        if done.returncode != 0:
            service_missing(f"npm install {CLIENT} failed: {done.stderr.strip()[-500:]}")
    return folder


def test_the_official_client_consumes_tool_rounds_and_an_interrupt(
    live: Any, agui_client: Path,
) -> None:
    server = live(create_app(build, InMemorySessionStore(),
                             auth={"node-client-token": "alice"}))
    script = agui_client / "run.mjs"
    script.write_text(SCRIPT)
    done = subprocess.run(["node", str(script), server.url + "/v1/agui", "node-client-token"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "Error" not in done.stderr, done.stderr  # the client warns on protocol mistakes
    out = json.loads(done.stdout.strip().splitlines()[-1])
    runs = out["runs"]
    assert len(runs) == 6
    for seen in runs:
        assert seen["events"][0] == "RUN_STARTED" and seen["events"][-1] == "RUN_FINISHED"
    weather, asked, answered, approval, approved, planned = runs
    assert "TOOL_CALL_RESULT" in weather["events"] and weather["outcome"] == "success"
    assert asked["outcome"] == "success" and len(asked["pending"]) == 1
    assert answered["pending"] == []
    assert approval["outcome"] == "interrupt"
    assert [i["reason"] for i in approval["interrupts"]] == ["tool_approval"]
    assert approved["outcome"] == "success" and out["pendingInterrupts"] == []
    assert planned["events"].count("STATE_SNAPSHOT") == 3  # start, the new tasks, end

    # The client's own history, built from our events alone.
    said = [(m["role"], m.get("content")) for m in out["messages"]
            if m["role"] != "assistant" or m.get("content")]
    assert said == [
        ("user", "weather in Paris"), ("assistant", "Let me check."), ("tool", "sunny in Paris"),
        ("assistant", "Result: sunny in Paris"),
        ("user", "pick a city"), ("tool", "Rome"), ("assistant", "Result: Rome"),
        ("user", "refund 42"), ("tool", "refunded order 42"),
        ("assistant", "Result: refunded order 42"),
        ("user", "plan"), ("tool", said[-2][1]), ("assistant", said[-1][1])]
    calls = [c["function"]["name"] for m in out["messages"] for c in m.get("toolCalls") or []]
    assert calls == ["get_weather", "pick_city", "refund", "todo_write"]
    # The text and the tool call of one model call are one assistant message.
    first = next(m for m in out["messages"] if m["role"] == "assistant")
    assert first["content"] == "Let me check."
    assert [c["function"]["name"] for c in first["toolCalls"]] == ["get_weather"]
    assert json.loads(first["toolCalls"][0]["function"]["arguments"]) == {"city": "Paris"}
    # A reloaded client gets the thread from the server: the same conversation.
    def talk(messages: list[dict[str, Any]]) -> list[Any]:
        return [(m["role"], m.get("content"),
                 [c["function"]["name"] for c in m.get("toolCalls") or []]) for m in messages]

    assert talk(out["reloaded"]) == talk(out["messages"])
    assert out["reloadedState"] == out["state"]
    # The state the client holds is the last snapshot: the task list the agent wrote.
    assert out["state"] == {"sessionId": "node-thread", "status": "idle", "pending": None,
                            "tasks": [{"content": "Pack", "status": "in_progress"},
                                      {"content": "Travel", "status": "pending"}]}
