"""The store contract fails a broken backend, naming what is broken: it is run (in a
pytest subprocess) on the example JSON-file backend with some primitives broken, and
the journal contract on an in-memory store whose journal is broken."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

BROKEN = textwrap.dedent('''
    import functools
    import sys

    import pytest

    sys.path.insert(0, {examples!r})
    from json_file_store import JsonFileSessionStore

    from rx_agent.testing.store_contract import StoreContract


    class Broken(JsonFileSessionStore):
        def _write(self, key, state, expected, marked):
            return super()._write(key, state, None, marked)  # no compare-and-set

        def _release_lease(self, lease):
            (self._path("leases", lease.key)).unlink(missing_ok=True)  # any token frees it
            return True

        def _list_keys(self, user_id):
            return list(reversed(super()._list_keys(None)))  # every user's, unsorted


    class TestBroken(StoreContract):
        @pytest.fixture
        def opener(self, tmp_path):
            return functools.partial(Broken, tmp_path / "s")
''')

EXPECTED_FAILURES = {
    "test_a_stale_version_raises_and_writes_nothing",
    "test_delete",
    "test_fail_raises_and_writes_nothing",
    "test_the_async_policy_helper",
    "test_the_coroutines_match_the_sync_api",
    "test_release_by_a_non_owner_has_no_effect",
    "test_an_expired_lease_goes_to_the_next_owner",
    "test_list_sessions_per_user",
    "test_append_merge_appends_after_the_newer_state",
    "test_append_merge_does_not_revive_a_deleted_session",
}
# The broken release also drops the waiting queue: arrival order holds only by luck.
MAY_FAIL = {"test_waiters_are_served_in_arrival_order",
            "test_sync_and_async_callers_share_one_queue"}


@pytest.mark.timeout(300)
def _run(tmp_path: Path, name: str, source: str, timeout: float) -> tuple[set[str], str]:
    """Run a test module in a pytest subprocess: the names of its failed tests, and
    what it printed."""
    module = tmp_path / name
    module.write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(module), "-q", "-rf", "-p", "no:cacheprovider",
         "-p", "no:randomly", "--rootdir", str(tmp_path)],
        capture_output=True, text=True, timeout=timeout, cwd=tmp_path, check=False)
    failed = {line.split("::")[-1].split(" ")[0] for line in done.stdout.splitlines()
              if line.startswith("FAILED")}
    return failed, done.stdout


def test_the_contract_catches_a_broken_backend(tmp_path: Path) -> None:
    failed, out = _run(tmp_path, "test_broken_store.py",
                       BROKEN.format(examples=str(EXAMPLES)), 280)
    assert EXPECTED_FAILURES <= failed <= EXPECTED_FAILURES | MAY_FAIL, out[-3000:]
    assert "passed" in out.splitlines()[-1]  # the rest of the suite still passes


BROKEN_JOURNAL = textwrap.dedent('''
    import pytest

    from rx_agent.session import InMemorySessionStore
    from rx_agent.session._journal_memory import MemoryRunJournal
    from rx_agent.testing.store_contract import JournalContract


    class BrokenJournal(MemoryRunJournal):
        async def _locate(self, key, run_id, index):
            found = await super()._locate(key, run_id, index)
            return None if found is None else found + 1  # one entry late

        def retain(self, *, max_events=None, max_age=None):
            pass  # keeps everything, refuses nothing


    class BrokenStore(InMemorySessionStore):
        def _make_journal(self):
            return BrokenJournal()


    class TestBrokenJournal(JournalContract):
        @pytest.fixture
        def opener(self):
            return BrokenStore
''')

EXPECTED_JOURNAL_FAILURES = {
    "test_journal_locates_an_sse_id_by_run_and_index",
    "test_journal_refuses_bad_points_and_items",
    "test_journal_keeps_the_newest_by_count_and_says_so_for_a_trimmed_point",
    "test_journal_drops_entries_older_than_max_age",
    "test_subscribe_durable_events_live_and_from_a_point",
}


@pytest.mark.timeout(200)
def test_the_journal_contract_catches_a_broken_journal(tmp_path: Path) -> None:
    failed, out = _run(tmp_path, "test_broken_journal.py", BROKEN_JOURNAL, 180)
    assert failed == EXPECTED_JOURNAL_FAILURES, out[-3000:]
    assert "1 passed" in out.splitlines()[-1]  # consecutive numbers still hold
