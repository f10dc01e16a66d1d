"""The in-memory journal's writer appends each event in ``add`` itself (no batch task):
a failed append keeps its entries, in order, for the next one; three in a row stop
the run's journaling; a subclass that appends its own way gets the batching writer;
the sweep of idle sessions looks at the least recently appended ones only."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from rx_agent.session import SessionKey
from rx_agent.session._journal_memory import MemoryRunJournal
from rx_agent.session._journal_writer import RUN_END, Item, end_item

KEY = SessionKey("u1", "s1")


class Flaky(MemoryRunJournal):
    """Fails the appends whose number (from 1) is in ``failing``."""

    def __init__(self, failing: set[int]) -> None:
        super().__init__()
        self.failing = failing
        self.calls = 0

    def _append_now(self, key: SessionKey, run_id: str, items: list[Item]) -> int:
        self.calls += 1
        if self.calls in self.failing:
            raise OSError("full")
        return super()._append_now(key, run_id, items)


async def test_a_failed_append_is_retried_with_the_next_event_in_order() -> None:
    journal = Flaky({2})
    run = journal.writer(KEY, "run")
    for i in range(4):
        run.add(i, "text_block_delta", f'{{"n": {i}}}')
    assert run._task is None  # appended in add(), no task
    await run.close("completed")
    entries = await journal.read(KEY)
    assert [e.index for e in entries] == [0, 1, 2, 3, 4]
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    assert entries[-1].is_end and not run.broken


async def test_three_failures_in_a_row_stop_the_runs_journal(
        caplog: pytest.LogCaptureFixture) -> None:
    journal = Flaky({2, 3, 4})
    run = journal.writer(KEY, "run")
    with caplog.at_level(logging.WARNING, "rx_agent.session"):
        for i in range(5):
            run.add(i, "text_block_delta", "{}")
        await run.close("completed")
    assert run.broken
    assert [e.index for e in await journal.read(KEY)] == [0]
    assert "failed three times in a row" in caplog.text


async def test_a_subclass_with_its_own_append_gets_batches() -> None:
    class Counting(MemoryRunJournal):
        def __init__(self) -> None:
            super().__init__()
            self.appends: list[int] = []

        async def _append(self, key: SessionKey, run_id: str, items: list[Item]) -> int:
            self.appends.append(len(items))
            return await super()._append(key, run_id, items)

    journal = Counting()
    assert journal.immediate() is None
    run = journal.writer(KEY, "run", window=0.05)
    for i in range(20):
        run.add(i, "text_block_delta", "{}")
    await asyncio.sleep(0)
    await run.close("completed")
    assert sum(journal.appends) == 21 and len(journal.appends) < 21


async def test_the_sweep_drops_the_stale_sessions_and_keeps_the_ones_appended_to(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import rx_agent.session._journal_memory as memory

    monkeypatch.setattr(memory, "SWEEP", 1)
    journal = MemoryRunJournal(max_age=0.3)
    a, b, c = (SessionKey("u", name) for name in "abc")
    for key in (a, b, c):
        await journal.append(key, "run", [(0, "text_block_delta", "{}")])
    await asyncio.sleep(0.4)
    await journal.append(b, "run", [(1, "text_block_delta", "{}")])  # b: fresh again
    await journal.append(KEY, "run", [(0, "text_block_delta", "{}")])  # sweeps
    assert await journal.read(a) == [] and await journal.read(c) == []
    assert [e.index for e in await journal.read(b)] == [1]
    assert list(journal._logs) == [b, KEY]


def test_a_runs_end_names_its_failure_and_takes_a_given_time() -> None:
    index, type_, data, at = end_item(3, "completed")
    assert (index, type_, json.loads(data)) == (3, RUN_END, {"status": "completed",
                                                            "error": None})
    assert at > 0
    # The workflow's end: its failure's type, and the workflow's own clock.
    _, _, data, at = end_item(5, "failed", "Boom: no", kind="Boom", at=12.5)
    assert json.loads(data) == {"status": "failed", "error": "Boom: no", "kind": "Boom"}
    assert at == 12.5
