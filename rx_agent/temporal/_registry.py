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
    return _agents.get((task_queue, name))
