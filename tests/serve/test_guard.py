"""SessionGuard across workers: what one worker's look at a session does to another's call."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rx_agent.serve._errors import HTTPError
from rx_agent.serve._guard import SessionGuard
from rx_agent.session import SessionKey, SqliteSessionStore


def test_a_get_probing_the_lease_on_one_worker_does_not_refuse_a_call_on_another(
    tmp_path: Path,
) -> None:
    # Two workers, one store file. Worker B's GET asks holder(), which takes the serving
    # lease for a moment; a call entering on worker A right then must wait it out, not
    # answer 409 (it did, and the two-worker busy-session test failed now and then).
    path = tmp_path / "s.db"
    a = SessionGuard(SqliteSessionStore(path), 30.0, queue=False)
    store_b = SqliteSessionStore(path)
    key = SessionKey("u", "s1")

    async def main() -> None:
        probe = await store_b.aacquire_lease(SessionKey("u", "s1/serve"), "probe:b", ttl=5.0,
                                             wait=0)
        asyncio.get_running_loop().call_later(
            0.2, lambda: asyncio.ensure_future(store_b.arelease_lease(probe)))
        hold = await a.enter(key, "r1", lambda: None, watch=False)
        assert hold.lease is not None
        await a.leave(hold)

    asyncio.run(main())


def test_a_call_holding_the_lease_on_another_worker_is_still_409(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    a = SessionGuard(SqliteSessionStore(path), 30.0, queue=False)
    b = SessionGuard(SqliteSessionStore(path), 30.0, queue=False)
    key = SessionKey("u", "s1")

    async def main() -> None:
        hold = await b.enter(key, "r1", lambda: None, watch=False)
        with pytest.raises(HTTPError) as info:
            await a.enter(key, "r2", lambda: None, watch=False)
        assert info.value.status == 409 and info.value.code == "session_busy"
        assert await a.holder(key) is not None
        await b.leave(hold)
        assert await a.holder(key) is None

    asyncio.run(main())
