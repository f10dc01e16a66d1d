"""Session slots: one holder per session, FIFO waiters, no object per uncontended call."""

from __future__ import annotations

import asyncio

import pytest

from rx_agent.agent._slots import SessionSlots, _Slot
from rx_agent.session import SessionKey

KEY = SessionKey("u", "s")


async def test_an_uncontended_slot_is_the_holder_itself() -> None:
    slots = SessionSlots()
    a = object()
    assert slots.try_acquire(KEY, a)
    assert slots._slots[KEY] is a and slots.active(KEY) is a
    assert not slots.try_acquire(KEY, object())
    slots.release(KEY, object())  # not the holder: nothing happens
    assert slots.active(KEY) is a
    slots.release(KEY, a)
    assert slots.active(KEY) is None and not slots._slots


async def test_waiters_get_the_slot_in_order_and_it_empties() -> None:
    slots = SessionSlots()
    a, b, c = object(), object(), object()
    await slots.acquire(KEY, a)
    got: list[object] = []

    async def wait(run: object) -> None:
        await slots.acquire(KEY, run)
        got.append(run)

    tb, tc = asyncio.create_task(wait(b)), asyncio.create_task(wait(c))
    await asyncio.sleep(0)
    assert type(slots._slots[KEY]) is _Slot and slots.active(KEY) is a
    slots.release(KEY, a)
    await tb
    assert got == [b] and slots.active(KEY) is b
    slots.release(KEY, b)
    await tc
    assert got == [b, c]
    slots.release(KEY, c)
    assert not slots._slots


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    slots = SessionSlots()
    a, b, c = object(), object(), object()
    assert slots.try_acquire(KEY, a)
    tb = asyncio.create_task(slots.acquire(KEY, b))
    tc = asyncio.create_task(slots.acquire(KEY, c))
    await asyncio.sleep(0)
    tb.cancel()
    with pytest.raises(asyncio.CancelledError):
        await tb
    slots.release(KEY, a)
    await tc
    assert slots.active(KEY) is c
    slots.release(KEY, c)
    assert not slots._slots
