"""The PostgreSQL store on a real server (``tests/_services.py`` starts one): the store
contract, its URL, its layout, and the errors for a missing extra or server."""

from __future__ import annotations

import functools
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rx_agent import ReActAgent, RuntimeContext, ScriptedModel
from rx_agent.session import SessionKey, session_store_from_url
from rx_agent.testing.store_contract import DurableStoreContract, state_with

pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[test]'")


def _prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


class TestPostgresStore(DurableStoreContract):
    @pytest.fixture
    def opener(self, postgres_url: str) -> Callable[[], Any]:
        from rx_agent.session import PostgresSessionStore

        return functools.partial(PostgresSessionStore, postgres_url, prefix=_prefix())


@pytest.fixture
def store(postgres_url: str) -> Iterator[Any]:
    from rx_agent.session import PostgresSessionStore

    made = PostgresSessionStore(postgres_url, prefix=_prefix())
    yield made
    made.close()


def test_a_save_writes_only_the_new_messages(store: Any) -> None:
    key = SessionKey("u", "s")
    state = state_with(4)
    store.save(key, state)
    table = f"{store.prefix}_message"
    with store._txn() as conn:
        before = conn.execute(f"SELECT seq, xmin::text FROM {table} ORDER BY seq").fetchall()
    grown = state.model_copy(update={"context": [*state.context, *state_with(2).context]})
    store.save(key, grown)
    with store._txn() as conn:
        after = conn.execute(f"SELECT seq, xmin::text FROM {table} ORDER BY seq").fetchall()
    assert after[:len(before)] == before  # the old rows untouched (same xmin)
    assert len(after) == len(grown.context)
    assert store.load(key) == grown


def test_the_url_opens_the_store_with_its_prefix(postgres_url: str) -> None:
    prefix = _prefix()
    for scheme in ("postgresql", "postgres"):
        url = postgres_url.replace("postgresql", scheme, 1) + f"?prefix={prefix}"
        made = session_store_from_url(url)
        try:
            assert type(made).__name__ == "PostgresSessionStore"
            assert made.prefix == prefix
        finally:
            made.close()


def test_an_agent_keeps_its_session_across_store_objects(postgres_url: str) -> None:
    prefix = _prefix()
    url = f"{postgres_url}?prefix={prefix}"
    model = ScriptedModel(["Hello, Ada.", "You are Ada."])
    ctx = RuntimeContext(session_id="s1", user_id="ada")
    first, second = session_store_from_url(url), session_store_from_url(url)
    try:
        ReActAgent(name="a", model=model, session_store=first).call_sync("I am Ada.", ctx)
        again = ReActAgent(name="a", model=model, session_store=second)
        again.call_sync("Who am I?", ctx)
        texts = [m.text for m in second.load(SessionKey("ada", "s1")).context]
        assert texts[:2] == ["I am Ada.", "Hello, Ada."] and texts[-1] == "You are Ada."
    finally:
        first.close()
        second.close()


def test_an_unreachable_server_is_named_without_its_password() -> None:
    from rx_agent.session import PostgresSessionStore

    with socket_port() as port:
        url = f"postgresql://rx:s3cret@127.0.0.1:{port}/db"
        with pytest.raises(ConnectionError) as info:
            PostgresSessionStore(url, timeout=2)
    text = str(info.value)
    assert f"127.0.0.1:{port}" in text and "s3cret" not in text


def test_a_bad_prefix_is_refused_before_connecting() -> None:
    from rx_agent.session import PostgresSessionStore

    with pytest.raises(ValueError, match="prefix must be a lower-case SQL name"):
        PostgresSessionStore("postgresql://nowhere.invalid/db", prefix="x; DROP")


def test_a_key_value_password_is_hidden_in_the_repr() -> None:
    from rx_agent.session._postgres import _hide

    assert "pw" not in _hide("host=127.0.0.1 password=pw dbname=x")
    assert "pw" not in _hide("postgresql://rx:pw@127.0.0.1/x")


def test_without_the_extra_the_error_says_what_to_install() -> None:
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from rx_agent.session import PostgresSessionStore\n"
            "try:\n    PostgresSessionStore('postgresql://127.0.0.1/x')\n"
            "except ImportError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert "pip install -e '.[postgres]'" in done.stdout, done.stderr


class socket_port:
    """A loopback port nobody listens on, for as long as the block runs."""

    def __enter__(self) -> int:
        import socket

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))  # bound, never listening: connections refused
        port: int = self._sock.getsockname()[1]
        return port

    def __exit__(self, *exc: object) -> None:
        self._sock.close()
