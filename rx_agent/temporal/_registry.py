"""The agents this process's workers serve, by task queue and name: where a workflow
finds the agent its worker's factory built (workflow code cannot receive objects)."""

from __future__ import annotations

import threading

from ..agent.react import ReActAgent

__all__ = ["register", "registered", "unregister"]

_lock = threading.Lock()
_agents: dict[tuple[str, str], ReActAgent] = {}


def register(task_queue: str, agent: ReActAgent) -> None:
    with _lock:
        _agents[(task_queue, agent.name)] = agent


def unregister(task_queue: str, agent: ReActAgent) -> None:
    with _lock:
        if _agents.get((task_queue, agent.name)) is agent:
            del _agents[(task_queue, agent.name)]


def registered(task_queue: str, name: str) -> ReActAgent | None:
    """The agent ``name`` of ``task_queue``'s worker; else the one agent of that name
    (a replayer runs workflows on a task queue of its own)."""
    found = _agents.get((task_queue, name))
    if found is None:
        named = [agent for (_, n), agent in list(_agents.items()) if n == name]
        found = named[0] if len(named) == 1 else None
    return found
