"""``rx-agent chat --provider anthropic`` and ``--mcp``, run for real in a subprocess: the
Anthropic side talks to the loopback Messages server of the model tests, the MCP side
spawns the toolbox server of the tool tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from model.anthropic_server import AnthropicServer, MessageReply, text, tool_use

TOOLBOX = Path(__file__).parents[1] / "tool" / "mcp_servers" / "toolbox.py"
MCP = f"stdio:{sys.executable} {TOOLBOX}"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "ANTHROPIC_", "RX_AGENT_MODEL"))
           and k not in {"FORCE_COLOR", "NO_COLOR", "COLUMNS"}}
    env.update(COLUMNS="200", **extra)
    return env


def chat(*args: str, input: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rx_agent", "chat", *args], input=input,
                          capture_output=True, text=True, encoding="utf-8", timeout=60,
                          env=env if env is not None else _env(), check=False)


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServer]:
    server = AnthropicServer(require_key="sk-ant-cli").start()
    try:
        yield server
    finally:
        server.stop()


def test_anthropic_provider_with_an_mcp_tool(anthropic_server: AnthropicServer) -> None:
    anthropic_server.script(
        MessageReply([text("Adding."), tool_use("toolu_1", "add", '{"a": 2,', ' "b": 40}')],
                     stop_reason="tool_use"),
        MessageReply([text("It is 42.")]),
    )
    proc = chat("--provider", "anthropic", "--base-url", anthropic_server.url,
                "--api-key", "sk-ant-cli", "--model", "claude-cli", "--mcp", MCP,
                input="add 2 and 40\n/tools\n/exit\n")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"claude-cli at {anthropic_server.url} (Anthropic)" in out
    assert "tool result · add · SUCCESS" in out
    assert "assistant > It is 42." in out
    first, second = (r.body for r in anthropic_server.requests)
    names = [t["name"] for t in first["tools"]]
    assert names[:3] == ["calculate", "current_time", "get_weather"] and "add" in names
    assert second["messages"][-1]["content"][0] == {
        "type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}
    # /tools: the local tools and the server's, with where each comes from.
    listed = out[out.index("tool "):]
    assert "calculate" in listed and "toolbox.py" in listed and "slow" in listed


def test_tools_command_lists_mcp_tools_offline() -> None:
    proc = chat("--offline", "--mcp", MCP, "--mcp", MCP.replace("toolbox.py", "toolbox.py "),
                input="/tools\n")
    # Two registrations of the same server clash by name: /tools says so and goes on.
    assert proc.returncode == 0, proc.stderr
    assert "provided twice" in proc.stdout
    proc = chat("--offline", "--mcp", MCP, input="/tools\n")
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line.strip()}
    assert "mcp " in lines["echo"] and "Echo the text back." in lines["echo"]
    assert "toolkit" in lines["calculate"]


@pytest.mark.parametrize(("args", "needle"), [
    (("--mcp", "python server.py"), "stdio:COMMAND"),
    (("--mcp", "stdio:"), "no command"),
    (("--mcp", "stdio:'unclosed"), "quotation"),
])
def test_bad_mcp_specs_are_one_line_errors(args: tuple[str, ...], needle: str) -> None:
    proc = chat("--offline", *args, input="/exit\n")
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith("rx-agent: error: --mcp") and needle in line


def test_anthropic_without_a_key_says_how_to_configure() -> None:
    proc = chat("--provider", "anthropic", input="hi\n")
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert "ANTHROPIC_API_KEY" in line


def test_a_dead_mcp_server_fails_the_first_reply_naming_it(
    anthropic_server: AnthropicServer,
) -> None:
    proc = chat("--provider", "anthropic", "--base-url", anthropic_server.url,
                "--api-key", "sk-ant-cli", "--mcp", f"stdio:{sys.executable} -c pass",
                input="hi\n")
    assert proc.returncode == 1
    (line,) = proc.stderr.splitlines()
    assert "MCP server" in line and "-c pass" in line
    assert anthropic_server.requests == []  # no model call without the tool list
