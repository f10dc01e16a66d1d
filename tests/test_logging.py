"""rx_agent logs to the ``rx_agent`` logger and, as a library, never decides where the
records go: with no logging configured nothing reaches stderr (no "last resort"
output), and an application that configures logging gets every record."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import rx_agent

ROOT = Path(__file__).resolve().parent.parent

# A failover whose listener raises: a WARNING (the switch) and an ERROR with a
# traceback (the listener) are logged.
SCRIPT = """
from rx_agent import ReActAgent, ScriptedModel
from rx_agent.model import ModelServerError


def listener(model, error):
    raise RuntimeError("bug in the listener")


agent = (
    ReActAgent.builder()
    .name("a")
    .model(ScriptedModel([ModelServerError("503 Service Unavailable")], name="primary"))
    .max_retries(1)
    .fallback_model(ScriptedModel(["backup answer"], name="backup"))
    .failover_listener(listener)
    .build()
)
print(agent.call_sync("hi").text)
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False, cwd=ROOT)


def test_the_package_logger_has_a_null_handler() -> None:
    handlers = logging.getLogger(rx_agent.__name__).handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


def test_without_logging_configured_nothing_reaches_stderr() -> None:
    done = _run(SCRIPT)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "backup answer\n"
    assert done.stderr == ""


def test_configured_logging_still_gets_the_records() -> None:
    done = _run("import logging\nlogging.basicConfig(level=logging.INFO)\n" + SCRIPT)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "backup answer\n"
    assert "WARNING:rx_agent:model primary failed" in done.stderr
    assert "switching to fallback backup" in done.stderr
    assert "ERROR:rx_agent:failover_listener raised; ignored" in done.stderr
    assert "RuntimeError: bug in the listener" in done.stderr
