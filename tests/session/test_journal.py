"""The run journal's contract, on every built-in backend (memory, SQLite, real Redis,
real PostgreSQL): consecutive seqs per session, reads from a point, locating an SSE id,
bounded retention with a clear error past it, live following across store objects,
the batching writer, and ``subscribe_durable_events`` live and from a point."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rx_agent.event import AgentEvent, TextBlockDeltaEvent, parse_event
from rx_agent.session import (
    ANONYMOUS_USER,
    InMemorySessionStore,
    JournalEntry,
    JournalExpiredError,
    RunJournal,
    SessionKey,
    SqliteSessionStore,
    subscribe_durable_events,
)
from rx_agent.session._journal_writer import RUN_END

KINDS = ("memory", "sqlite", "redis", "postgres")
SHARED = ("sqlite", "redis", "postgres")  # stores whose objects (processes) share a journal
KEY = SessionKey("u1", "s1")


def _open(kind: str, request: pytest.FixtureRequest, tmp_path: Path, tag: str) -> Any:
    if kind == "memory":
        return InMemorySessionStore()
    if kind == "sqlite":
        return SqliteSessionStore(tmp_path / "journal.db")
    if kind == "redis":
        from rx_agent.session import RedisSessionStore

        return RedisSessionStore(request.getfixturevalue("redis_url"), prefix=tag)
    from rx_agent.session import PostgresSessionStore

    return PostgresSessionStore(request.getfixturevalue("postgres_url"), prefix=tag)


class Stores:
    """Opens store objects of one kind on one backend (another object: another process)."""

    def __init__(self, kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.kind, self.request, self.tmp_path = kind, request, tmp_path
        self.tag = f"j{uuid.uuid4().hex[:10]}"
        self.opened: list[Any] = []

    def open(self) -> Any:
        store = _open(self.kind, self.request, self.tmp_path, self.tag)
        self.opened.append(store)
        return store


@pytest.fixture(params=KINDS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    made = Stores(request.param, request, tmp_path)
    yield made
    for store in made.opened:
        store.close()


@pytest.fixture(params=SHARED)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    made = Stores(request.param, request, tmp_path)
    yield made
    for store in made.opened:
        store.close()


def _delta(i: int) -> TextBlockDeltaEvent:
    return TextBlockDeltaEvent(reply_id="r", block_id="text", delta=f"w{i} ")


def _items(events: list[AgentEvent], start: int = 0) -> list[tuple[int, str, str]]:
    return [(start + i, e.type, e.model_dump_json()) for i, e in enumerate(events)]


async def _aclose(store: Any) -> None:
    if hasattr(store, "aclose"):
        await store.aclose()


async def test_appends_number_a_sessions_entries_consecutively(stores: Stores) -> None:
    store = stores.open()
    journal = store.journal()
    assert store.journal() is journal  # one journal per store object
    events: list[AgentEvent] = [_delta(i) for i in range(5)]
    assert await journal.append(KEY, "run-a", _items(events[:2])) == 2
    assert await journal.append(KEY, "run-b", _items(events[2:], 0)) == 5
    other = SessionKey("u1", "s2")  # every session counts on its own
    assert await journal.append(other, "run-c", _items(events[:1])) == 1

    entries = await journal.read(KEY)
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    assert [e.id for e in entries] == ["run-a.0", "run-a.1", "run-b.0", "run-b.1", "run-b.2"]
    # The events round-trip through JSON as the pydantic models they were.
    assert [e.event for e in entries] == events
    assert all(isinstance(e.event, TextBlockDeltaEvent) for e in entries)
    assert [e.seq for e in await journal.read(KEY, after=3)] == [4, 5]
    assert [e.seq for e in await journal.read(KEY, after=1, limit=2)] == [2, 3]
    assert await journal.read(KEY, after=5) == []
    assert [e.seq for e in await journal.read(other)] == [1]
    await _aclose(store)


async def test_an_sse_id_is_located_by_run_and_index(stores: Stores) -> None:
    store = stores.open()
    journal = store.journal()
    await journal.append(KEY, "run-a", _items([_delta(i) for i in range(3)]))
    await journal.append(KEY, "run-b", _items([_delta(i) for i in range(2)]))
    await journal.append(KEY, "run-a", _items([_delta(3)], 3))  # interleaved: still found
    assert await journal.locate(KEY, "run-a", 0) == 1
    assert await journal.locate(KEY, "run-a", 2) == 3
    assert await journal.locate(KEY, "run-b", 1) == 5
    assert await journal.locate(KEY, "run-a", 3) == 6
    assert await journal.locate(KEY, "run-a", 4) is None
    assert await journal.locate(KEY, "nope", 0) is None
    assert await journal.locate(SessionKey("u1", "elsewhere"), "run-a", 0) is None
    await _aclose(store)


async def test_bad_points_and_items_are_refused(stores: Stores) -> None:
    store = stores.open()
    journal = store.journal()
    await journal.append(KEY, "run", _items([_delta(0)]))
    with pytest.raises(ValueError, match="past the end"):
        await journal.read(KEY, after=9)
    with pytest.raises(ValueError, match=">= 0"):
        await journal.read(KEY, after=-1)
    with pytest.raises(TypeError, match="must be an int"):
        await journal.read(KEY, after="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="journal item"):
        await journal.append(KEY, "run", [("0", "x")])
    with pytest.raises(ValueError, match="run_id"):
        await journal.append(KEY, "", _items([_delta(0)]))
    with pytest.raises(ValueError, match="max_events"):
        journal.retain(max_events=0)
    with pytest.raises(ValueError, match="max_age"):
        journal.retain(max_age=-1)
    await _aclose(store)


async def test_retention_by_count_keeps_the_newest_and_says_so_for_a_trimmed_point(
    stores: Stores,
) -> None:
    store = stores.open()
    journal = store.journal(max_events=50)
    for start in range(0, 1000, 100):
        await journal.append(KEY, "run", _items([_delta(i) for i in range(100)], start))
    kept = await journal.read(KEY, limit=5000)
    # The shared journals store an append as one batch and drop only whole batches:
    # the one that straddles the line stays (here up to 99 more).
    slack = 0 if stores.kind == "memory" else 99
    assert 50 <= len(kept) <= 50 + slack
    assert [e.seq for e in kept] == list(range(1001 - len(kept), 1001))  # the newest
    assert kept[-1].index == 999
    with pytest.raises(JournalExpiredError, match="no longer holds the entries after #10"):
        await journal.read(KEY, after=10)
    assert await journal.locate(KEY, "run", 10) is None
    await _aclose(store)


async def test_retention_by_age_drops_old_entries(stores: Stores) -> None:
    store = stores.open()
    journal = store.journal(max_age=0.3)
    await journal.append(KEY, "old", _items([_delta(i) for i in range(3)]))
    await asyncio.sleep(0.5)
    await journal.append(KEY, "new", _items([_delta(0)]))
    assert [e.id for e in await journal.read(KEY)] == ["new.0"]
    with pytest.raises(JournalExpiredError) as caught:
        await journal.read(KEY, after=1)
    assert caught.value.oldest == 4 and caught.value.session_id == "s1"
    await _aclose(store)


async def test_a_reader_follows_another_store_objects_appends_live(shared: Stores) -> None:
    writer_store, reader_store = shared.open(), shared.open()
    writer, reader = writer_store.journal(), reader_store.journal()
    await writer.append(KEY, "run", _items([_delta(0)]))
    seen: list[JournalEntry] = []

    async def follow() -> None:
        async for entry in reader.follow(KEY, after=0, run_id="run"):
            seen.append(entry)

    task = asyncio.create_task(follow())
    await asyncio.sleep(0.2)
    assert [e.index for e in seen] == [0]
    run = writer.writer(KEY, "run")
    run.count = 1
    started = time.monotonic()
    for i in range(1, 40):
        run.add(i, "text_block_delta", _delta(i).model_dump_json())
        await asyncio.sleep(0.005)
    await run.close("completed")
    await asyncio.wait_for(task, 10)  # it ends at the run's end
    assert [e.index for e in seen] == list(range(41))
    assert [e.seq for e in seen] == list(range(1, 42))
    assert seen[-1].is_end and seen[-1].status == "completed" and seen[-1].type == RUN_END
    assert [e.event.delta for e in seen[:-1]] == [f"w{i} " for i in range(40)]  # type: ignore[attr-defined]
    assert time.monotonic() - started < 5
    await _aclose(writer_store)
    await _aclose(reader_store)


async def test_the_writer_batches_and_keeps_order(stores: Stores) -> None:
    store = stores.open()
    journal: RunJournal = store.journal()
    appends: list[int] = []
    real = journal._put

    async def counting(session: SessionKey, run_id: str, items: Any) -> int:
        appends.append(len(items))
        return await real(session, run_id, items)

    journal._put = counting  # type: ignore[method-assign]
    run = journal.writer(KEY, "run", window=0.05, batch=100)
    for i in range(1000):
        run.add(i, "text_block_delta", _delta(i).model_dump_json())
        if i == 0 and stores.kind == "memory":  # appended in add() itself, before any task
            assert [e.index for e in await journal.read(KEY)] == [0]
        if i % 50 == 0:
            await asyncio.sleep(0)
    await run.close("failed", "RuntimeError")
    entries = await journal.read(KEY, limit=5000)
    assert [e.index for e in entries] == list(range(1001))
    assert entries[-1].status == "failed"
    if stores.kind != "memory":  # (memory appends at once, not through _put)
        assert sum(appends) == 1001
        assert len(appends) <= 25, appends  # batches, not an append per event
    await _aclose(store)


async def test_subscribe_durable_events_live_and_from_a_point(stores: Stores) -> None:
    store = stores.open()
    journal = store.journal()
    await journal.append(KEY, "run", _items([_delta(i) for i in range(3)]))
    # From a point, not live: what is there after it, then completion.
    past: list[JournalEntry] = []
    done = asyncio.Event()
    subscribe_durable_events(store, KEY, after=1, live=False).subscribe(
        past.append, lambda e: done.set(), done.set)
    await asyncio.wait_for(done.wait(), 10)
    assert [e.seq for e in past] == [2, 3]
    # Live, by session id (the anonymous user's): new entries arrive as appended.
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
    await journal.append(KEY, "run", _items([_delta(i) for i in range(300)], 3))
    failed: list[Exception] = []
    gone = asyncio.Event()
    subscribe_durable_events(store, KEY, after=1).subscribe(
        on_error=lambda e: (failed.append(e), gone.set()))
    await asyncio.wait_for(gone.wait(), 10)
    assert isinstance(failed[0], JournalExpiredError)
    await _aclose(store)


def test_a_store_without_a_journal_is_named() -> None:
    with pytest.raises(TypeError, match="has no run journal"):
        subscribe_durable_events(object(), "s")


async def test_a_session_nobody_appends_to_any_more_is_emptied_after_max_age(
    stores: Stores, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import rx_agent.session._journal_memory as memory
    import rx_agent.session._journal_postgres as postgres
    import rx_agent.session._journal_sqlite as sqlite

    # Sweep at every append (by default: every 1,000th, or 1% of them; Redis expires the
    # stream itself).
    monkeypatch.setattr(memory, "SWEEP", 1)
    monkeypatch.setattr(sqlite, "SWEEP", 1.0)
    monkeypatch.setattr(postgres, "SWEEP", 1.0)
    store = stores.open()
    journal = store.journal(max_age=0.3)
    idle = SessionKey("u1", "idle")
    await journal.append(idle, "old", _items([_delta(0)]))
    await asyncio.sleep(0.5)
    await journal.append(KEY, "other", _items([_delta(0)]))
    assert await journal.read(idle) == []
    assert await journal.locate(idle, "old", 0) is None
    await _aclose(store)


async def test_postgres_followers_in_another_process_wake_by_notify(postgres_url: str) -> None:
    from rx_agent.session import PostgresSessionStore

    prefix = f"n{uuid.uuid4().hex[:10]}"
    writer_store = PostgresSessionStore(postgres_url, prefix=prefix)
    reader_store = PostgresSessionStore(postgres_url, prefix=prefix)
    writer, reader = writer_store.journal(), reader_store.journal()
    await writer.append(KEY, "run", _items([_delta(0)]))
    woke: list[float] = []

    async def follow() -> None:
        async for _ in reader.follow(KEY, after=1):
            woke.append(time.monotonic())
            return

    task = asyncio.create_task(follow())
    deadline = time.monotonic() + 10
    while not reader._listening.is_set():  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the LISTEN connection never came up"
        await asyncio.sleep(0.02)
    assert reader.poll == 2.0  # polling is only the fallback now
    await asyncio.sleep(0.3)  # the follower waits in its 2 s poll
    sent = time.monotonic()
    await writer.append(KEY, "run", _items([_delta(1)], 1))
    await asyncio.wait_for(task, 5)
    assert woke[0] - sent < 1.0  # the NOTIFY woke it, not the 2 s poll
    reader_store.close()  # stops the LISTEN thread
    writer_store.close()


def test_the_expired_error_is_a_session_error_that_pickles() -> None:
    import pickle

    from rx_agent.errors import JournalExpiredError as Exported
    from rx_agent.errors import SessionError

    error = JournalExpiredError("s1", 10, 60, user_id="u1")
    assert Exported is JournalExpiredError
    assert isinstance(error, SessionError) and isinstance(error, LookupError)
    again = pickle.loads(pickle.dumps(error))
    assert (again.session_id, again.after, again.oldest, again.user_id) == ("s1", 10, 60, "u1")
    assert str(again) == str(error) and "#60" in str(error)


async def test_a_redis_follower_idles_past_the_clients_socket_timeout(redis_url: str) -> None:
    # redis-py 8 gives a client a 5 s socket timeout by default: a blocking read must
    # come back before it, or an idle follower fails with a read timeout.
    from rx_agent.session import RedisSessionStore

    store = RedisSessionStore(redis_url, prefix=f"idle{time.time_ns()}")
    key = SessionKey("u", "s")
    journal = store.journal()
    started = time.monotonic()
    async for entry in journal.follow_idle(key, 0, idle=6.0):
        assert entry is None  # an idle turn, never a read timeout
        if time.monotonic() - started > 6.0:
            break
    store.close()
