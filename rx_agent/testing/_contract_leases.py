"""The store contract, part two: leases (one writer, first come first served, expiry,
renewal, owner-only release), sync and async (see :mod:`.store_contract`)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest

from ..session import Lease, SessionBusyError, SessionKey
from ._contract_state import KEY, arun

__all__ = ["LeaseContract"]


class LeaseContract:
    """Leases, for every store (a part of :class:`StoreContract`)."""

    def test_one_owner_at_a_time(self, store: Any) -> None:
        lease = store.acquire_lease(KEY, "worker-a", 5, 0)
        assert isinstance(lease, Lease) and lease.owner == "worker-a" and lease.key == KEY
        with pytest.raises(SessionBusyError) as info:
            store.acquire_lease(KEY, "worker-b", 5, 0)
        assert info.value.session_id == "chat-1" and info.value.holder == "worker-a"
        other = store.acquire_lease(SessionKey("alice", "chat-2"), "worker-b", 5, 0)
        assert store.release_lease(lease) is True
        second = store.acquire_lease(KEY, "worker-b", 5, 0)
        assert second.token != lease.token
        store.release_lease(second)
        store.release_lease(other)

    def test_busy_only_after_waiting_the_whole_wait(self, store: Any) -> None:
        store.acquire_lease(KEY, "worker-a", 10, 0)
        start = time.monotonic()
        with pytest.raises(SessionBusyError) as info:
            store.acquire_lease(KEY, "worker-b", 10, 0.3)
        waited = time.monotonic() - start
        assert 0.3 <= waited < 3.0
        assert info.value.waited is not None and info.value.waited >= 0.3
        assert "worker-a" in str(info.value) and "after waiting 0.3" in str(info.value)

    def test_a_waiter_gets_the_lease_when_it_is_released(self, store: Any) -> None:
        lease = store.acquire_lease(KEY, "worker-a", 10, 0)
        threading.Timer(0.2, store.release_lease, (lease,)).start()
        start = time.monotonic()
        got = store.acquire_lease(KEY, "worker-b", 10, 5)
        assert got.owner == "worker-b"
        assert 0.15 < time.monotonic() - start < 3.0
        store.release_lease(got)

    def test_an_expired_lease_goes_to_the_next_owner(self, store: Any) -> None:
        crashed = store.acquire_lease(KEY, "crashed", 0.2, 0)  # never renewed nor released
        start = time.monotonic()
        taken = store.acquire_lease(KEY, "next", 5, 3)
        assert 0.1 < time.monotonic() - start < 3.0
        assert taken.owner == "next"
        # The crashed owner can no longer renew or release what is now someone else's.
        assert store.renew_lease(crashed) is False
        assert store.release_lease(crashed) is False
        with pytest.raises(SessionBusyError):
            store.acquire_lease(KEY, "third", 5, 0)
        assert store.release_lease(taken) is True

    def test_release_by_a_non_owner_has_no_effect(self, store: Any) -> None:
        lease = store.acquire_lease(KEY, "worker-a", 5, 0)
        forged = Lease(KEY, "worker-b", uuid.uuid4().hex, 5)
        same_owner_other_token = Lease(KEY, "worker-a", uuid.uuid4().hex, 5)
        assert store.release_lease(forged) is False
        assert store.release_lease(same_owner_other_token) is False
        assert store.renew_lease(forged) is False
        with pytest.raises(SessionBusyError):
            store.acquire_lease(KEY, "worker-c", 5, 0)
        assert store.release_lease(lease) is True
        assert store.release_lease(lease) is False  # once

    def test_renewal_keeps_the_lease_past_its_ttl(self, store: Any) -> None:
        lease = store.acquire_lease(KEY, "worker-a", 0.4, 0)
        for _ in range(4):
            time.sleep(0.15)
            assert store.renew_lease(lease) is True
        # 0.6 s after acquiring, past the ttl: still held thanks to the renewals.
        with pytest.raises(SessionBusyError):
            store.acquire_lease(KEY, "worker-b", 1, 0)
        time.sleep(0.6)  # no more renewals: it lapses
        assert store.renew_lease(lease) is False
        store.release_lease(store.acquire_lease(KEY, "worker-b", 1, 0))

    def test_waiters_are_served_in_arrival_order(self, store: Any) -> None:
        lease = store.acquire_lease(KEY, "holder", 10, 0)
        order: list[str] = []
        lock = threading.Lock()

        def waiter(name: str) -> None:
            got = store.acquire_lease(KEY, name, 10, 10)
            with lock:
                order.append(name)
            time.sleep(0.02)
            store.release_lease(got)

        threads = []
        for name in ("first", "second", "third"):
            t = threading.Thread(target=waiter, args=(name,))
            t.start()
            threads.append(t)
            time.sleep(0.15)  # each is queued before the next arrives
        store.release_lease(lease)
        for t in threads:
            t.join(10)
        assert order == ["first", "second", "third"]

    def test_a_waiter_that_gives_up_leaves_the_queue(self, store: Any) -> None:
        lease = store.acquire_lease(KEY, "holder", 10, 0)
        with pytest.raises(SessionBusyError):
            store.acquire_lease(KEY, "impatient", 10, 0.1)
        store.release_lease(lease)
        # Nobody is queued in front any more: an immediate attempt succeeds.
        store.release_lease(store.acquire_lease(KEY, "later", 10, 0))

    def test_async_leases_wait_without_blocking_the_loop(self, store: Any) -> None:
        async def body() -> None:
            lease = await store.aacquire_lease(KEY, "worker-a", 10, 0)
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.01)

            tick_task = asyncio.create_task(ticker())
            waiting = asyncio.create_task(store.aacquire_lease(KEY, "worker-b", 10, 5))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            assert ticks >= 10  # the loop kept running while worker-b waited
            assert await store.arenew_lease(lease) is True
            assert await store.arelease_lease(lease) is True
            got = await asyncio.wait_for(waiting, 3)
            assert got.owner == "worker-b"
            with pytest.raises(SessionBusyError):
                await store.aacquire_lease(KEY, "worker-c", 10, 0.05)
            assert await store.arelease_lease(got) is True
            tick_task.cancel()

        arun(store, body)

    def test_a_cancelled_async_waiter_frees_its_place(self, store: Any) -> None:
        async def body() -> None:
            lease = await store.aacquire_lease(KEY, "holder", 10, 0)
            waiting = asyncio.create_task(store.aacquire_lease(KEY, "cancelled", 10, 10))
            await asyncio.sleep(0.1)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await store.arelease_lease(lease)
            got = await store.aacquire_lease(KEY, "next", 10, 0)
            await store.arelease_lease(got)

        arun(store, body)

    def test_sync_and_async_callers_share_one_queue(self, store: Any) -> None:
        holder = store.acquire_lease(KEY, "holder", 10, 0)
        leases: dict[str, Lease] = {}

        def blocking() -> None:
            leases["sync"] = store.acquire_lease(KEY, "sync", 10, 10)

        async def body() -> None:
            thread = threading.Thread(target=blocking)
            thread.start()
            await asyncio.sleep(0.15)  # the blocking waiter is queued first
            waiting = asyncio.create_task(store.aacquire_lease(KEY, "async", 10, 10))
            await asyncio.sleep(0.15)
            assert await store.arelease_lease(holder) is True
            await asyncio.to_thread(thread.join, 10)
            assert "sync" in leases and not waiting.done()  # first come, first served
            assert await store.arelease_lease(leases["sync"]) is True
            got = await asyncio.wait_for(waiting, 5)
            assert got.owner == "async"
            assert await store.arelease_lease(got) is True

        arun(store, body)
