"""``rx_agent.testing.store_contract`` on every store: the built-in ones, the example
JSON-file backend (``examples/json_file_store.py``) and a backend with async
primitives only."""

from __future__ import annotations

import functools
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rx_agent.session import InMemorySessionStore, SqliteSessionStore
from rx_agent.testing.store_contract import DurableStoreContract, StoreContract

from ._async_backend import AsyncOnlyStore, Storage

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))  # spawned workers inherit sys.path: they import it too

from json_file_store import JsonFileSessionStore  # noqa: E402


class TestInMemoryStore(StoreContract):
    @pytest.fixture
    def opener(self) -> Callable[[], Any]:
        return InMemorySessionStore


class TestSqliteStore(DurableStoreContract):
    @pytest.fixture
    def opener(self, tmp_path: Path) -> Callable[[], Any]:
        return functools.partial(SqliteSessionStore, tmp_path / "sessions.db")


class TestRedisStore(DurableStoreContract):
    @pytest.fixture
    def opener(self, redis_url: str) -> Callable[[], Any]:
        from rx_agent.session import RedisSessionStore

        return functools.partial(RedisSessionStore, redis_url, prefix=f"t{uuid.uuid4().hex[:10]}")


class TestJsonFileStore(DurableStoreContract):
    @pytest.fixture
    def opener(self, tmp_path: Path) -> Callable[[], Any]:
        return functools.partial(JsonFileSessionStore, tmp_path / "sessions")


class TestAsyncOnlyStore(StoreContract):
    @pytest.fixture
    def opener(self) -> Callable[[], Any]:
        return functools.partial(AsyncOnlyStore, Storage())

    def test_the_blocking_api_runs_on_the_portal_thread(self, store: Any) -> None:
        store.load(("u", "s"))
        assert threading.current_thread() not in store.storage.threads  # never this one


def test_the_contract_without_pytest_says_what_to_install() -> None:
    import subprocess

    code = ("import sys; sys.modules['pytest'] = None\n"
            "try:\n    import rx_agent.testing.store_contract\n"
            "except ImportError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.stdout.strip() == ("rx_agent.testing.store_contract is a pytest suite: "
                                   "pip install pytest"), done.stderr
