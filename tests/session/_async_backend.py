"""A backend with async primitives only (as one on an asyncio-only client would be):
its blocking API comes from the kit's portal loop. State is kept as JSON text in a
dict shared by the store objects of one ``Storage``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from rx_agent import AgentState
from rx_agent.session import (
    ConcurrentSessionModificationError,
    LeaseRecord,
    SessionBackend,
    SessionKey,
    decode_state,
    encode_state,
)

T = TypeVar("T")


@dataclass
class Storage:
    sessions: dict[SessionKey, tuple[int, str]] = field(default_factory=dict)
    leases: dict[SessionKey, LeaseRecord] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)  # loop-agnostic
    threads: set[threading.Thread] = field(default_factory=set)  # where the primitives ran


class AsyncOnlyStore(SessionBackend):
    def __init__(self, storage: Storage | None = None) -> None:
        self.storage = storage if storage is not None else Storage()

    async def _io(self) -> None:
        self.storage.threads.add(threading.current_thread())
        await asyncio.sleep(0)  # a round trip to a server would yield here

    async def _aread(self, key: SessionKey) -> tuple[AgentState | None, int]:
        await self._io()
        with self.storage.lock:
            version, text = self.storage.sessions.get(key, (0, ""))
        return (decode_state(text, key) if version else None), version

    async def _awrite(self, key: SessionKey, state: AgentState, expected: int | None,
                      marked: frozenset[str]) -> int:
        text = encode_state(state)
        await self._io()
        with self.storage.lock:
            actual = self.storage.sessions.get(key, (0, ""))[0]
            if expected is not None and actual != expected:
                raise ConcurrentSessionModificationError(key.session_id, expected, actual,
                                                         user_id=key.user_id)
            self.storage.sessions[key] = (actual + 1, text)
        return actual + 1

    async def _aremove(self, key: SessionKey) -> bool:
        await self._io()
        with self.storage.lock:
            return self.storage.sessions.pop(key, None) is not None

    async def _alist_keys(self, user_id: str | None) -> list[SessionKey]:
        await self._io()
        with self.storage.lock:
            keys = list(self.storage.sessions)
        return sorted(k for k in keys if user_id is None or k.user_id == user_id)

    async def _aupdate_lease(
        self, key: SessionKey,
        change: Callable[[LeaseRecord | None], tuple[LeaseRecord | None, T]],
    ) -> T:
        await self._io()
        with self.storage.lock:
            new, answer = change(self.storage.leases.get(key))
            if new is None:
                self.storage.leases.pop(key, None)
            else:
                self.storage.leases[key] = new
        return answer
