"""The session-backend kit: a backend implements a few primitives, the mixin the rest.

:class:`SessionBackend` derives the whole store API (both protocols of
:mod:`rx_agent.session._base`, sync and ``a``-prefixed coroutines), argument checks,
edit marks, the lease waiting loops and the conflict policies from these
primitives, each in a sync form or an async form (``_read`` / ``_aread``; a
backend writes whichever suits its client, or both):

========================================  ==================================================
``_read(key)``                            ``(state, version)``; ``(None, 0)`` when absent
``_write(key, state, expected, marked)``  store ``state`` if the version is ``expected``
                                          (``None``: any); the new version, else raise
                                          :class:`ConcurrentSessionModificationError`
``_remove(key)``                          delete; whether it existed
``_list_keys(user_id)``                   the keys of ``user_id`` (``None``: all), sorted
``_update_lease(key, change)``            read the session's :class:`LeaseRecord` (or
                                          ``None``), store ``change(record)[0]``
                                          atomically, return ``[1]``
========================================  ==================================================

``_update_lease`` is the easy way to leases. A backend with lease logic of its own
implements ``_try_lease``, ``_leave_queue``, ``_renew_lease`` and ``_release_lease``
instead (the built-in stores do: Lua scripts, SQL rows, a table with wake-ups).
Optional, with defaults read through ``_read``: ``_peek_version(key)`` (a cheap
version check) and ``_read_since(key, version, count)`` (only what changed since a
version the caller holds, see :class:`SessionChanges`).

Every backend also gets the cache of the sessions its calls served
(:mod:`rx_agent.session._cache`): ``acheckout(key)`` (the state for a call holding the
lease: the cached one while the stored version, one ``_peek_version`` or
``_read_since``, is still its version) and ``keep(key, state, version)`` (what a call
saved). Its budget is ``self._session_cache`` when the constructor makes one
(``SessionCache(cache_messages)``), else the default.

A sync primitive runs as is under the sync API and off the loop under the async one
(``_run_blocking``: ``asyncio.to_thread`` unless the backend has its own threads; or
inline when the backend declares ``answers_inline``); an async primitive runs on the
caller's loop under the async API and on the store's own loop thread (a portal) under
the sync one. So the event loop is never blocked either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from ..context import AgentState
from ..message import Msg
from . import _policy
from ._base import (
    ConflictPolicy,
    Lease,
    SessionKey,
    check_key,
    check_lease_args,
    check_state,
)
from ._cache import Served, SessionCache, detach
from ._delta import SnapshotCache, restore_marks, take_marks
from ._journal import RunJournal
from ._lease import POLL_MAX, POLL_MIN, LeaseAttempt, await_lease, wait_for_lease
from ._primitives import DEFAULT, Portal, SessionChanges, derive, inline_coroutines, made, missing

__all__ = ["SessionBackend", "SessionChanges"]

T = TypeVar("T")


def _key(key: object) -> SessionKey:
    if type(key) is SessionKey:  # the agent's keys: checked without a call
        user, session = key
        if type(user) is str and type(session) is str and user and session:
            return key
    return check_key(key)


def _version(value: object, name: str) -> int:
    if type(value) is not int:
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0 (0: the session is absent), got {value}")
    return value


def _lease(lease: object) -> Lease:
    if not isinstance(lease, Lease):
        raise TypeError(f"expected the Lease acquire_lease returned, got {type(lease).__name__}")
    return lease


def _user(user_id: object) -> str | None:
    if user_id is not None and not isinstance(user_id, str):
        raise TypeError(f"user_id must be a str or None, got {type(user_id).__name__}")
    return user_id


class SessionBackend:
    """The mixin a session store derives from (see the module docstring).

    Capabilities a backend declares as class attributes:

    ``durable`` (default ``True``)
        Other store objects or processes may share these sessions, and loads are
        copies: the agent takes the session's lease, loads with the version and saves
        by compare-and-set at every checkpoint. ``False`` (the in-memory store): the
        agent calls ``load`` / ``save`` and works on the object it got.
    ``answers_inline`` (default ``False``)
        The sync primitives never block (a dict in this process): the coroutines call
        them directly on the loop, and the agent finishes a call without a task. A
        subclass that overrides ``load`` or ``save`` loses it unless it declares it again.
    ``lease_poll`` (default ``(POLL_MIN, POLL_MAX)``)
        The first and the longest pause between lease attempts while another owner
        holds the lease. A backend whose ``_try_lease`` calls ``wake()`` whenever the
        lease may have become free can wait without polling: ``(math.inf, math.inf)``.
    """

    durable: ClassVar[bool] = True
    answers_inline: ClassVar[bool] = False
    lease_poll: ClassVar[tuple[float, float]] = (POLL_MIN, POLL_MAX)

    _read, _aread = missing("_read", "_aread")
    _write, _awrite = missing("_write", "_awrite")
    _remove, _aremove = missing("_remove", "_aremove")
    _list_keys, _alist_keys = missing("_list_keys", "_alist_keys")
    _try_lease, _atry_lease = missing("_try_lease", "_atry_lease")
    _leave_queue, _aleave_queue = missing("_leave_queue", "_aleave_queue")
    _renew_lease, _arenew_lease = missing("_renew_lease", "_arenew_lease")
    _release_lease, _arelease_lease = missing("_release_lease", "_arelease_lease")
    _update_lease, _aupdate_lease = missing("_update_lease", "_aupdate_lease")

    __portal: Portal | None = None
    _session_cache: SessionCache | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "answers_inline" not in cls.__dict__ and ("load" in cls.__dict__
                                                     or "save" in cls.__dict__):
            cls.answers_inline = False  # an override may block, or be a coroutine
        derive(cls)
        inline_coroutines(cls, SessionBackend)

    # -- optional primitives, derived from _read --------------------------------------

    @made(DEFAULT)
    def _peek_version(self, key: SessionKey) -> int:
        return self._read(key)[1]  # type: ignore[no-any-return]

    @made(DEFAULT)
    async def _apeek_version(self, key: SessionKey) -> int:
        return (await self._aread(key))[1]  # type: ignore[no-any-return]

    @made(DEFAULT)
    def _read_since(self, key: SessionKey, version: int, count: int) -> SessionChanges:
        if version and self._peek_version(key) == version:
            return SessionChanges(version)
        state, now = self._read(key)
        return SessionChanges(now, state)

    @made(DEFAULT)
    async def _aread_since(self, key: SessionKey, version: int, count: int) -> SessionChanges:
        if version and await self._apeek_version(key) == version:
            return SessionChanges(version)
        state, now = await self._aread(key)
        return SessionChanges(now, state)

    # -- the sessions served (session/_cache.py) ---------------------------------------

    @property
    def session_cache(self) -> SessionCache:
        """The decoded sessions this store object keeps between calls."""
        cache: SessionCache | None = getattr(self, "_session_cache", None)
        if cache is None:
            with _PORTALS:
                cache = getattr(self, "_session_cache", None)
                if cache is None:
                    cache = self._session_cache = SessionCache()
        return cache

    async def acheckout(self, key: SessionKey) -> Served:
        """The state for a call that holds ``key``'s lease, owned by the caller: the
        cached one while the stored version is still its version (one small read),
        else the stored changes applied to it, else a fresh load."""
        key = _key(key)
        served = await self._acheckout(key)
        snapshots = self._snapshots()
        if snapshots is not None:  # what the call's saves rewrite: see unchanged_prefix
            snapshots.watch(key)
        return served

    async def _acheckout(self, key: SessionKey) -> Served:
        entry = self.session_cache.take(key)
        if entry is None or entry.state is None:
            # The public coroutines: a subclass's own aload_versioned is honoured.
            state, version = await self.aload_versioned(key)
            return Served(state, version)
        known = entry.state
        changes = await self.aload_since(key, entry.version, len(known.context))
        if changes.version == 0:
            return Served(None, 0)
        if changes.state is None:
            entry.hit = True
            return entry
        clean = min(entry.clean, changes.start)
        return Served(changes.apply(known), changes.version, clean, entry.prefix[:clean])

    def unchanged_prefix(self, key: SessionKey) -> int:
        """How many leading messages of the state :meth:`acheckout` gave no save of
        ``key`` through this object has rewritten since (``0``: unknown). Read once,
        before :meth:`keep`; from the delta snapshots, so no compare is needed."""
        snapshots = self._snapshots()
        return snapshots.unchanged_below(key) if snapshots is not None else 0

    def keep(self, key: SessionKey, state: AgentState, version: int, clean: int = 0,
             prefix: list[Msg] | None = None) -> bool:
        """Cache ``state`` as a call saved it at ``version`` (a copy of its containers
        is kept); whether it fits the budget. ``clean`` / ``prefix``: see
        :class:`~rx_agent.session._cache.Served`."""
        cache = self.session_cache
        if len(state.context) > cache.max_messages:
            cache.drop(key)
            return False
        mine = detach(state)
        snapshots = self._snapshots()
        if snapshots is not None:  # its message objects stay while the copy lives
            snapshots.adopt(key, mine, version)
        return cache.keep(key, Served(mine, version, clean, prefix or []))

    def _snapshots(self) -> SnapshotCache | None:
        """The backend's :class:`SnapshotCache` (``self._cache`` by convention)."""
        snapshots = getattr(self, "_cache", None)
        return snapshots if isinstance(snapshots, SnapshotCache) else None

    # -- the run journal ----------------------------------------------------------------

    __journal: RunJournal | None = None

    def journal(self, *, max_events: int | None = None,
                max_age: float | None = None) -> RunJournal:
        """This store's run journal (:mod:`rx_agent.session._journal`): each call's
        events per session, in the same backend, readable by every process sharing it.
        One object per store, made on first use; ``max_events`` / ``max_age`` change
        its retention (defaults: 10,000 entries per session, 24 h)."""
        journal = self.__journal
        if journal is None:
            with _PORTALS:
                journal = self.__journal
                if journal is None:
                    journal = self.__journal = self._make_journal()
        if max_events is not None or max_age is not None:
            journal.retain(max_events=max_events, max_age=max_age)
        return journal

    def _make_journal(self) -> RunJournal:
        """The backend's :class:`RunJournal` (a backend without one leaves this)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no run journal (it implements "
                                  "no _make_journal)")

    # -- where the primitives run -------------------------------------------------------

    async def _run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` off the event loop (a backend with its own threads overrides it)."""
        return await asyncio.to_thread(fn, *args)

    def _portal(self) -> Portal:
        portal = self.__portal
        if portal is None or portal.pid != os.getpid():
            with _PORTALS:
                portal = self.__portal
                if portal is None or portal.pid != os.getpid():
                    portal = self.__portal = Portal()
        return portal

    def close(self) -> None:
        """Release what the store holds open (idempotent; a later call reopens it)."""
        journal = self.__journal
        if journal is not None:
            journal.close()
        portal, self.__portal = self.__portal, None
        if portal is not None and portal.pid == os.getpid():
            portal.close()

    async def aclose(self) -> None:
        """:meth:`close`, for the loop's own resources too (off the loop)."""
        await asyncio.to_thread(self.close)

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self: T) -> T:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the synchronous API ------------------------------------------------------------

    def load(self, key: SessionKey) -> AgentState | None:
        """The stored state, or ``None`` when absent."""
        # On every call's path: the agent's own keys pass with an inline check.
        if type(key) is not SessionKey or not (key[0] and key[1]):
            key = check_key(key)
        return self._read(key)[0]  # type: ignore[no-any-return]

    def load_versioned(self, key: SessionKey) -> tuple[AgentState | None, int]:
        """``(state, version)``; ``(None, 0)`` when absent."""
        if type(key) is not SessionKey or not (key[0] and key[1]):
            key = check_key(key)
        return self._read(key)  # type: ignore[no-any-return]

    def save(self, key: SessionKey, state: AgentState) -> None:
        """Store ``state`` unconditionally (last writer wins)."""
        self._checked_write(key, state, None)

    def save_if_version(self, key: SessionKey, state: AgentState, expected_version: int) -> int:
        """Compare-and-set; the new version, or ``ConcurrentSessionModificationError``."""
        return self._checked_write(key, state, _version(expected_version, "expected_version"))

    def _checked_write(self, key: Any, state: Any, expected: int | None) -> int:
        if (type(key) is not SessionKey or type(key[0]) is not str or type(key[1]) is not str
                or not (key[0] and key[1])):
            key = check_key(key)  # the agent's keys pass the inline check above
        if type(state) is not AgentState:
            state = check_state(state)
        marks = take_marks(state)
        try:
            return self._write(key, state, expected, marks)  # type: ignore[no-any-return]
        except BaseException:
            restore_marks(state, marks)  # nothing was written: the next save sees them
            raise

    def delete(self, key: SessionKey) -> bool:
        """Remove the session; whether it existed. Leases are left to expire."""
        key = _key(key)
        if self._session_cache is not None:
            self._session_cache.drop(key)
        return bool(self._remove(key))

    def list_sessions(self, user_id: str | None = None) -> list[SessionKey]:
        """The stored sessions of ``user_id`` (every user's when ``None``), sorted."""
        return self._list_keys(_user(user_id))  # type: ignore[no-any-return]

    def version(self, key: SessionKey) -> int:
        """The stored version (``0``: absent), without loading the state when the
        backend can tell it cheaply."""
        return self._peek_version(_key(key))

    def load_since(self, key: SessionKey, version: int, count: int) -> SessionChanges:
        """What changed since ``version`` for a caller whose copy holds ``count``
        messages (:class:`SessionChanges`: nothing, only the new messages, or all)."""
        return self._read_since(_key(key), _version(version, "version"),
                                _version(count, "count"))

    def acquire_lease(
        self, key: SessionKey, owner: str, ttl: float = 30.0, wait: float = 30.0
    ) -> Lease:
        """Become the session's one writer, waiting up to ``wait`` s (``SessionBusyError``)."""
        k, who, secs, patience = check_lease_args(key, owner, ttl, wait)
        woken = threading.Event()

        def attempt(token: str, join: bool) -> LeaseAttempt:
            woken.clear()
            return self._try_lease(k, token, who, secs, join,  # type: ignore[no-any-return]
                                   woken.set)

        def pause(seconds: float) -> None:
            woken.wait(None if seconds == math.inf else seconds)

        return wait_for_lease(k, who, secs, patience, attempt,
                              lambda token: self._leave_queue(k, token), pause, self.lease_poll)

    def renew_lease(self, lease: Lease) -> bool:
        """Extend ``lease`` by its ttl; ``False`` when it was lost."""
        return bool(self._renew_lease(_lease(lease)))

    def release_lease(self, lease: Lease) -> bool:
        """Free ``lease``; ``False`` (and no effect) unless it still held the session."""
        return bool(self._release_lease(_lease(lease)))

    def save_with_policy(
        self, key: SessionKey, state: AgentState, expected_version: int,
        policy: ConflictPolicy | str = ConflictPolicy.FAIL, base_len: int = 0,
    ) -> _policy.SaveOutcome:
        """:func:`~rx_agent.session.save_with_policy` on this store."""
        return _policy.save_with_policy(self, key, state, expected_version, policy, base_len)

    # -- the coroutines -------------------------------------------------------------------

    async def aload(self, key: SessionKey) -> AgentState | None:
        if type(key) is not SessionKey or not (key[0] and key[1]):
            key = check_key(key)
        return (await self._aread(key))[0]  # type: ignore[no-any-return]

    async def aload_versioned(self, key: SessionKey) -> tuple[AgentState | None, int]:
        if type(key) is not SessionKey or not (key[0] and key[1]):
            key = check_key(key)
        return await self._aread(key)  # type: ignore[no-any-return]

    async def asave(self, key: SessionKey, state: AgentState) -> None:
        await self._achecked_write(key, state, None)

    async def asave_if_version(
        self, key: SessionKey, state: AgentState, expected_version: int
    ) -> int:
        return await self._achecked_write(key, state,
                                          _version(expected_version, "expected_version"))

    async def _achecked_write(self, key: object, state: object, expected: int | None) -> int:
        key = _key(key)
        state = state if type(state) is AgentState else check_state(state)
        marks = take_marks(state)
        try:
            return await self._awrite(key, state, expected, marks)  # type: ignore[no-any-return]
        except BaseException:
            restore_marks(state, marks)
            raise

    async def adelete(self, key: SessionKey) -> bool:
        key = _key(key)
        if self._session_cache is not None:
            self._session_cache.drop(key)
        return bool(await self._aremove(key))

    async def alist_sessions(self, user_id: str | None = None) -> list[SessionKey]:
        return await self._alist_keys(_user(user_id))  # type: ignore[no-any-return]

    async def aversion(self, key: SessionKey) -> int:
        return await self._apeek_version(_key(key))

    async def aload_since(self, key: SessionKey, version: int, count: int) -> SessionChanges:
        return await self._aread_since(_key(key), _version(version, "version"),
                                       _version(count, "count"))

    async def aacquire_lease(
        self, key: SessionKey, owner: str, ttl: float = 30.0, wait: float = 30.0
    ) -> Lease:
        k, who, secs, patience = check_lease_args(key, owner, ttl, wait)
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:  # may run on another thread (a releaser, a worker thread)
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(woken.set)

        async def attempt(token: str, join: bool) -> LeaseAttempt:
            woken.clear()
            return await self._atry_lease(k, token, who, secs, join,  # type: ignore[no-any-return]
                                          wake)

        async def pause(seconds: float) -> None:
            if woken.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), None if seconds == math.inf else seconds)

        async def leave(token: str) -> None:
            await self._aleave_queue(k, token)

        return await await_lease(k, who, secs, patience, attempt, leave, pause, self.lease_poll,
                                 release=self.arelease_lease)

    async def arenew_lease(self, lease: Lease) -> bool:
        return bool(await self._arenew_lease(_lease(lease)))

    async def arelease_lease(self, lease: Lease) -> bool:
        return bool(await self._arelease_lease(_lease(lease)))

    async def asave_with_policy(
        self, key: SessionKey, state: AgentState, expected_version: int,
        policy: ConflictPolicy | str = ConflictPolicy.FAIL, base_len: int = 0,
    ) -> _policy.SaveOutcome:
        """:func:`~rx_agent.session.asave_with_policy` on this store."""
        return await _policy.asave_with_policy(self, key, state, expected_version, policy,
                                               base_len)


_PORTALS = threading.Lock()
