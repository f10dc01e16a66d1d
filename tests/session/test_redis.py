"""Redis specifics: the key prefix, one asyncio client per loop, the optional extra."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

from rx_agent.session import RedisSessionStore, SessionBusyError, SessionKey

from .conftest import KEY, round_msgs, service_missing, state_with, texts


def test_every_key_written_starts_with_the_prefix(redis_store: Any) -> None:
    other = RedisSessionStore(redis_store.url, prefix=redis_store.prefix + "x")
    client, _ = redis_store._client()
    before = {k.decode() for k in client.keys("*")}
    try:
        key = SessionKey("a:b%c", "s:1")
        state = state_with(2, key)
        redis_store.save_if_version(key, state, 0)
        other.save(key, state_with(1, key))
        lease = redis_store.acquire_lease(key, "holder", 5, 0)

        def wait_in_queue() -> None:
            with pytest.raises(SessionBusyError):
                redis_store.acquire_lease(key, "waiter", 5, 0.3)

        waiting = threading.Thread(target=wait_in_queue)
        waiting.start()
        seen: set[str] = set()
        while waiting.is_alive():  # sample while the waiter is queued
            seen |= {k.decode() for k in client.keys("*")}
            time.sleep(0.01)
        redis_store.release_lease(lease)
        seen |= {k.decode() for k in client.keys("*")}
        new = seen - before
        mine = {k for k in new if k.startswith(redis_store.prefix + ":")}
        theirs = {k for k in new if k.startswith(redis_store.prefix + "x:")}
        assert mine | theirs == new  # nothing written outside the two prefixes
        p = redis_store.prefix
        assert {f"{p}:session:a%3Ab%25c:s%3A1", f"{p}:session:a%3Ab%25c:s%3A1:msgs",
                f"{p}:users", f"{p}:user:a%3Ab%25c", f"{p}:lease:a%3Ab%25c:s%3A1",
                f"{p}:lease:a%3Ab%25c:s%3A1:queue",
                f"{p}:lease:a%3Ab%25c:s%3A1:waiters"} <= mine
        # Two prefixes are two stores: neither sees the other's sessions.
        assert len(redis_store.load(key).context) == 8
        assert len(other.load(key).context) == 4
        assert redis_store.delete(key)
        assert {k.decode() for k in client.keys(f"{p}:session:*")} == set()
    finally:
        other.close()


def test_the_store_works_from_several_event_loops(redis_store: Any) -> None:
    redis_store.save(KEY, state_with(1))

    async def append(i: int) -> int:
        state, version = await redis_store.aload_versioned(KEY)
        state.context.extend(round_msgs(i))
        new = await redis_store.asave_if_version(KEY, state, version)
        await redis_store.aclose()
        return int(new)

    # One loop after another: a client bound to a closed loop must not be reused.
    assert asyncio.run(append(1)) == 2
    assert asyncio.run(append(2)) == 3

    # And loops in two threads at once, each with its own client.
    results: list[Any] = []

    def in_thread() -> None:
        async def main() -> None:
            await redis_store.alist_sessions()
            results.append(len((await redis_store.aload(KEY)).context))
            await redis_store.aclose()

        asyncio.run(main())

    threads = [threading.Thread(target=in_thread) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == [12, 12]
    assert texts(redis_store.load(KEY))[-1] == "answer 2"


def test_a_bad_url_or_prefix_is_refused() -> None:
    try:
        import redis  # noqa: F401
    except ImportError:
        service_missing("redis-py is missing: pip install -e '.[test]'")
    with pytest.raises(ValueError, match="bad Redis URL 'http://u:\\*\\*\\*@h'"):
        RedisSessionStore("http://u:secret@h")
    with pytest.raises(ValueError, match="prefix"):
        RedisSessionStore(prefix="")
    with pytest.raises(ValueError, match="prefix"):
        RedisSessionStore(prefix="a b")
    assert "secret" not in repr(RedisSessionStore("redis://:secret@localhost:1/0"))


def test_the_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis now fails
    with pytest.raises(ImportError, match=r"pip install -e '\.\[redis\]'"):
        RedisSessionStore()


def test_import_rx_agent_never_needs_redis() -> None:
    code = textwrap.dedent("""
        import sys
        sys.modules["redis"] = None  # as if the redis extra were not installed
        import rx_agent
        from rx_agent.session import RedisSessionStore, session_store_from_url
        session_store_from_url("memory://")
        try:
            RedisSessionStore()
        except ImportError as exc:
            print(exc)
    """)
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "pip install -e '.[redis]'" in done.stdout


def test_a_server_that_is_down_raises_a_connection_error(redis_url: str) -> None:
    import redis

    store = RedisSessionStore("redis://127.0.0.1:1/0",
                              client_options={"socket_connect_timeout": 0.5})
    with pytest.raises(redis.ConnectionError):
        store.load(KEY)
    store.close()


def test_durable_stores_load_on_first_use() -> None:
    code = textwrap.dedent("""
        import sys
        import rx_agent
        import rx_agent.session as s
        loaded = [m for m in sys.modules if m.startswith("rx_agent.session._")]
        assert "rx_agent.session._sqlite" not in loaded, loaded
        assert "rx_agent.session._redis" not in loaded, loaded
        assert s.SqliteSessionStore.__module__ == "rx_agent.session"
        assert "rx_agent.session._sqlite" in sys.modules
        assert "SqliteSessionStore" in dir(s)
    """)
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
