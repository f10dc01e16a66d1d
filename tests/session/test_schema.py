"""The stored JSON: schema-1 records migrate on load; corrupt or foreign records raise
``SessionCorruptError`` naming the session and the problem, and are left untouched."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from rx_agent import AgentState
from rx_agent.session import (
    SCHEMA_VERSION,
    SessionCorruptError,
    SessionKey,
    SqliteSessionStore,
    decode_state,
    encode_state,
)

from .conftest import KEY, round_msgs, state_with, stored_count, texts


def put_head(store: Any, key: SessionKey, head: str | bytes, *, version: int = 1,
             count: int = 0) -> None:
    """Write a raw head record, as an older rx_agent (or a stray hand) would have."""
    if isinstance(store, SqliteSessionStore):
        store._conn().execute(
            "INSERT OR REPLACE INTO rx_session VALUES (?, ?, ?, ?, ?, ?)",
            (key.user_id, key.session_id, version, head, count, time.time()))
        store._cache.drop(key)
        return
    client, _ = store._client()
    head_key = store._session_keys(key)[0]
    client.hset(head_key, mapping={"version": version, "head": head, "count": count})
    client.sadd(store._session_keys(key)[2], key.user_id)
    client.sadd(store._session_keys(key)[3], key.session_id)
    store._cache.drop(key)


def test_a_schema_1_record_migrates_on_load_and_is_rewritten_on_save(durable: Any) -> None:
    old = state_with(2)
    old.data = {"kept": True}
    put_head(durable, KEY, old.model_dump_json())  # the plain dump a user stored
    state, version = durable.load_versioned(KEY)
    assert version == 1
    assert state is not None and state.model_dump() == old.model_dump()
    assert stored_count(durable, KEY) == 0  # still inline until the next save
    state.context.extend(round_msgs(5))
    assert durable.save_if_version(KEY, state, 1) == 2
    assert stored_count(durable, KEY) == 12  # now one row / item per message
    again = durable.load(KEY)
    assert texts(again) == texts(state) and again.data == {"kept": True}
    assert durable.list_sessions("alice") == [KEY]


@pytest.mark.parametrize(("head", "problem"), [
    ("{not json", "not valid JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
    ("[1, 2]", "a JSON list, not an object"),
    ('{"schema": 99, "format": "rx_agent.session", "state": {}}',
     "schema 99 is newer than this rx_agent reads (up to 2)"),
    ('{"schema": 1, "state": {}}', "unknown schema 1"),
    ('{"schema": "two"}', "'schema' must be an integer"),
    ('{"schema": 2, "format": "someone.else", "state": {}}', "foreign record format"),
    ('{"schema": 2, "format": "rx_agent.session"}', "no 'state' object"),
    ('{"name": "a cache entry of another app", "ttl": 5}',
     "not an rx_agent session record (no 'schema'; keys: name, ttl)"),
    ('{"schema": 2, "format": "rx_agent.session", "state": {"session_id": 5}}',
     "the state does not validate: session_id"),
    ('{"session_id": "s", "context": [{"role": "nobody"}]}', "context.0.role"),
])
def test_a_corrupt_head_raises_naming_session_and_problem(
    durable: Any, head: str | bytes, problem: str
) -> None:
    if isinstance(durable, SqliteSessionStore) and isinstance(head, bytes):
        head = head.decode("latin-1")  # TEXT column: store bytes that are not the JSON
        problem = "not valid JSON"
    put_head(durable, KEY, head)
    with pytest.raises(SessionCorruptError) as info:
        durable.load_versioned(KEY)
    err = info.value
    assert err.session_id == "chat-1" and err.user_id == "alice"
    assert problem in err.problem
    assert repr(durable) in str(err) and "left as it is" in str(err)
    # Never silently reset: the record is still there, and still raises.
    with pytest.raises(SessionCorruptError):
        durable.load(KEY)
    assert durable.list_sessions() == [KEY]


def test_a_missing_or_bad_message_row_is_corrupt(durable: Any) -> None:
    durable.save(KEY, state_with(2))
    if isinstance(durable, SqliteSessionStore):
        conn = durable._conn()
        conn.execute("UPDATE rx_message SET body = '{\"role\": 1}' WHERE seq = 3")
    else:
        client, _ = durable._client()
        client.lset(durable._session_keys(KEY)[1], 3, b'{"role": 1}')
    with pytest.raises(SessionCorruptError, match="stored message 3 is invalid"):
        durable.load(KEY)
    if isinstance(durable, SqliteSessionStore):
        durable._conn().execute("DELETE FROM rx_message WHERE seq = 3")
        with pytest.raises(SessionCorruptError, match="counts 8 messages"):
            durable.load(KEY)
    else:
        client.lpop(durable._session_keys(KEY)[1])
        with pytest.raises(SessionCorruptError, match="counts 8 messages, but the list holds 7"):
            durable.load(KEY)


def test_inline_and_row_messages_together_are_corrupt(durable: Any) -> None:
    durable.save(KEY, state_with(1))
    put_head(durable, KEY, state_with(1).model_dump_json(), count=4)
    with pytest.raises(SessionCorruptError, match="keeps its messages inline, but 4 message"):
        durable.load(KEY)


def test_encode_and_decode_whole_states() -> None:
    state = state_with(2)
    text = encode_state(state)
    record = json.loads(text)
    assert record["schema"] == SCHEMA_VERSION == 2
    assert record["format"] == "rx_agent.session"
    assert decode_state(text).model_dump() == state.model_dump()
    # A hand-written store's plain dumps import as schema 1.
    assert decode_state(state.model_dump_json()).model_dump() == state.model_dump()
    with pytest.raises(SessionCorruptError, match=r"'x' of user 'u'.*not valid JSON"):
        decode_state("{", SessionKey("u", "x"))
    with pytest.raises(SessionCorruptError, match="'\\(unnamed\\)'"):
        decode_state("[]")


def test_decoded_states_are_agent_states() -> None:
    assert isinstance(decode_state(AgentState(session_id="s").model_dump_json()), AgentState)
