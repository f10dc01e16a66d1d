"""The contracts every session store shares: keys, protocols, leases, errors, policies.

Three protocols, one convention
-------------------------------
:class:`SessionStore`
    Today's minimal contract: ``load(key)`` and ``save(key, state)``, each returning
    its value directly or an awaitable of it. A user store with only these keeps
    working; the runtime awaits whatever is awaitable (no leases, no versions).
:class:`VersionedSessionStore`
    The full durable API as plain **synchronous** methods: ``load``, ``save``,
    ``delete``, ``list_sessions``, ``load_versioned``, ``save_if_version``,
    ``acquire_lease``, ``renew_lease``, ``release_lease``. For scripts, the CLI and
    tests; these calls may block (disk, network).
:class:`AsyncSessionStore`
    The same operations as coroutines named with an ``a`` prefix (``aload``,
    ``asave``, ``adelete``, ``alist_sessions``, ``aload_versioned``,
    ``asave_if_version``, ``aacquire_lease``, ``arenew_lease``, ``arelease_lease``).
    They never block the event loop: SQLite work runs on the store's own worker
    threads, Redis uses ``redis.asyncio``.

A runtime discovers durability once, when the agent is built (:func:`is_durable`):
a store implementing :class:`AsyncSessionStore` that does not declare
``durable = False`` gets leases, versions and checkpoints through the ``a``-prefixed
coroutines; anything else is driven through ``load``/``save`` as before. The built-in
stores (:class:`~rx_agent.session.InMemorySessionStore`,
:class:`~rx_agent.session.SqliteSessionStore`,
:class:`~rx_agent.session.RedisSessionStore`) implement both full protocols, all
through the kit (:class:`~rx_agent.session.SessionBackend`).

Versions and fencing
--------------------
Every stored session has a version: ``0`` means absent, and each save makes it one
larger. ``save_if_version(key, state, expected)`` is a compare-and-set: it writes
only if the stored version is still ``expected`` and returns the new version;
otherwise it writes nothing and raises :class:`ConcurrentSessionModificationError`.
A writer that lost its lease (a paused process, a network split) and still holds an
old version can therefore never overwrite newer state. A deleted and re-created
session counts versions from 1 again, so a writer stale across a delete *and* the
same number of new saves is not fenced: delete only sessions nobody is serving.

Leases
------
``acquire_lease(key, owner, ttl, wait)`` makes ``owner`` the one writer of a session
for ``ttl`` seconds. While another owner holds it, callers wait up to ``wait``
seconds, queued first come first served (FIFO-ish: a waiter that stops polling
loses its place), then get :class:`SessionBusyError`. ``renew_lease(lease)`` extends
a held lease by its ``ttl`` and answers ``False`` once it expired or was taken;
``release_lease(lease)`` frees it and answers ``False`` (changing nothing) unless
``lease`` still holds it. A lease is identified by a random token, so another
owner, or the same owner's earlier lease, can neither renew nor release it.

Conflict policies
-----------------
:class:`ConflictPolicy` names what a writer does when its compare-and-set fails
(AgentScope Java's meanings): ``FAIL`` raises and writes nothing, ``APPEND_MERGE``
reloads the newer state and appends this call's new messages after it
(:func:`merge_append`), ``OVERWRITE`` is last-writer-wins. :func:`save_with_policy`
and :func:`asave_with_policy` (in :mod:`rx_agent.session._policy`) run the loop.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ..context import AgentState
from ..errors import RxAgentError

__all__ = [
    "ANONYMOUS_USER",
    "AsyncSessionStore",
    "ConcurrentSessionModificationError",
    "ConflictPolicy",
    "Lease",
    "SessionBusyError",
    "SessionCorruptError",
    "SessionKey",
    "SessionStore",
    "VersionedSessionStore",
    "check_key",
    "check_lease_args",
    "check_state",
    "is_durable",
    "merge_append",
    "redact",
]

ANONYMOUS_USER = "__anon__"


class SessionKey(NamedTuple):
    """The slot a call's state lives in: ``(user_id or "__anon__", session_id)``."""

    user_id: str
    session_id: str


def check_key(key: object) -> SessionKey:
    """``key`` as a :class:`SessionKey`, or a ``TypeError``/``ValueError`` saying why not."""
    if type(key) is not SessionKey:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise TypeError(
                f"a session key is SessionKey(user_id, session_id), got {type(key).__name__}"
            )
        key = SessionKey(*key)
    assert isinstance(key, SessionKey)
    for label, value in (("user_id", key.user_id), ("session_id", key.session_id)):
        if not isinstance(value, str):
            raise TypeError(f"SessionKey.{label} must be a str, not {type(value).__name__}")
        if not value:
            raise ValueError(
                f"SessionKey.{label} must not be empty (anonymous: {ANONYMOUS_USER!r})")
    return key


def check_state(state: object) -> AgentState:
    if not isinstance(state, AgentState):
        raise TypeError(f"a session store saves AgentState, got {type(state).__name__}")
    return state


def redact(url: str) -> str:
    """``url`` without its password (for messages and reprs)."""
    scheme, sep, rest = url.partition("://")
    auth, at, host = rest.rpartition("@")
    if not sep or not at:
        return url
    user = auth.partition(":")[0]
    return f"{scheme}://{user}:***@{host}" if ":" in auth else f"{scheme}://{user}@{host}"


# -- errors ------------------------------------------------------------------------------


def _rebuild(cls: type[Exception], kwargs: dict[str, Any]) -> Exception:
    return cls(**kwargs)


def _who(session_id: str, user_id: str | None) -> str:
    if user_id is None or user_id == ANONYMOUS_USER:
        return f"session {session_id!r}"
    return f"session {session_id!r} of user {user_id!r}"


class SessionError(RxAgentError):
    """A durable-session operation failed (the base of the three below)."""


class ConcurrentSessionModificationError(SessionError, RuntimeError):
    """A compare-and-set save found a newer version than the one the writer loaded.

    Nothing was written. ``actual_version`` is what the store holds now (``0``: the
    session was deleted meanwhile).
    """

    def __init__(
        self,
        session_id: str,
        expected_version: int,
        actual_version: int,
        *,
        user_id: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.expected_version = expected_version
        self.actual_version = actual_version
        self.user_id = user_id
        what = "was deleted" if actual_version == 0 else f"is now at version {actual_version}"
        super().__init__(
            f"{_who(session_id, user_id)} was modified concurrently: this writer expected "
            f"version {expected_version}, but it {what}; nothing was written"
        )

    def __reduce__(self) -> tuple[Any, ...]:  # keyword-only fields survive pickling
        return _rebuild, (type(self), {
            "session_id": self.session_id, "expected_version": self.expected_version,
            "actual_version": self.actual_version, "user_id": self.user_id})


class SessionBusyError(SessionError, RuntimeError):
    """Another owner held the session's lease for the whole ``wait`` a caller allowed."""

    def __init__(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        holder: str | None = None,
        waited: float | None = None,
    ) -> None:
        self.session_id = session_id
        self.user_id = user_id
        self.holder = holder
        self.waited = waited
        by = f" by {holder!r}" if holder else ""
        after = f" after waiting {waited:.2f} s" if waited is not None else ""
        super().__init__(
            f"{_who(session_id, user_id)} is busy: its lease is held{by}; gave up{after} "
            "(raise session_wait, or find the writer that keeps it)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), {
            "session_id": self.session_id, "user_id": self.user_id,
            "holder": self.holder, "waited": self.waited})


class SessionCorruptError(SessionError, ValueError):
    """A stored record cannot be read as a session; the record is left untouched.

    ``problem`` says what was wrong (bad JSON, an unknown schema, a foreign record,
    a missing message, ...); ``where`` names the store. A store never answers a
    corrupt record with an empty session: that would silently reset a conversation.
    """

    def __init__(
        self,
        session_id: str,
        problem: str,
        *,
        user_id: str | None = None,
        where: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.problem = problem
        self.user_id = user_id
        self.where = where
        at = f" in {where}" if where else ""
        super().__init__(
            f"{_who(session_id, user_id)}{at} cannot be read: {problem} (the stored record "
            "was left as it is: repair or delete it)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), {
            "session_id": self.session_id, "problem": self.problem,
            "user_id": self.user_id, "where": self.where})


# -- leases ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof that ``owner`` was made the one writer of ``key`` for ``ttl`` seconds.

    ``token`` is random per acquisition: only this object renews or releases it.
    A runtime renews at a third of ``ttl`` while its call runs.
    """

    key: SessionKey
    owner: str
    token: str
    ttl: float


def check_lease_args(
    key: object, owner: object, ttl: object, wait: object
) -> tuple[SessionKey, str, float, float]:
    key = check_key(key)
    if not isinstance(owner, str) or not owner:
        raise ValueError(f"a lease owner is a non-empty str, got {owner!r}")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < math.inf:
        raise ValueError(f"lease ttl must be a positive finite number of seconds, got {ttl!r}")
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
        raise ValueError(f"lease wait must be >= 0 seconds (math.inf: forever), got {wait!r}")
    return key, owner, float(ttl), float(wait)


# -- protocols ---------------------------------------------------------------------------


@runtime_checkable
class SessionStore(Protocol):
    """Loads and saves :class:`AgentState` by :class:`SessionKey` (sync or async).

    ``load`` and ``save`` may return their result directly or an awaitable of it;
    the in-memory store answers synchronously, so the common case costs no task
    switch.
    """

    def load(self, key: SessionKey) -> AgentState | Awaitable[AgentState | None] | None:
        """The saved state, or ``None`` for a new session."""
        ...

    def save(self, key: SessionKey, state: AgentState) -> Awaitable[None] | None:
        """Persist ``state`` (called after every call on the session)."""
        ...


@runtime_checkable
class VersionedSessionStore(Protocol):
    """The durable store API, synchronous (see the module docstring)."""

    def load(self, key: SessionKey) -> AgentState | None:
        """The stored state, or ``None`` when absent."""
        ...

    def save(self, key: SessionKey, state: AgentState) -> None:
        """Store ``state`` unconditionally (last writer wins)."""
        ...

    def delete(self, key: SessionKey) -> bool:
        """Remove the session; whether it existed. Leases are left to expire."""
        ...

    def list_sessions(self, user_id: str | None = None) -> list[SessionKey]:
        """The stored sessions of ``user_id`` (every user's when ``None``), sorted."""
        ...

    def load_versioned(self, key: SessionKey) -> tuple[AgentState | None, int]:
        """``(state, version)``; ``(None, 0)`` when absent."""
        ...

    def save_if_version(self, key: SessionKey, state: AgentState, expected_version: int) -> int:
        """Compare-and-set; the new version, or :class:`ConcurrentSessionModificationError`."""
        ...

    def acquire_lease(self, key: SessionKey, owner: str, ttl: float, wait: float) -> Lease:
        """Become the session's one writer, waiting up to ``wait`` s (:class:`SessionBusyError`)."""
        ...

    def renew_lease(self, lease: Lease) -> bool:
        """Extend ``lease`` by its ttl; ``False`` when it was lost."""
        ...

    def release_lease(self, lease: Lease) -> bool:
        """Free ``lease``; ``False`` (and no effect) unless it still held the session."""
        ...


@runtime_checkable
class AsyncSessionStore(Protocol):
    """The durable store API as coroutines that never block the event loop."""

    async def aload(self, key: SessionKey) -> AgentState | None: ...
    async def asave(self, key: SessionKey, state: AgentState) -> None: ...
    async def adelete(self, key: SessionKey) -> bool: ...
    async def alist_sessions(self, user_id: str | None = None) -> list[SessionKey]: ...
    async def aload_versioned(self, key: SessionKey) -> tuple[AgentState | None, int]: ...
    async def asave_if_version(
        self, key: SessionKey, state: AgentState, expected_version: int
    ) -> int: ...
    async def aacquire_lease(
        self, key: SessionKey, owner: str, ttl: float, wait: float
    ) -> Lease: ...
    async def arenew_lease(self, lease: Lease) -> bool: ...
    async def arelease_lease(self, lease: Lease) -> bool: ...


def is_durable(store: object) -> bool:
    """Whether an agent on ``store`` takes leases, loads with versions and checkpoints by
    compare-and-set: it implements :class:`AsyncSessionStore` and does not declare
    ``durable = False`` (the in-memory store keeps the live object and needs neither)."""
    return getattr(store, "durable", True) is not False and isinstance(store, AsyncSessionStore)


# -- conflict policies -------------------------------------------------------------------


class ConflictPolicy(enum.StrEnum):
    """What a writer does when its compare-and-set save finds a newer version."""

    OVERWRITE = "OVERWRITE"
    """Last writer wins: save over the newer state (an explicit opt-in)."""
    FAIL = "FAIL"
    """Raise :class:`ConcurrentSessionModificationError`; nothing is written."""
    APPEND_MERGE = "APPEND_MERGE"
    """Reload the newer state and append this writer's new messages after it."""


def merge_append(newer: AgentState, base_len: int, mine: AgentState) -> AgentState:
    """``newer`` with the messages ``mine`` added since it was loaded appended after it.

    ``base_len`` is the length of ``mine.context`` when the writer loaded it: the
    messages from that position on are this writer's. Those whose id ``newer``
    already holds (saved by an earlier checkpoint of the same writer) are not
    repeated. Everything else comes from ``newer``, except that ``mine``'s pending
    calls win when it paused, permission rules are united, and ``data`` keys only
    ``mine`` has are added. Neither input is modified; messages are shared.
    """
    if isinstance(base_len, bool) or not isinstance(base_len, int) or base_len < 0:
        raise ValueError(f"base_len must be an int >= 0, got {base_len!r}")
    known = {m.id for m in newer.context}
    added = [m for m in mine.context[base_len:] if m.id not in known]
    rules = list(newer.permission_rules)
    rules += [r for r in mine.permission_rules if r not in rules]
    data = dict(newer.data)
    for name, value in mine.data.items():
        data.setdefault(name, value)
    return newer.model_copy(update={
        "context": [*newer.context, *added],
        "pending": mine.pending if mine.pending is not None else newer.pending,
        "permission_rules": rules,
        "data": data,
    })
