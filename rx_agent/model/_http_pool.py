"""HTTP client pools for model adapters: one pool per event loop, one connection per client.

Provider-neutral: any adapter that talks HTTP through ``httpx`` can hold a
:class:`LoopPools` (``HTTPTransport`` in :mod:`rx_agent.model._http` does).
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections import deque
from collections.abc import Mapping

import httpx

from .errors import ModelConnectionError

__all__ = ["ClientPool", "LoopPools", "default_ssl_context"]

# How long an unused connection is kept (httpx's default keep-alive expiry).
_KEEPALIVE_SECONDS = 5.0

# One slot rather than a module global rebound with ``global``.
_ssl_context: list[ssl.SSLContext] = []


async def default_ssl_context() -> ssl.SSLContext:
    """The process-wide TLS context, built once in a worker thread.

    Building it reads the CA bundle from disk (tens of milliseconds), which must not
    happen on the event loop; ``httpx.AsyncClient()`` would do exactly that.
    """
    if not _ssl_context:
        context = await asyncio.to_thread(httpx.create_ssl_context)
        # Two loops may race here; both contexts are equivalent, the first one wins.
        if not _ssl_context:
            _ssl_context.append(context)
    return _ssl_context[0]


class LoopPools:
    """The :class:`ClientPool` of every event loop a model is used from.

    A connection belongs to the loop that opened it, so one model can serve a
    runtime-owned loop and the caller's loop alike, each with its own pool. ``tls``:
    whether the pools' clients need the TLS context (an ``https://`` URL). Safe to use
    from any thread.
    """

    def __init__(
        self,
        *,
        timeout: httpx.Timeout,
        headers: Mapping[str, str],
        max_connections: int,
        tls: bool,
    ) -> None:
        self._timeout = timeout
        self._headers = dict(headers)
        self._max_connections = max_connections
        self._tls = tls
        # A plain dict, not a WeakKeyDictionary: a client's connections reference
        # their loop, so the key would never be collected. Entries of closed loops are
        # dropped whenever a pool is created.
        self.by_loop: dict[asyncio.AbstractEventLoop, ClientPool] = {}
        self._lock = threading.Lock()

    async def current(self) -> ClientPool:
        """The pool of the running loop, created on first use."""
        loop = asyncio.get_running_loop()
        with self._lock:
            pool = self.by_loop.get(loop)
        if pool is not None:
            return pool
        verify: ssl.SSLContext | bool = await default_ssl_context() if self._tls else False
        with self._lock:
            for other in [other for other in self.by_loop if other.is_closed()]:
                # Its connections died with it; nothing can be closed any more.
                del self.by_loop[other]
            pool = self.by_loop.get(loop)
            if pool is None:
                pool = self.by_loop[loop] = ClientPool(
                    timeout=self._timeout,
                    headers=self._headers,
                    verify=verify,
                    max_connections=self._max_connections,
                )
        return pool

    async def aclose(self) -> None:
        """Close the pools of every loop: on their own loop, or drop them if it is closed."""
        with self._lock:
            pools = list(self.by_loop.items())
            self.by_loop.clear()
        current = asyncio.get_running_loop()
        for loop, pool in pools:
            if loop is current:
                await pool.aclose()
            elif loop.is_running() and not loop.is_closed():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(pool.aclose(), loop))


class ClientPool:
    """The HTTP clients of one event loop, each holding at most one connection.

    A call borrows an idle client (the most recently used one, whose connection is the
    most likely to be still open) or opens a new one, up to ``max_connections``; past
    that, calls wait their turn in order.

    Why not one ``httpx.AsyncClient`` with a pool of many connections: httpcore's pool
    re-scans all of its connections (for every idle one, all of them again) whenever a
    request starts or ends, and several requests starting at once get assigned the
    same idle connection and retry. With hundreds of concurrent streams that
    bookkeeping dominates: 200 concurrent calls took 2.5x (cold) to 13x (warm pool)
    the time of one. With one connection per client it costs nothing.

    Only used from its loop's thread, so it needs no lock.
    """

    def __init__(
        self,
        *,
        timeout: httpx.Timeout,
        headers: Mapping[str, str],
        verify: ssl.SSLContext | bool,
        max_connections: int,
    ) -> None:
        self._timeout = timeout
        self._headers = dict(headers)
        self._verify = verify
        self._max = max_connections
        self._idle: list[tuple[httpx.AsyncClient, float]] = []  # a stack: newest last
        self._busy: set[httpx.AsyncClient] = set()
        self._waiters: deque[asyncio.Future[httpx.AsyncClient]] = deque()
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def clients(self) -> list[httpx.AsyncClient]:
        return [client for client, _ in self._idle] + list(self._busy)

    async def acquire(self) -> httpx.AsyncClient:
        if self._closed:
            raise ModelConnectionError("the model was closed (aclose) while a call started")
        self._expire()
        if self._idle:
            client, _ = self._idle.pop()
        elif len(self._busy) < self._max:
            client = httpx.AsyncClient(
                timeout=self._timeout,
                headers=self._headers,
                verify=self._verify,
                limits=httpx.Limits(
                    max_connections=1,
                    max_keepalive_connections=1,
                    keepalive_expiry=_KEEPALIVE_SECONDS,
                ),
            )
        else:
            waiter: asyncio.Future[httpx.AsyncClient] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                client = await waiter  # release() hands over a client already marked busy
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self.release(waiter.result())  # handed over just as we were cancelled
                raise
            return client
        self._busy.add(client)
        return client

    def release(self, client: httpx.AsyncClient) -> None:
        if client not in self._busy:
            return  # the pool was closed meanwhile
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(client)  # stays busy, now for the waiter
                return
        self._busy.discard(client)
        self._idle.append((client, time.monotonic()))

    def _expire(self) -> None:
        """Close clients unused for longer than the keep-alive expiry (oldest first).

        httpx closes an expired connection only when its client is used again; an idle
        client at the bottom of the stack might never be, so it is closed here.
        """
        limit = time.monotonic() - _KEEPALIVE_SECONDS
        stale = 0
        while stale < len(self._idle) and self._idle[stale][1] < limit:
            stale += 1
        if stale:
            expired, self._idle = self._idle[:stale], self._idle[stale:]
            for client, _ in expired:
                task = asyncio.get_running_loop().create_task(client.aclose())
                self._closing.add(task)  # keep a reference until it is done
                task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        self._closed = True
        clients = self.clients
        self._idle.clear()
        self._busy.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(
                    ModelConnectionError("the model was closed (aclose) while a call waited")
                )
        for client in clients:
            await client.aclose()
        if self._closing:
            await asyncio.wait(list(self._closing))
