"""The run journal on every built-in backend (memory, SQLite, real Redis, real
PostgreSQL): the journal contract (``rx_agent.testing.store_contract``: consecutive
seqs per session, reads from a point, locating an SSE id, bounded retention with a
clear error past it, live following across store objects, ``subscribe_durable_events``
live and from a point), and what the built-in journals add: the batching writer, the
idle sweep, PostgreSQL's notifications, Redis past its client's socket timeout."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rx_agent.event import AgentEvent, TextBlockDeltaEvent
from rx_agent.session import (
    InMemorySessionStore,
    JournalExpiredError,
    RunJournal,
    SessionKey,
    SqliteSessionStore,
    subscribe_durable_events,
)
from rx_agent.testing.store_contract import JournalContract, SharedJournalContract

KINDS = ("memory", "sqlite", "redis", "postgres")
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


def _delta(i: int) -> TextBlockDeltaEvent:
    return TextBlockDeltaEvent(reply_id="r", block_id="text", delta=f"w{i} ")


def _items(events: list[AgentEvent], start: int = 0) -> list[tuple[int, str, str]]:
    return [(start + i, e.type, e.model_dump_json()) for i, e in enumerate(events)]


async def _aclose(store: Any) -> None:
    if hasattr(store, "aclose"):
        await store.aclose()


class TestMemoryJournal(JournalContract):
    @pytest.fixture
    def opener(self) -> Callable[[], Any]:
        return InMemorySessionStore


# The shared journals store an append as one batch and drop only whole batches: the
# one that straddles the line stays (in the contract's test, up to 99 more).

class TestSqliteJournal(SharedJournalContract):
    trim_slack = 99

    @pytest.fixture
    def opener(self, tmp_path: Path) -> Callable[[], Any]:
        return functools.partial(SqliteSessionStore, tmp_path / "journal.db")


class TestRedisJournal(SharedJournalContract):
    trim_slack = 99

    @pytest.fixture
    def opener(self, redis_url: str) -> Callable[[], Any]:
        from rx_agent.session import RedisSessionStore

        return functools.partial(RedisSessionStore, redis_url,
                                 prefix=f"j{uuid.uuid4().hex[:10]}")


class TestPostgresJournal(SharedJournalContract):
    trim_slack = 99

    @pytest.fixture
    def opener(self, postgres_url: str) -> Callable[[], Any]:
        from rx_agent.session import PostgresSessionStore

        return functools.partial(PostgresSessionStore, postgres_url,
                                 prefix=f"j{uuid.uuid4().hex[:10]}")


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
