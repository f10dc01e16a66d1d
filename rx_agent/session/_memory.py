"""The in-memory session store (the default): live objects in a dict, one process.

It keeps the very :class:`~rx_agent.AgentState` object it was given (``load``
returns it; nothing is copied or serialised), so it costs no more than a dict
lookup. Versions, compare-and-set and leases behave as in the durable stores, but
only within this process: the stored object is shared, so fencing protects which
object is stored, not edits made to a loaded object. Its synchronous methods
never wait, except ``acquire_lease`` while another owner holds the lease; its
``a``-prefixed coroutines never block the loop.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..context import AgentState
from ._backend import SessionBackend
from ._base import ConcurrentSessionModificationError as _Conflict
from ._base import Lease, SessionKey, check_key, check_state
from ._delta import take_marks
from ._journal import RunJournal
from ._lease import LeaseAttempt

__all__ = ["InMemorySessionStore"]

_NO_POLL = (math.inf, math.inf)  # waiters are woken, not polling


@dataclass(slots=True)
class _Held:
    token: str
    owner: str
    expires: float  # time.monotonic()


@dataclass(slots=True)
class _Queue:
    tokens: list[str] = field(default_factory=list)
    wakers: dict[str, Callable[[], None]] = field(default_factory=dict)


class _LeaseTable:
    """In-process leases: FIFO waiters, woken when the lease is released."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[SessionKey, _Held] = {}
        self._queues: dict[SessionKey, _Queue] = {}

    def attempt(self, key: SessionKey, token: str, owner: str, ttl: float, join: bool,
                waker: Callable[[], None]) -> LeaseAttempt:
        now = time.monotonic()
        with self._lock:
            held = self._held.get(key)
            if held is not None and held.expires <= now:
                held = None
            queue = self._queues.get(key)
            if held is None and (queue is None or not queue.tokens or queue.tokens[0] == token):
                self._held[key] = _Held(token, owner, now + ttl)
                self._leave_locked(key, token)
                return LeaseAttempt(True)
            if join:
                if queue is None:
                    queue = self._queues[key] = _Queue()
                if token not in queue.wakers:
                    queue.tokens.append(token)
                queue.wakers[token] = waker
            if held is None:  # free, but an earlier waiter goes first
                return LeaseAttempt(False, None, None)
            return LeaseAttempt(False, held.owner, held.expires - now)

    def _leave_locked(self, key: SessionKey, token: str) -> None:
        queue = self._queues.get(key)
        if queue is None or token not in queue.wakers:
            return
        queue.tokens.remove(token)
        del queue.wakers[token]
        if not queue.tokens:
            del self._queues[key]
        else:
            queue.wakers[queue.tokens[0]]()  # the next in line may be free to go

    def leave(self, key: SessionKey, token: str) -> None:
        with self._lock:
            self._leave_locked(key, token)

    def renew(self, lease: Lease) -> bool:
        now = time.monotonic()
        with self._lock:
            held = self._held.get(lease.key)
            if held is None or held.token != lease.token or held.expires <= now:
                return False
            held.expires = now + lease.ttl
            return True

    def release(self, lease: Lease) -> bool:
        with self._lock:
            held = self._held.get(lease.key)
            if held is None or held.token != lease.token:
                return False
            del self._held[lease.key]
            queue = self._queues.get(lease.key)
            if queue is not None and queue.tokens:
                queue.wakers[queue.tokens[0]]()
            return held.expires > time.monotonic()


class InMemorySessionStore(SessionBackend):
    """Keeps live :class:`AgentState` objects in a dict (the default store)."""

    durable = False  # loads are the live object; leases hold within this object only
    answers_inline = True  # a dict lookup: the agent finishes a call without a task
    lease_poll = _NO_POLL

    def __init__(self) -> None:
        self._states: dict[SessionKey, AgentState] = {}
        self._versions: dict[SessionKey, int] = {}
        self._lock = threading.Lock()
        self._leases = _LeaseTable()

    def __repr__(self) -> str:
        return f"InMemorySessionStore({len(self)} sessions)"

    def _make_journal(self) -> RunJournal:
        from ._journal_memory import MemoryRunJournal

        return MemoryRunJournal()

    # The agent calls load and save on every call (the default store, inline), and
    # load_versioned is the read of every compare-and-set loop: these skip the kit's
    # generic layer (a method call, the version lookup); the rest is derived from the
    # primitives below.

    def load(self, key: SessionKey) -> AgentState | None:
        if type(key) is not SessionKey or not (key[0] and key[1]):
            key = check_key(key)
        with self._lock:
            return self._states.get(key)

    def load_versioned(self, key: SessionKey) -> tuple[AgentState | None, int]:
        if type(key) is not SessionKey or not (key[0] and key[1]):
            key = check_key(key)
        with self._lock:
            return self._states.get(key), self._versions.get(key, 0)

    def save(self, key: SessionKey, state: AgentState) -> None:
        if type(state) is not AgentState:
            check_state(state)
        if type(key) is not SessionKey or not (key[0] and key[1]):
            key = check_key(key)
        take_marks(state)  # nothing to rewrite: the object itself is stored
        with self._lock:
            self._states[key] = state
            self._versions[key] = self._versions.get(key, 0) + 1

    def keys(self) -> list[SessionKey]:
        with self._lock:
            return list(self._states)

    def __len__(self) -> int:
        with self._lock:
            return len(self._states)

    # -- the primitives (see rx_agent.session._backend) ---------------------------------

    def _read(self, key: SessionKey) -> tuple[AgentState | None, int]:
        with self._lock:
            return self._states.get(key), self._versions.get(key, 0)

    def _peek_version(self, key: SessionKey) -> int:
        with self._lock:
            return self._versions.get(key, 0)

    def _write(self, key: SessionKey, state: AgentState, expected: int | None,
               marked: frozenset[str]) -> int:
        # ``marked`` needs nothing: the object itself is stored.
        with self._lock:
            actual = self._versions.get(key, 0)
            if expected is not None and actual != expected:
                raise _Conflict(key.session_id, expected, actual, user_id=key.user_id)
            self._states[key] = state
            self._versions[key] = actual + 1
            return actual + 1

    def _remove(self, key: SessionKey) -> bool:
        with self._lock:
            self._versions.pop(key, None)
            return self._states.pop(key, None) is not None

    def _list_keys(self, user_id: str | None) -> list[SessionKey]:
        with self._lock:
            keys = list(self._states)
        return sorted(k for k in keys if user_id is None or k.user_id == user_id)

    def _try_lease(self, key: SessionKey, token: str, owner: str, ttl: float, join: bool,
                   wake: Callable[[], None]) -> LeaseAttempt:
        return self._leases.attempt(key, token, owner, ttl, join, wake)

    def _leave_queue(self, key: SessionKey, token: str) -> None:
        self._leases.leave(key, token)

    def _renew_lease(self, lease: Lease) -> bool:
        return self._leases.renew(lease)

    def _release_lease(self, lease: Lease) -> bool:
        return self._leases.release(lease)
