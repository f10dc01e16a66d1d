"""``rx-agent serve`` serves A2A next to its own API; ``--no-a2a`` turns it off."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

import rx_agent.serve._cli as serve_cli
from rx_agent.cli import main


@pytest.mark.parametrize(("flags", "served"), [([], True), (["--no-a2a"], False)])
def test_rx_agent_serve_serves_a2a_unless_no_a2a(monkeypatch, flags, served) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(serve_cli, "run", lambda config, no_auth=False: seen.append(config))
    assert main(["serve", "a2a_protocol.served:build", *flags]) == 0
    [config] = seen
    assert config.a2a is (None if served else False)
    client = TestClient(serve_cli.build_app(config))
    card = client.get("/.well-known/agent-card.json")
    assert card.status_code == (200 if served else 404)
    if served:
        assert card.json()["name"] == "served"
