"""Fixtures for the CLI tests: a private data directory, and the real redis-server.

``redis_url`` is the shared fixture of ``tests/_services.py`` (also used by the session
and agent tests): a real ``redis-server`` on a loopback port; without one the test
skips saying what to install, except under ``RX_AGENT_REQUIRE_SERVICES=1`` (CI),
where it fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _services import redis_url

__all__ = ["redis_url"]


@pytest.fixture(autouse=True)
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every CLI test (and every ``rx-agent`` it starts) gets its own XDG data directory:
    the default session database never lands in the real home."""
    home = tmp_path / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    monkeypatch.delenv("RX_AGENT_STORE", raising=False)
    return home
