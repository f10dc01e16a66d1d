"""A worker of an older version serves a session a newer version wrote (a rolling
upgrade): unknown fields do not fail the load, and they survive the older worker's
saves (issue 24, item 5)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from rx_agent import ReActAgent, RuntimeContext, ScriptedModel
from rx_agent.session import SessionKey, SqliteSessionStore


def _rows(path: Path) -> tuple[dict, list[dict]]:
    with sqlite3.connect(path) as conn:
        (head,) = conn.execute("SELECT head FROM rx_session").fetchone()
        bodies = [json.loads(b) for (b,) in
                  conn.execute("SELECT body FROM rx_message ORDER BY seq")]
    return json.loads(head), bodies


def test_an_older_worker_keeps_what_a_newer_one_wrote(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    ctx = RuntimeContext(session_id="chat", user_id="u1")
    with SqliteSessionStore(path) as store:
        agent = ReActAgent(name="bot", model=ScriptedModel(["first answer"]),
                           session_store=store)
        assert agent.call_sync("hello", ctx).text == "first answer"

    # The newer version's rows: a field on the state, on a message and on a block.
    head, bodies = _rows(path)
    head["state"]["budget"] = {"left": 7}
    bodies[1]["signature"] = "sig-1"
    bodies[1]["content"][0]["cache"] = {"ttl": 60}
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE rx_session SET head = ?", (json.dumps(head),))
        conn.execute("UPDATE rx_message SET body = ? WHERE seq = 1", (json.dumps(bodies[1]),))

    # This (older) version loads the session and continues it.
    with SqliteSessionStore(path) as store:
        state = store.load(SessionKey(user_id="u1", session_id="chat"))
        assert state is not None
        assert [m.text for m in state.context] == ["hello", "first answer"]
        assert state.model_extra == {"budget": {"left": 7}}
        assert state.context[1].model_extra == {"signature": "sig-1"}

        agent = ReActAgent(name="bot", model=ScriptedModel(["second answer"]),
                           session_store=store)
        reply = agent.call_sync("again", RuntimeContext(session_id="chat", user_id="u1"))
        assert reply.text == "second answer"
        # The model saw the stored answer's text, not the fields it does not know.
        sent = agent.model.calls[0].messages  # type: ignore[attr-defined]
        assert [m.text for m in sent] == ["hello", "first answer", "again"]

    head, bodies = _rows(path)
    assert head["state"]["budget"] == {"left": 7}
    assert bodies[1]["signature"] == "sig-1"
    assert bodies[1]["content"][0]["cache"] == {"ttl": 60}
    assert [b["content"][0]["text"] for b in bodies] == \
        ["hello", "first answer", "again", "second answer"]
