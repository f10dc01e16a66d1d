"""An agent for ``rx-agent serve a2a_protocol.served:build`` in the CLI test."""

from __future__ import annotations

from rx_agent import ReActAgent, ScriptedModel, SessionStore


def build(store: SessionStore) -> ReActAgent:
    return ReActAgent(name="served", model=ScriptedModel(["hi"]), session_store=store)
