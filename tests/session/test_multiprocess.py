"""Real processes against one SQLite file and one Redis: leases plus compare-and-set
lose nothing and duplicate nothing, and a stale writer is fenced off."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from rx_agent import AgentState, Msg
from rx_agent.session import SessionKey

from ._workers import lease_and_cas_worker, open_store, stale_writer

WORKERS, SESSIONS, SAVES = 4, 25, 4
SPAWN = multiprocessing.get_context("spawn")


def _target(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, str]:
    if kind == "sqlite":
        return str(tmp_path / "shared.db"), ""
    return request.getfixturevalue("redis_url"), f"mp{tmp_path.name[-12:]}"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_four_processes_lose_and_duplicate_nothing(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where, prefix = _target(kind, tmp_path, request)
    with SPAWN.Pool(WORKERS) as pool:
        # Workers 2 and 3 use the coroutine API, 0 and 1 the blocking one.
        done = pool.starmap(lease_and_cas_worker, [
            (kind, where, prefix, w, SESSIONS, SAVES, w >= 2) for w in range(WORKERS)])
    assert done == [SESSIONS * SAVES] * WORKERS
    store = open_store(kind, where, prefix)
    try:
        keys = store.list_sessions("load")
        assert keys == sorted(SessionKey("load", f"s{n}") for n in range(SESSIONS))
        for key in keys:
            state, version = store.load_versioned(key)
            assert state is not None
            assert version == WORKERS * SAVES
            got = [m.text for m in state.context]
            # Every save is there exactly once ...
            assert sorted(got) == sorted(f"w{w}:r{r}" for w in range(WORKERS)
                                         for r in range(SAVES)), key
            assert len({m.id for m in state.context}) == len(got)
            # ... and each worker's saves in the order it made them.
            for w in range(WORKERS):
                assert [t for t in got if t.startswith(f"w{w}:")] == [
                    f"w{w}:r{r}" for r in range(SAVES)]
    finally:
        store.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_writer_whose_lease_was_taken_is_fenced(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where, prefix = _target(kind, tmp_path, request)
    store = open_store(kind, where, prefix)
    key = SessionKey("u", "fenced")
    store.save(key, AgentState(session_id="fenced", user_id="u", context=[Msg("user", "hi")]))
    loaded, stolen = SPAWN.Event(), SPAWN.Event()
    results = SPAWN.Queue()
    proc = SPAWN.Process(target=stale_writer, args=(kind, where, prefix, (loaded, stolen),
                                                    results))
    proc.start()
    try:
        assert loaded.wait(60)
        # The stale writer's 0.3 s lease expires; this process takes over and saves.
        lease = store.acquire_lease(key, "new-owner", 30, 10)
        state, version = store.load_versioned(key)
        assert state is not None
        state.context.append(Msg("user", "from the new owner"))
        store.save_if_version(key, state, version)
        stolen.set()
        outcome: dict[str, Any] = results.get(timeout=60)
        assert outcome == {"conflict": (1, 2), "renewed": False, "released": False}
        # Nothing of the stale writer got in, and the new owner still holds the lease.
        assert [m.text for m in store.load(key).context] == ["hi", "from the new owner"]
        assert store.renew_lease(lease) is True
        assert store.release_lease(lease) is True
    finally:
        proc.join(30)
        store.close()
    assert proc.exitcode == 0
