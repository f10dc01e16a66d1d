"""Session stores: where an agent keeps each session's :class:`AgentState`.

A store may be synchronous or asynchronous: ``load``/``save`` may return the value
directly or an awaitable of it. The in-memory store answers synchronously, so the
common case costs no task switch.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable
from typing import NamedTuple, Protocol, runtime_checkable

from .context import AgentState

__all__ = ["ANONYMOUS_USER", "InMemorySessionStore", "SessionKey", "SessionStore"]

ANONYMOUS_USER = "__anon__"


class SessionKey(NamedTuple):
    """The slot a call's state lives in: ``(user_id or "__anon__", session_id)``."""

    user_id: str
    session_id: str


@runtime_checkable
class SessionStore(Protocol):
    """Loads and saves :class:`AgentState` by :class:`SessionKey`."""

    def load(self, key: SessionKey) -> AgentState | Awaitable[AgentState | None] | None:
        """The saved state, or ``None`` for a new session."""
        ...

    def save(self, key: SessionKey, state: AgentState) -> Awaitable[None] | None:
        """Persist ``state`` (called after every call on the session)."""
        ...


class InMemorySessionStore:
    """Keeps live :class:`AgentState` objects in a dict (the default store)."""

    def __init__(self) -> None:
        self._states: dict[SessionKey, AgentState] = {}
        self._lock = threading.Lock()

    def load(self, key: SessionKey) -> AgentState | None:
        with self._lock:
            return self._states.get(key)

    def save(self, key: SessionKey, state: AgentState) -> None:
        with self._lock:
            self._states[key] = state

    def delete(self, key: SessionKey) -> None:
        with self._lock:
            self._states.pop(key, None)

    def keys(self) -> list[SessionKey]:
        with self._lock:
            return list(self._states)

    def __len__(self) -> int:
        with self._lock:
            return len(self._states)
