"""The sessions a worker served, kept decoded between its calls (every kit backend).

Loading a durable session decodes its whole history; a worker that serves the same
session call after call would pay that on every call. A :class:`SessionCache` (one
per store object) keeps the state each call saved, with its version. The next call
on that session, under its lease, reads the stored version (one small read:
``_peek_version``, or ``_read_since`` when the backend reads only what changed) and
decodes nothing while it is unchanged; when another process wrote meanwhile, the
call gets what changed (``SessionChanges``) or a fresh load. A stale entry is never
served: the check runs after the lease is taken, so no other writer can come
between the check and the call's saves (and a lost lease is fenced by the
compare-and-set at the next save).

Ownership: :meth:`SessionCache.take` removes the entry, so the call that took it
owns the state, and a call that fails to save leaves nothing behind. What a call
puts back (:meth:`SessionCache.keep`) is a copy of its state's containers (the list
of messages, the pending calls, rules and data), so editing the state object a
call exposed (``ctx.agent_state``) after the call never reaches the cache.

Budget: the sum of the cached sessions' messages (``cache_messages`` on the store's
constructor; an estimate of memory by count). The least recently served sessions
go first; a session longer than the whole budget is not kept. ``0`` turns it off.
"""

from __future__ import annotations

import copy
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from .._history import History
from ..context import AgentState
from ..message import Msg

__all__ = ["DEFAULT_CACHE_MESSAGES", "Served", "SessionCache", "detach"]

DEFAULT_CACHE_MESSAGES = 50_000
"""The default budget: decoded messages kept per store object, over all sessions."""


@dataclass(slots=True)
class Served:
    """A session as a call gets it: the state (``None``: absent) at ``version``.

    ``clean`` and ``prefix`` belong to the agent's repair of open tool calls: the
    first ``clean`` messages hold no open call, and ``prefix`` is the list of those
    very message objects when the state was kept (so the next keep can tell whether
    a call replaced any of them)."""

    state: AgentState | None
    version: int
    clean: int = 0
    prefix: list[Msg] = field(default_factory=list)
    hit: bool = False
    """Whether the state came from the cache (no history decoded)."""


def detach(state: AgentState) -> AgentState:
    """A state sharing ``state``'s message objects but none of its containers. The
    copy's list continues the lineage of ``state``'s (the store's snapshot of the
    save just made stands for it), so the next call's save compares nothing."""
    context = state.context
    return state.model_copy(update={
        "context": context.handover() if type(context) is History else History(context),
        "pending": copy.deepcopy(state.pending),
        "permission_rules": copy.deepcopy(state.permission_rules),
        "data": copy.deepcopy(state.data),
    })


class SessionCache:
    """A thread-safe LRU of :class:`Served` sessions, bounded by messages in total."""

    def __init__(self, max_messages: int = DEFAULT_CACHE_MESSAGES) -> None:
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or (
                max_messages < 0):
            raise ValueError(f"cache_messages must be an int >= 0, got {max_messages!r}")
        self.max_messages = max_messages
        self._items: OrderedDict[object, Served] = OrderedDict()
        self._messages = 0
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def messages(self) -> int:
        """The messages held now (over every cached session)."""
        return self._messages

    def _forked(self) -> None:
        # A child process starts empty: its parent's entries are not its to serve.
        if self._pid != os.getpid():
            self._items.clear()
            self._messages = 0
            self._pid = os.getpid()

    def take(self, key: object) -> Served | None:
        """Remove and return ``key``'s entry (the caller owns it now)."""
        if not self._items:
            return None
        with self._lock:
            self._forked()
            served = self._items.pop(key, None)
            if served is not None and served.state is not None:
                self._messages -= len(served.state.context)
            return served

    def keep(self, key: object, served: Served) -> bool:
        """Keep ``served`` (its state must be the cache's own: see :func:`detach`);
        whether it fits the budget."""
        size = len(served.state.context) if served.state is not None else 0
        with self._lock:
            self._forked()
            old = self._items.pop(key, None)
            if old is not None and old.state is not None:
                self._messages -= len(old.state.context)
            if served.state is None or size > self.max_messages:
                return False
            self._items[key] = served
            self._messages += size
            while self._messages > self.max_messages:
                _gone, evicted = self._items.popitem(last=False)
                assert evicted.state is not None
                self._messages -= len(evicted.state.context)
            return True

    def drop(self, key: object) -> None:
        self.take(key)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._messages = 0
