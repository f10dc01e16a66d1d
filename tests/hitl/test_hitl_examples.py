"""The human-in-the-loop examples run and say what they should."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(name: str) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_stop_on_all_denied_example() -> None:
    out = run("stop_on_all_denied.py")
    assert "paused: PERMISSION_ASKING" in out
    assert "event: AllToolsDeniedEvent" in out
    assert "stopped: ALL_TOOLS_DENIED" in out


def test_confirm_and_resume_example() -> None:
    out = run("hitl_confirm.py")
    assert "1st reply ends with PERMISSION_ASKING" in out
    assert "tool send_email ended: SUCCESS" in out
    assert "sent: ['team@example.com: Weekly report']" in out
