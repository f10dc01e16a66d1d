"""The networked durable store: Redis, for many processes on many machines.

``RedisSessionStore(url="redis://127.0.0.1:6379/0", prefix="rx_agent")`` needs the
``redis`` extra (``pip install -e '.[redis]'`` from a checkout, or
``pip install redis``); ``import rx_agent`` never does.
The plain methods use redis-py's blocking client; the ``a``-prefixed coroutines use
``redis.asyncio``. An asyncio client is bound to the event loop that created it, so
the store keeps one per loop, made on first use there; ``await store.aclose()`` on
each loop you used (or let the loop and its client be collected).

Every key the store writes starts with ``prefix + ":"`` (ids are escaped: ``%`` ->
``%25``, ``:`` -> ``%3A``)::

    {prefix}:session:{user}:{session}         hash: version, head, count, updated
    {prefix}:session:{user}:{session}:msgs    list: one message JSON per item
    {prefix}:lease:{user}:{session}           string "token owner", PX = ttl
    {prefix}:lease:{user}:{session}:queue     zset of waiting tokens (arrival order)
    {prefix}:lease:{user}:{session}:waiters   hash token -> deadline (server ms)
    {prefix}:users                            set of user ids with sessions
    {prefix}:user:{user}                      set of that user's session ids

Each operation is one Lua script (atomic, one round trip): a save checks the
version (compare-and-set), trims the list from the first changed message and
pushes the new ones, and replaces the small head hash. The keys of one session
and the user indexes are touched together, so this store targets a single Redis
(or a replicated primary), not Redis Cluster.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import weakref
from collections.abc import Callable, Generator, Mapping
from typing import Any, NamedTuple, TypeVar

from ..context import AgentState
from ._backend import SessionBackend
from ._base import ConcurrentSessionModificationError as _Conflict
from ._base import Lease, SessionKey, redact
from ._cache import DEFAULT_CACHE_MESSAGES, SessionCache
from ._delta import MessageRoles, Snapshot, SnapshotCache, compute_delta, snapshot_of
from ._journal import RunJournal
from ._lease import WAITER_TTL, LeaseAttempt
from ._redis_lua import SCRIPTS
from ._schema import corrupt, decode_stored, encode_head

__all__ = ["RedisSessionStore", "redact"]

T = TypeVar("T")
_INSTALL = ("RedisSessionStore needs the redis client: pip install -e '.[redis]' (from a "
            "checkout) or pip install redis")


class _Call(NamedTuple):
    """One request an operation needs: a script by name, or a raw command (``None``);
    ``session``: whose keys it touches (a wrong-typed key is then that session's)."""

    script: str | None
    keys: list[str]
    args: list[Any]
    session: SessionKey | None = None


_Op = Generator[_Call, Any, T]


def _import_redis() -> Any:
    try:
        import redis
        import redis.asyncio
    except ImportError as exc:
        raise ImportError(_INSTALL) from exc
    return redis


def _esc(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


def _int(key: SessionKey, field: str, raw: bytes | None, where: str) -> int:
    """A head field that must hold a decimal integer (the value is never quoted)."""
    try:
        return int(raw or b"0")
    except ValueError:
        raise corrupt(key, f"the head's {field!r} field is not an integer", where) from None


def _check_database(url: str) -> None:
    # redis-py reads a path that is not a number (redis://host/abc) as database 0.
    import re
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if parts.scheme.lower() in ("redis", "rediss") and parts.path not in ("", "/") and (
            re.fullmatch(r"/\d+/?", parts.path) is None):
        raise ValueError(f"bad Redis URL {redact(url)!r}: the path is the database number "
                         f"(redis://host:6379/0), got {unquote(parts.path)!r}")


class RedisSessionStore(SessionBackend):
    """Sessions in Redis; see the module docstring.

    ``client_options`` go to ``redis.Redis.from_url`` (e.g. ``socket_timeout``).
    ``cache_size`` bounds how many sessions' stored message ids this object
    remembers to save without rereading them. ``cache_messages`` bounds the decoded
    sessions it keeps between the calls it serves (messages over all sessions; ``0``:
    none), so a call on a session nobody else wrote meanwhile decodes nothing
    (:mod:`rx_agent.session._cache`).
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        prefix: str = "rx_agent",
        *,
        client_options: Mapping[str, Any] | None = None,
        cache_size: int = 256,
        cache_messages: int = DEFAULT_CACHE_MESSAGES,
    ) -> None:
        redis = _import_redis()
        if not isinstance(url, str):
            raise TypeError(f"RedisSessionStore url must be a str, got {type(url).__name__}")
        if not isinstance(prefix, str) or not prefix or any(c.isspace() for c in prefix):
            raise ValueError(f"RedisSessionStore prefix must be a non-empty str without "
                             f"spaces, got {prefix!r}")
        try:
            redis.connection.parse_url(url)
        except ValueError as exc:
            raise ValueError(f"bad Redis URL {redact(url)!r}: {exc}") from None
        _check_database(url)
        self.url = url
        self.prefix = prefix
        self._redis = redis
        self._options = {**(client_options or {}), "decode_responses": False}
        self._cache = SnapshotCache(cache_size)
        self._session_cache = SessionCache(cache_messages)
        self._lock = threading.Lock()
        self._sync: tuple[Any, dict[str, Any]] | None = None
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                               tuple[Any, dict[str, Any]]] = (
            weakref.WeakKeyDictionary())

    def __repr__(self) -> str:
        return f"RedisSessionStore({redact(self.url)!r}, prefix={self.prefix!r})"

    # -- clients ----------------------------------------------------------------------

    def _client(self) -> tuple[Any, dict[str, Any]]:
        with self._lock:
            if self._sync is None:
                client = self._redis.Redis.from_url(self.url, **self._options)
                self._sync = client, {n: client.register_script(s) for n, s in SCRIPTS.items()}
            return self._sync

    def _aclient(self) -> tuple[Any, dict[str, Any]]:
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._async.get(loop)
            if entry is None:  # bound to this loop: one client per loop
                client = self._redis.asyncio.Redis.from_url(self.url, **self._options)
                entry = client, {n: client.register_script(s) for n, s in SCRIPTS.items()}
                self._async[loop] = entry
            return entry

    def _run(self, op: _Op[T]) -> T:
        client, scripts = self._client()
        send: Any = op.send
        value: Any = None
        while True:
            try:
                call = send(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            try:
                if call.script is None:
                    value = client.execute_command(*call.args)
                else:
                    value = scripts[call.script](keys=call.keys, args=call.args)
                send = op.send
            except BaseException as exc:  # the operation sees it (restores its marks)
                value, send = self._fault(exc, call), op.throw

    async def _arun(self, op: _Op[T]) -> T:
        client, scripts = self._aclient()
        send: Any = op.send
        value: Any = None
        while True:
            try:
                call = send(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            try:
                if call.script is None:
                    value = await client.execute_command(*call.args)
                else:
                    value = await scripts[call.script](keys=call.keys, args=call.args)
                send = op.send
            except BaseException as exc:
                value, send = self._fault(exc, call), op.throw

    def _fault(self, exc: BaseException, call: _Call) -> BaseException:
        """``exc``, or the :class:`SessionCorruptError` it means: a key of the session
        that holds another kind of value (a string where a hash belongs, say)."""
        if (call.session is not None
                and isinstance(exc, self._redis.exceptions.ResponseError)
                and "WRONGTYPE" in str(exc)):
            return corrupt(call.session, "a key holds the wrong kind of Redis value (one of "
                           f"{', '.join(call.keys)})", repr(self))
        return exc

    def close(self) -> None:
        """Close the blocking client (asyncio clients: :meth:`aclose` on their loop)."""
        with self._lock:
            entry, self._sync = self._sync, None
        if entry is not None:
            entry[0].close()
        super().close()

    async def aclose(self) -> None:
        """Close this loop's asyncio client and the blocking client."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._async.pop(loop, None)
        if entry is not None:
            await entry[0].aclose()
        self.close()

    def _make_journal(self) -> RunJournal:
        from ._journal_redis import RedisRunJournal

        return RedisRunJournal(self.prefix, lambda: self._aclient()[0],
                               self._options.get("socket_timeout"))

    # -- keys -------------------------------------------------------------------------

    def _session_keys(self, key: SessionKey) -> list[str]:
        """head, msgs, users index, the user's sessions index."""
        user = _esc(key.user_id)
        head = f"{self.prefix}:session:{user}:{_esc(key.session_id)}"
        return [head, f"{head}:msgs", f"{self.prefix}:users", f"{self.prefix}:user:{user}"]

    def _lease_keys(self, key: SessionKey) -> list[str]:
        lease = f"{self.prefix}:lease:{_esc(key.user_id)}:{_esc(key.session_id)}"
        return [lease, f"{lease}:queue", f"{lease}:waiters"]

    # -- operations (each a generator of requests, run by _run or _arun) ----------------

    def _load(self, key: SessionKey) -> _Op[tuple[AgentState | None, int]]:
        (version, record, count), bodies = yield _Call("load", self._session_keys(key)[:2], [],
                                                         key)
        where = repr(self)
        if version is None:
            if bodies:
                raise corrupt(key, f"{len(bodies)} stored messages have no head record", where)
            self._cache.drop(key)
            return None, 0
        number, stored = _int(key, "version", version, where), _int(key, "count", count, where)
        if record is None:
            raise corrupt(key, "the head hash has no 'head' field", where)
        if stored != len(bodies):
            raise corrupt(key, f"the head counts {stored} messages, but the list holds "
                          f"{len(bodies)}", where)
        state = decode_stored(record, bodies, key, where)
        msgs = state.context if bodies else []  # inline (schema 1): no list items yet
        self._cache.put(key, snapshot_of(number, [m.id for m in msgs], bodies,
                                         MessageRoles(msgs), msgs), state)
        return state, number

    def _snapshot(self, key: SessionKey) -> _Op[Snapshot]:
        (version, _record, _count), bodies = yield _Call("load", self._session_keys(key)[:2], [],
                                                         key)
        ids, roles = [], []
        for i, body in enumerate(bodies):
            try:
                item = json.loads(body)
                ids.append(str(item["id"]))
                roles.append(str(item["role"]))
            except (ValueError, KeyError, TypeError):
                raise corrupt(key, f"stored message {i} is not a message JSON object",
                              repr(self)) from None
        number = 0 if version is None else _int(key, "version", version, repr(self))
        return snapshot_of(number, ids, bodies, roles)

    def _peek(self, key: SessionKey) -> _Op[int]:
        raw = yield _Call(None, self._session_keys(key)[:1],
                          ["HGET", self._session_keys(key)[0], "version"], key)
        return _int(key, "version", raw, repr(self))

    def _save(self, key: SessionKey, state: AgentState, expected: int | None,
              marks: frozenset[str]) -> _Op[int]:
        head = encode_head(state)
        keys = self._session_keys(key)
        try:
            known = self._cache.get(key)
            if known is None:
                known = yield from self._snapshot(key)
            for attempt in range(4):
                base = known if attempt < 3 else None  # then rewrite everything
                delta = compute_delta(base, state.context, marks)
                status, actual = yield _Call("save", keys, [
                    -1 if expected is None else expected,
                    -2 if base is None else base.version,
                    0 if base is None else base.n,
                    delta.start, head, delta.n, key.user_id, key.session_id,
                    repr(time.time()), *delta.bodies,
                ], key)
                if status == 1:
                    self._cache.put(key, delta.snapshot(int(actual)), state)
                    return int(actual)
                if status == -3:
                    raise corrupt(key, "the head's 'version' field is not an integer",
                                  repr(self))
                if status == 0:
                    assert expected is not None
                    raise _Conflict(key.session_id, expected, int(actual), user_id=key.user_id)
                known = yield from self._snapshot(key)  # another writer saved meanwhile
            raise AssertionError("unreachable: the last attempt rewrites unconditionally")
        except BaseException:
            self._cache.drop(key)
            raise

    def _delete(self, key: SessionKey) -> _Op[bool]:
        existed = yield _Call("delete", self._session_keys(key), [key.user_id, key.session_id],
                              key)
        self._cache.drop(key)
        return bool(existed)

    def _list(self, user_id: str | None) -> _Op[list[SessionKey]]:
        if user_id is not None:
            users = [user_id]
        else:
            members = yield _Call(None, [], ["SMEMBERS", f"{self.prefix}:users"])
            users = sorted(m.decode() for m in members)
        out: list[SessionKey] = []
        for user in users:
            sessions = yield _Call(None, [], ["SMEMBERS", f"{self.prefix}:user:{_esc(user)}"])
            out.extend(SessionKey(user, m.decode()) for m in sorted(sessions))
        return out

    def _attempt(self, key: SessionKey, token: str, owner: str, ttl: float,
                 beat: bool) -> _Op[LeaseAttempt]:
        status, holder, left = yield _Call("acquire", self._lease_keys(key), [
            f"{token} {owner}", max(1, round(ttl * 1000)), token, 1 if beat else 0,
            round(WAITER_TTL * 1000)], key)
        if status == 1:
            return LeaseAttempt(True)
        who = holder.decode().partition(" ")[2] if holder else None
        return LeaseAttempt(False, who or None, left / 1000 if left and left > 0 else None)

    def _leave(self, key: SessionKey, token: str) -> _Op[None]:
        yield _Call("leave", self._lease_keys(key)[1:], [token], key)

    def _renew(self, lease: Lease) -> _Op[bool]:
        done = yield _Call("renew", self._lease_keys(lease.key)[:1],
                           [f"{lease.token} {lease.owner}", max(1, round(lease.ttl * 1000))],
                           lease.key)
        return bool(done)

    def _release(self, lease: Lease) -> _Op[bool]:
        done = yield _Call("release", self._lease_keys(lease.key)[:1],
                           [f"{lease.token} {lease.owner}"], lease.key)
        return bool(done)

    # -- the primitives (see rx_agent.session._backend): both forms, one definition -----

    def _read(self, key: SessionKey) -> tuple[AgentState | None, int]:
        return self._run(self._load(key))

    async def _aread(self, key: SessionKey) -> tuple[AgentState | None, int]:
        return await self._arun(self._load(key))

    def _peek_version(self, key: SessionKey) -> int:
        return self._run(self._peek(key))

    async def _apeek_version(self, key: SessionKey) -> int:
        return await self._arun(self._peek(key))

    def _write(self, key: SessionKey, state: AgentState, expected: int | None,
               marked: frozenset[str]) -> int:
        return self._run(self._save(key, state, expected, marked))

    async def _awrite(self, key: SessionKey, state: AgentState, expected: int | None,
                      marked: frozenset[str]) -> int:
        return await self._arun(self._save(key, state, expected, marked))

    def _remove(self, key: SessionKey) -> bool:
        return self._run(self._delete(key))

    async def _aremove(self, key: SessionKey) -> bool:
        return await self._arun(self._delete(key))

    def _list_keys(self, user_id: str | None) -> list[SessionKey]:
        return self._run(self._list(user_id))

    async def _alist_keys(self, user_id: str | None) -> list[SessionKey]:
        return await self._arun(self._list(user_id))

    def _try_lease(self, key: SessionKey, token: str, owner: str, ttl: float, join: bool,
                   wake: Callable[[], None]) -> LeaseAttempt:
        return self._run(self._attempt(key, token, owner, ttl, join))

    async def _atry_lease(self, key: SessionKey, token: str, owner: str, ttl: float,
                          join: bool, wake: Callable[[], None]) -> LeaseAttempt:
        return await self._arun(self._attempt(key, token, owner, ttl, join))

    def _leave_queue(self, key: SessionKey, token: str) -> None:
        self._run(self._leave(key, token))

    async def _aleave_queue(self, key: SessionKey, token: str) -> None:
        await self._arun(self._leave(key, token))

    def _renew_lease(self, lease: Lease) -> bool:
        return self._run(self._renew(lease))

    async def _arenew_lease(self, lease: Lease) -> bool:
        return await self._arun(self._renew(lease))

    def _release_lease(self, lease: Lease) -> bool:
        return self._run(self._release(lease))

    async def _arelease_lease(self, lease: Lease) -> bool:
        return await self._arun(self._release(lease))
