"""The store contract, part four: a store's run journal (``store.journal()``), the
tests every built-in journal passes (see :mod:`.store_contract`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from ..event import AgentEvent, TextBlockDeltaEvent, parse_event
from ..session import (
    ANONYMOUS_USER,
    JournalEntry,
    JournalExpiredError,
    SessionKey,
    subscribe_durable_events,
)
from ..session._journal_writer import RUN_END
from ._contract_state import Opened, arun

__all__ = ["JournalContract", "SharedJournalContract"]

_KEY = SessionKey("u1", "s1")


def _delta(i: int) -> TextBlockDeltaEvent:
    return TextBlockDeltaEvent(reply_id="r", block_id="text", delta=f"w{i} ")


def _items(events: list[AgentEvent], start: int = 0) -> list[tuple[int, str, str]]:
    return [(start + i, e.type, e.model_dump_json()) for i, e in enumerate(events)]


class JournalContract(Opened):
    """What every run journal does: consecutive numbers per session, reads from a
    point, locating an SSE id, bounded retention with a clear error past it, and
    ``subscribe_durable_events`` live and from a point. Give it an ``opener`` fixture,
    as for :class:`~rx_agent.testing.store_contract.StoreContract` (one class may take
    both)."""

    trim_slack = 0
    """How many entries past ``max_events`` the journal may keep: a journal that drops
    only whole appended batches keeps the one that straddles the line (the built-in
    shared ones: up to a batch less one)."""

    def test_journal_numbers_a_sessions_entries_consecutively(self, store: Any) -> None:
        journal = store.journal()
        assert store.journal() is journal  # one journal per store object
        events: list[AgentEvent] = [_delta(i) for i in range(5)]

        async def body() -> None:
            assert await journal.append(_KEY, "run-a", _items(events[:2])) == 2
            assert await journal.append(_KEY, "run-b", _items(events[2:], 0)) == 5
            other = SessionKey("u1", "s2")  # every session counts on its own
            assert await journal.append(other, "run-c", _items(events[:1])) == 1
            entries = await journal.read(_KEY)
            assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
            assert [e.id for e in entries] == ["run-a.0", "run-a.1", "run-b.0", "run-b.1",
                                               "run-b.2"]
            # The events round-trip through JSON as the pydantic models they were.
            assert [e.event for e in entries] == events
            assert all(isinstance(e.event, TextBlockDeltaEvent) for e in entries)
            assert [e.seq for e in await journal.read(_KEY, after=3)] == [4, 5]
            assert [e.seq for e in await journal.read(_KEY, after=1, limit=2)] == [2, 3]
            assert await journal.read(_KEY, after=5) == []
            assert [e.seq for e in await journal.read(other)] == [1]

        arun(store, body)

    def test_journal_locates_an_sse_id_by_run_and_index(self, store: Any) -> None:
        journal = store.journal()

        async def body() -> None:
            await journal.append(_KEY, "run-a", _items([_delta(i) for i in range(3)]))
            await journal.append(_KEY, "run-b", _items([_delta(i) for i in range(2)]))
            await journal.append(_KEY, "run-a", _items([_delta(3)], 3))  # interleaved
            assert await journal.locate(_KEY, "run-a", 0) == 1
            assert await journal.locate(_KEY, "run-a", 2) == 3
            assert await journal.locate(_KEY, "run-b", 1) == 5
            assert await journal.locate(_KEY, "run-a", 3) == 6
            assert await journal.locate(_KEY, "run-a", 4) is None
            assert await journal.locate(_KEY, "nope", 0) is None
            assert await journal.locate(SessionKey("u1", "elsewhere"), "run-a", 0) is None

        arun(store, body)

    def test_journal_refuses_bad_points_and_items(self, store: Any) -> None:
        journal = store.journal()

        async def body() -> None:
            await journal.append(_KEY, "run", _items([_delta(0)]))
            with pytest.raises(ValueError, match="past the end"):
                await journal.read(_KEY, after=9)
            with pytest.raises(ValueError, match=">= 0"):
                await journal.read(_KEY, after=-1)
            with pytest.raises(TypeError, match="must be an int"):
                await journal.read(_KEY, after="1")
            with pytest.raises(TypeError, match="journal item"):
                await journal.append(_KEY, "run", [("0", "x")])
            with pytest.raises(ValueError, match="run_id"):
                await journal.append(_KEY, "", _items([_delta(0)]))

        arun(store, body)
        with pytest.raises(ValueError, match="max_events"):
            journal.retain(max_events=0)
        with pytest.raises(ValueError, match="max_age"):
            journal.retain(max_age=-1)

    def test_journal_keeps_the_newest_by_count_and_says_so_for_a_trimmed_point(
            self, store: Any) -> None:
        journal = store.journal(max_events=50)

        async def body() -> None:
            for start in range(0, 1000, 100):
                await journal.append(_KEY, "run", _items([_delta(i) for i in range(100)],
                                                         start))
            kept = await journal.read(_KEY, limit=5000)
            assert 50 <= len(kept) <= 50 + self.trim_slack, len(kept)
            assert [e.seq for e in kept] == list(range(1001 - len(kept), 1001))  # newest
            assert kept[-1].index == 999
            with pytest.raises(JournalExpiredError,
                               match="no longer holds the entries after #10"):
                await journal.read(_KEY, after=10)
            assert await journal.locate(_KEY, "run", 10) is None

        arun(store, body)

    def test_journal_drops_entries_older_than_max_age(self, store: Any) -> None:
        journal = store.journal(max_age=0.3)

        async def body() -> None:
            await journal.append(_KEY, "old", _items([_delta(i) for i in range(3)]))
            await asyncio.sleep(0.5)
            await journal.append(_KEY, "new", _items([_delta(0)]))
            assert [e.id for e in await journal.read(_KEY)] == ["new.0"]
            with pytest.raises(JournalExpiredError) as caught:
                await journal.read(_KEY, after=1)
            assert caught.value.oldest == 4 and caught.value.session_id == "s1"

        arun(store, body)

    def test_subscribe_durable_events_live_and_from_a_point(self, store: Any) -> None:
        journal = store.journal()

        async def body() -> None:
            await journal.append(_KEY, "run", _items([_delta(i) for i in range(3)]))
            # From a point, not live: what is there after it, then completion.
            past: list[JournalEntry] = []
            done = asyncio.Event()
            subscribe_durable_events(store, _KEY, after=1, live=False).subscribe(
                past.append, lambda e: done.set(), done.set)
            await asyncio.wait_for(done.wait(), 10)
            assert [e.seq for e in past] == [2, 3]
            # Live, by session id (the anonymous user's): entries arrive as appended.
            anon = SessionKey(ANONYMOUS_USER, "live-s")
            live: list[JournalEntry] = []
            subscription = subscribe_durable_events(store, "live-s").subscribe(live.append)
            await asyncio.sleep(0.1)
            sent: list[AgentEvent] = [_delta(7), _delta(8)]
            await journal.append(anon, "r2", _items(sent))
            deadline = time.monotonic() + 10
            while len(live) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            subscription.dispose()
            assert [parse_event(e.data) for e in live] == sent
            assert [e.event for e in live] == sent
            # A trimmed point is an error, never a silent restart.
            journal.retain(max_events=1)
            await journal.append(_KEY, "run", _items([_delta(i) for i in range(300)], 3))
            failed: list[BaseException] = []
            gone = asyncio.Event()

            def on_error(error: BaseException) -> None:
                failed.append(error)
                gone.set()

            subscribe_durable_events(store, _KEY, after=1).subscribe(on_error=on_error)
            await asyncio.wait_for(gone.wait(), 10)
            assert isinstance(failed[0], JournalExpiredError)

        arun(store, body)


class SharedJournalContract(JournalContract):
    """A journal that other store objects (and processes) on the same storage share:
    :class:`JournalContract`, plus a reader on another store object that follows a
    writer's appends live. Needs ``opener`` to open the *same* storage each call."""

    def test_journal_reader_follows_another_store_objects_appends_live(
            self, store: Any, opener: Callable[[], Any]) -> None:
        reader_store = opener()
        writer, reader = store.journal(), reader_store.journal()

        async def body() -> None:
            await writer.append(_KEY, "run", _items([_delta(0)]))
            seen: list[JournalEntry] = []

            async def follow() -> None:
                async for entry in reader.follow(_KEY, after=0, run_id="run"):
                    seen.append(entry)

            task = asyncio.create_task(follow())
            await asyncio.sleep(0.2)
            assert [e.index for e in seen] == [0]
            run = writer.writer(_KEY, "run")
            run.count = 1
            started = time.monotonic()
            for i in range(1, 40):
                run.add(i, "text_block_delta", _delta(i).model_dump_json())
                await asyncio.sleep(0.005)
            await run.close("completed")
            await asyncio.wait_for(task, 10)  # it ends at the run's end
            assert [e.index for e in seen] == list(range(41))
            assert [e.seq for e in seen] == list(range(1, 42))
            assert seen[-1].is_end and seen[-1].status == "completed"
            assert seen[-1].type == RUN_END
            assert [getattr(e.event, "delta", None) for e in seen[:-1]] == [
                f"w{i} " for i in range(40)]
            assert time.monotonic() - started < 5
            aclose = getattr(reader_store, "aclose", None)
            if aclose is not None:
                await aclose()

        try:
            arun(store, body)
        finally:
            close = getattr(reader_store, "close", None)
            if close is not None:
                close()
