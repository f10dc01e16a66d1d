"""The primitives of a session backend: which exist, and how the missing form of each
is made from the other (see :mod:`rx_agent.session._backend`).

Each primitive has a sync and an async form. A class implements one or both; at
class creation :func:`derive` fills in the other: a sync primitive becomes a
coroutine that runs it off the loop (``_run_blocking``; inline for a backend that
``answers_inline``), an async one a blocking call through the store's portal (an
event loop on a thread of its own). The four lease primitives come from
``_update_lease`` (a :class:`LeaseRecord` read-modify-write) when a backend has no
lease logic of its own. A primitive implemented in neither form raises
``NotImplementedError`` naming the pair.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple, TypeVar

from ..context import AgentState
from ._base import SessionKey
from ._lease import LeaseRecord

__all__ = [
    "DEFAULT",
    "PRIMITIVES",
    "InlineCoroutines",
    "Portal",
    "SessionChanges",
    "derive",
    "inline_coroutines",
    "made",
    "missing",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
LeaseChange = Callable[[LeaseRecord | None], tuple[LeaseRecord | None, T]]


class SessionChanges(NamedTuple):
    """What ``load_since(key, version, count)`` found, for a caller holding a copy of the
    session at ``version`` with ``count`` messages.

    * ``version == 0``: the session is absent;
    * ``state is None`` (and ``version > 0``): unchanged since the caller's version;
    * else ``state`` is the stored state whose ``context`` holds only the stored
      messages from position ``start`` on (``0``: all of them); the first ``start``
      are the caller's, unchanged. :meth:`apply` puts the two together.
    """

    version: int
    state: AgentState | None = None
    start: int = 0

    def apply(self, known: AgentState | None) -> AgentState | None:
        """The stored state, given the caller's copy ``known`` (the one at its version)."""
        if self.version == 0:
            return None
        if self.state is None:
            return known
        if self.start == 0:
            return self.state
        if known is None or len(known.context) < self.start:
            raise ValueError(f"these changes start at message {self.start}: pass the copy "
                             "they were read against")
        return self.state.model_copy(update={
            "context": [*known.context[:self.start], *self.state.context]})


# -- which primitives a class implements ------------------------------------------------------

_MISSING, DEFAULT, _DERIVED = "missing", "default", "derived"

_REQUIRED = (("_read", "_aread"), ("_write", "_awrite"), ("_remove", "_aremove"),
             ("_list_keys", "_alist_keys"))
_LEASES = (("_try_lease", "_atry_lease"), ("_leave_queue", "_aleave_queue"),
           ("_renew_lease", "_arenew_lease"), ("_release_lease", "_arelease_lease"))
_OPTIONAL = (("_update_lease", "_aupdate_lease"), ("_peek_version", "_apeek_version"),
             ("_read_since", "_aread_since"))
PRIMITIVES = (*_REQUIRED, *_LEASES, *_OPTIONAL)


def _kind(fn: object) -> str | None:
    """``None`` for a backend's own method, else how the kit made it."""
    return getattr(fn, "__kit__", None)


def made(kind: str) -> Callable[[F], F]:
    def mark(fn: F) -> F:
        fn.__kit__ = kind  # type: ignore[attr-defined]
        return fn

    return mark


def missing(sync: str, asynchronous: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def complain(self: Any) -> NotImplementedError:
        return NotImplementedError(
            f"{type(self).__name__} implements neither {sync} nor {asynchronous}: a session "
            "backend implements one of each pair of primitives (docs/internals.md, "
            "'Writing a session backend')")

    def stub(self: Any, *args: Any) -> Any:
        raise complain(self)

    async def astub(self: Any, *args: Any) -> Any:
        raise complain(self)

    return made(_MISSING)(stub), made(_MISSING)(astub)


def _async_twin(sync: str) -> Callable[..., Any]:
    async def twin(self: Any, *args: Any) -> Any:
        fn = getattr(self, sync)
        if self.answers_inline:
            return fn(*args)
        return await self._run_blocking(fn, *args)

    return made(_DERIVED)(twin)


def _sync_twin(asynchronous: str) -> Callable[..., Any]:
    def twin(self: Any, *args: Any) -> Any:
        return self._portal().call(getattr(self, asynchronous)(*args))

    return made(_DERIVED)(twin)


def _attempt(key: SessionKey, token: str, owner: str, ttl: float, join: bool,
             wake: object) -> tuple[SessionKey, LeaseChange[Any]]:
    return key, lambda r: (r or LeaseRecord()).attempt(token, owner, ttl, join, time.time())


def _leave(key: SessionKey, token: str) -> tuple[SessionKey, LeaseChange[Any]]:
    return key, lambda r: ((r or LeaseRecord()).leave(token, time.time()), None)


def _renew(lease: Any) -> tuple[SessionKey, LeaseChange[Any]]:
    return lease.key, lambda r: (r or LeaseRecord()).renew(lease, time.time())


def _release(lease: Any) -> tuple[SessionKey, LeaseChange[Any]]:
    return lease.key, lambda r: (r or LeaseRecord()).release(lease, time.time())


# Each lease primitive as (the session, the change of its LeaseRecord) for _update_lease.
_RECORD_CHANGES: dict[str, Callable[..., tuple[SessionKey, LeaseChange[Any]]]] = {
    "_try_lease": _attempt, "_leave_queue": _leave, "_renew_lease": _renew,
    "_release_lease": _release}


def _via_record(sync: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """A lease primitive (sync and async) from ``_update_lease`` / ``_aupdate_lease``."""
    change = _RECORD_CHANGES[sync]

    def prim(self: Any, *args: Any) -> Any:
        return self._update_lease(*change(*args))

    async def aprim(self: Any, *args: Any) -> Any:
        return await self._aupdate_lease(*change(*args))

    return made(_DERIVED)(prim), made(_DERIVED)(aprim)


def derive(cls: type[Any]) -> None:
    """Fill in each primitive a class implements in one form only (and leases from
    ``_update_lease``)."""
    for sync, asynchronous in PRIMITIVES:
        mine, theirs = _kind(getattr(cls, sync)), _kind(getattr(cls, asynchronous))
        if mine is None and theirs is not None:
            setattr(cls, asynchronous, _async_twin(sync))
        elif theirs is None and mine is not None:
            setattr(cls, sync, _sync_twin(asynchronous))
    has_record = _MISSING not in (_kind(cls._update_lease), _kind(cls._aupdate_lease))
    for sync, asynchronous in _LEASES:
        if has_record and _kind(getattr(cls, sync)) == _MISSING:
            prim, aprim = _via_record(sync)
            setattr(cls, sync, prim)
            setattr(cls, asynchronous, aprim)


_INLINE = "inline"


class InlineCoroutines:
    """The coroutines of an ``answers_inline`` backend: its sync methods, called on the
    loop (one coroutine, no derived layers: the in-memory store is on every call's
    path). :func:`inline_coroutines` puts them on such a class."""

    async def aload(self: Any, key: SessionKey) -> AgentState | None:
        return self.load(key)  # type: ignore[no-any-return]

    async def aload_versioned(self: Any, key: SessionKey) -> tuple[AgentState | None, int]:
        return self.load_versioned(key)  # type: ignore[no-any-return]

    async def asave(self: Any, key: SessionKey, state: AgentState) -> None:
        self.save(key, state)

    async def asave_if_version(self: Any, key: SessionKey, state: AgentState,
                               expected_version: int) -> int:
        return self.save_if_version(key, state, expected_version)  # type: ignore[no-any-return]

    async def adelete(self: Any, key: SessionKey) -> bool:
        return self.delete(key)  # type: ignore[no-any-return]

    async def alist_sessions(self: Any, user_id: str | None = None) -> list[SessionKey]:
        return self.list_sessions(user_id)  # type: ignore[no-any-return]

    async def aversion(self: Any, key: SessionKey) -> int:
        return self.version(key)  # type: ignore[no-any-return]

    async def aload_since(self: Any, key: SessionKey, version: int,
                          count: int) -> SessionChanges:
        return self.load_since(key, version, count)  # type: ignore[no-any-return]

    async def arenew_lease(self: Any, lease: Any) -> bool:
        return self.renew_lease(lease)  # type: ignore[no-any-return]

    async def arelease_lease(self: Any, lease: Any) -> bool:
        return self.release_lease(lease)  # type: ignore[no-any-return]


_INLINE_NAMES = [n for n in InlineCoroutines.__dict__ if n.startswith("a")]
for _name in _INLINE_NAMES:
    made(_INLINE)(InlineCoroutines.__dict__[_name])
del _name


def inline_coroutines(cls: type[Any], base: type[Any]) -> None:
    """An ``answers_inline`` class gets :class:`InlineCoroutines`' coroutines (unless
    it has its own); a class that is not inline gets the kit's own back."""
    for name in _INLINE_NAMES:
        current = getattr(cls, name)
        if _kind(current) is None and current is not base.__dict__[name]:
            continue  # the class's own coroutine
        setattr(cls, name, InlineCoroutines.__dict__[name] if cls.answers_inline
                else base.__dict__[name])


class Portal:
    """An event loop on a thread of its own, to run async primitives from sync code."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="rx-session-portal")
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a session store's blocking method was called from its own "
                               "portal loop; use the a-prefixed coroutine there")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()
