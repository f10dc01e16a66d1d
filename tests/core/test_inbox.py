"""The Observable-to-consumer bridge (``rx_agent._rx.Inbox``) that ``astream``,
``call_sync``, the server's event pump and the CLI's pump share."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import reactivex
from reactivex import operators as ops
from reactivex.subject import Subject

from rx_agent._rx import DONE, ERROR, NEXT, Inbox, aiter_observable


def test_items_then_a_terminal_signal_that_stays() -> None:
    async def main() -> None:
        inbox = Inbox(reactivex.of(1, 2, 3))
        assert list(inbox.items) == [1, 2, 3]
        assert [inbox.ready() for _ in range(3)] == [(NEXT, 1), (NEXT, 2), (NEXT, 3)]
        assert inbox.ready() == (DONE, None)
        assert await inbox.next() == (DONE, None)  # the terminal signal stays

    asyncio.run(main())


def test_an_error_and_unread() -> None:
    async def main() -> None:
        boom = ValueError("boom")
        inbox = Inbox(reactivex.concat(reactivex.of("a", "b"), reactivex.throw(boom)))
        first = [inbox.ready(), inbox.ready(), inbox.ready()]
        assert first == [(NEXT, "a"), (NEXT, "b"), (ERROR, boom)]
        inbox.unread(first)
        assert [inbox.ready(), inbox.ready(), inbox.ready()] == first

    asyncio.run(main())


def test_next_wakes_on_a_later_item_and_times_out_without_one() -> None:
    async def main() -> None:
        subject: Subject[int] = Subject()
        inbox = Inbox(subject)
        assert await inbox.next(0.01) is None  # nothing came: the timeout
        asyncio.get_running_loop().call_later(0.01, subject.on_next, 7)
        assert await inbox.next(5) == (NEXT, 7)
        inbox.dispose()
        inbox.dispose()  # idempotent

    asyncio.run(main())


def test_signals_from_another_thread_hop_onto_the_inbox_loop() -> None:
    async def main() -> None:
        seen: list[int] = []
        inbox = Inbox(reactivex.from_iterable(range(50)).pipe(
            ops.observe_on(reactivex.scheduler.NewThreadScheduler())))
        loop_thread = threading.get_ident()
        while True:
            signal = await inbox.next(5)
            assert signal is not None
            assert threading.get_ident() == loop_thread
            if signal[0] != NEXT:
                assert signal == (DONE, None)
                break
            seen.append(signal[1])
        assert seen == list(range(50))

    asyncio.run(main())


def test_a_blocking_inbox_wakes_a_thread_without_a_loop() -> None:
    subject: Subject[int] = Subject()
    inbox = Inbox(subject, blocking=True)
    assert inbox.wait_blocking(0.01) is False

    def produce() -> None:
        for i in range(100):
            subject.on_next(i)
            if i % 10 == 0:
                time.sleep(0.001)
        subject.on_completed()

    producer = threading.Thread(target=produce)
    producer.start()
    got: list[Any] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        signal = inbox.ready()
        if signal is None:
            inbox.wait_blocking(0.1)
            continue
        if signal[0] != NEXT:
            break
        got.append(signal[1])
    producer.join()
    assert got == list(range(100))
    assert inbox.ended and inbox.error is None
    with pytest.raises(RuntimeError, match="wait_blocking"):
        asyncio.run(inbox.wait())


def test_aiter_subscribes_at_the_first_step_and_disposes_on_break() -> None:
    subscribed: list[int] = []
    disposed: list[int] = []

    def source(observer: Any, scheduler: Any = None) -> Any:
        subscribed.append(1)
        for i in range(10):
            observer.on_next(i)
        return reactivex.disposable.Disposable(lambda: disposed.append(1))

    async def main() -> None:
        it = aiter_observable(reactivex.create(source))
        assert subscribed == []  # nothing runs before iteration
        async for item in it:
            if item == 2:
                break
        await it.aclose()  # type: ignore[attr-defined]
        assert subscribed == [1] and disposed == [1]

    asyncio.run(main())


def test_timed_waits_share_one_timer_and_still_time_out() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        subject: Subject[int] = Subject()
        inbox = Inbox(subject)
        for i in range(5):  # each wait is woken by an item before its timeout
            loop.call_later(0.005, subject.on_next, i)
            assert await inbox.next(2.0) == (NEXT, i)
        timer = inbox.timer
        assert timer is not None  # armed once, for the first wait's deadline
        started = loop.time()
        assert await inbox.next(0.05) is None  # nothing comes: the last wait times out
        waited = loop.time() - started
        assert 0.045 <= waited < 1.0, waited  # not the first wait's 2 s
        subject.on_completed()
        assert inbox.timer is None  # the end stops it
        assert await inbox.next(0.05) == (DONE, None)

    asyncio.run(main())


def test_a_blocking_inbox_sees_the_end_after_items_left_unread() -> None:
    # call_sync leaves the reply in ``items`` and waits for the end: a completion that
    # arrives after a wait took the item must still be read (it once spun forever).
    subject: Subject[int] = Subject()
    inbox = Inbox(subject, blocking=True)
    subject.on_next(1)
    assert inbox.wait_blocking(0.01) is True
    assert list(inbox.items) == [1] and not inbox.ended
    subject.on_completed()
    assert inbox.wait_blocking(0.01) is True
    assert inbox.ended and list(inbox.items) == [1]


def test_call_sync_returns_when_the_end_comes_after_the_reply() -> None:
    from rx_agent import ReActAgent, ScriptedModel

    agent = ReActAgent(name="a", model=ScriptedModel(["hi"]))
    # The end of the call after its result, with a pause between, as a busy machine
    # schedules it: call_sync must return, not wait for a signal it already has.
    from rx_agent.agent import _calling

    original = _calling.Inbox

    class SlowEnd(original):  # type: ignore[misc,valid-type]
        def on_completed(self) -> None:
            time.sleep(0.05)
            super().on_completed()

    _calling.Inbox = SlowEnd  # type: ignore[misc]
    try:
        done: list[Any] = []
        thread = threading.Thread(target=lambda: done.append(agent.call_sync("x")),
                                  daemon=True)
        thread.start()
        thread.join(5)
        assert done and done[0].text == "hi"
    finally:
        _calling.Inbox = original  # type: ignore[misc]
