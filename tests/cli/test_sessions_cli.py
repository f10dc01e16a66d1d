"""``rx-agent sessions list|show|delete`` and ``rx-agent chat --session`` on durable stores.

Real SQLite files in ``tmp_path`` (and one real ``redis-server``); the commands run
in-process through ``main([...])`` and, where a restart matters, as ``python -m
rx_agent`` subprocesses.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from rx_agent import AgentState, GenerateReason, Msg, ToolResultBlock, ToolUseBlock
from rx_agent.cli import main
from rx_agent.session import ANONYMOUS_USER, SessionKey, SqliteSessionStore

T0 = dt.datetime(2026, 3, 14, 9, 26, 53).timestamp()  # local time, as the table shows it


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, *needles: str) -> str:
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rx-agent: error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def cli(*args: str, input: str | None = None, cwd: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in {"OPENAI_API_KEY", "OPENAI_BASE_URL", "RX_AGENT_MODEL", "COLUMNS",
                         "FORCE_COLOR"}}
    return subprocess.run([sys.executable, "-m", "rx_agent", *args], check=False, input=input,
                          capture_output=True, text=True, encoding="utf-8", cwd=cwd,
                          env={**base, **(env or {})}, timeout=60)


def a_round(i: int, at: float) -> list[Msg]:
    call = ToolUseBlock(f"call-{i}", "lookup", {"q": f"q{i}"})
    return [
        Msg("user", f"question {i}", created_at=at),
        Msg("assistant", [call], created_at=at + 1, generate_reason=GenerateReason.TOOL_CALLS),
        Msg("tool", [ToolResultBlock(f"call-{i}", "lookup", f"result {i}")], created_at=at + 2),
        Msg("assistant", f"answer {i}", created_at=at + 3,
            generate_reason=GenerateReason.MODEL_STOP),
    ]


def state_of(key: SessionKey, rounds: int, at: float = T0) -> AgentState:
    msgs = [m for i in range(rounds) for m in a_round(i, at + 10 * i)]
    user = None if key.user_id == ANONYMOUS_USER else key.user_id
    return AgentState(session_id=key.session_id, user_id=user, context=msgs)


ALICE = SessionKey("alice", "trip")
BOB = SessionKey("bob", "trip")
ANON = SessionKey(ANONYMOUS_USER, "chat")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A SQLite file with three sessions: alice's and bob's ``trip``, an anonymous ``chat``."""
    path = tmp_path / "sessions.db"
    with SqliteSessionStore(path) as store:
        store.save(ALICE, state_of(ALICE, 2))
        store.save(BOB, state_of(BOB, 1, T0 + 100))
        store.save(ANON, state_of(ANON, 1, T0 + 200))
    return path


def url(path: Path) -> str:
    return f"sqlite:///{path}"  # path is absolute: four slashes


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich tables on one line per row


def corrupt(path: Path, key: SessionKey) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE rx_session SET head = '{\"not\": ' WHERE user_id = ? AND "
                     "session_id = ?", key)


# -- list ------------------------------------------------------------------------------------


def test_list_prints_a_table_of_every_session(capsys: pytest.CaptureFixture[str],
                                              db: Path) -> None:
    code, out, err = run(capsys, "sessions", "list", "--store", url(db))
    assert (code, err) == (0, "")
    assert f"Sessions in {url(db)}" in out
    rows = [line.split() for line in out.splitlines() if "trip" in line or " chat " in line]
    # Sorted by user: the anonymous one (__anon__) first; counts and last message times.
    assert rows == [
        ["│", "(anonymous)", "│", "chat", "│", "4", "│", "2026-03-14", "09:30:16", "│"],
        ["│", "alice", "│", "trip", "│", "8", "│", "2026-03-14", "09:27:06", "│"],
        ["│", "bob", "│", "trip", "│", "4", "│", "2026-03-14", "09:28:36", "│"],
    ]
    assert "3 session(s)" in out


def test_list_filters_by_user(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, _ = run(capsys, "sessions", "list", "--store", url(db), "--user", "bob")
    assert code == 0
    assert "Sessions of user 'bob'" in out
    assert "bob" in out and "alice" not in out and "(anonymous)" not in out
    code, out, _ = run(capsys, "sessions", "list", "--store", url(db), "--user", "carol")
    assert code == 0
    assert "no sessions of user 'carol'" in out


def test_list_json(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, err = run(capsys, "sessions", "list", "--store", url(db), "--json")
    assert (code, err) == (0, "")
    doc = json.loads(out)  # one document, nothing else on stdout
    assert doc["store"] == url(db)
    assert doc["sessions"][1] == {
        "user_id": "alice", "session_id": "trip", "message_count": 8, "version": 1,
        "last_message_at": dt.datetime.fromtimestamp(T0 + 13, dt.UTC).isoformat(),
        "paused": None,
    }
    assert [(s["user_id"], s["session_id"]) for s in doc["sessions"]] == [
        (ANONYMOUS_USER, "chat"), ("alice", "trip"), ("bob", "trip")]
    code, out, _ = run(capsys, "sessions", "list", "--store", url(db), "--json", "--user", "bob")
    assert [s["user_id"] for s in json.loads(out)["sessions"]] == ["bob"]


def test_list_shows_what_it_can_read_and_fails_on_a_corrupt_record(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    corrupt(db, BOB)
    code, out, err = run(capsys, "sessions", "list", "--store", url(db))
    assert code == 1
    one_line_error(err, "1 session(s) cannot be read", "'trip'", "sessions show")
    assert "unreadable" in out and "alice" in out and "(anonymous)" in out
    code, out, err = run(capsys, "sessions", "list", "--store", url(db), "--json")
    assert code == 1
    bob = json.loads(out)["sessions"][2]
    assert bob["user_id"] == "bob" and "cannot be read" in bob["error"]


def test_list_of_a_default_store_that_does_not_exist_yet_creates_nothing(
    capsys: pytest.CaptureFixture[str], data_home: Path
) -> None:
    code, out, err = run(capsys, "sessions", "list")
    assert (code, err) == (0, "")
    default = data_home / "rx-agent" / "sessions.db"
    assert "no sessions in sqlite:///" in out and "does not exist yet" in out
    assert str(default) in out
    code, out, _ = run(capsys, "sessions", "list", "--json")
    assert code == 0
    assert json.loads(out) == {"store": f"sqlite:///{default}", "user_filter": None,
                               "sessions": []}
    assert not default.exists() and not default.parent.exists()


def test_the_environment_names_the_default_store(
    capsys: pytest.CaptureFixture[str], db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RX_AGENT_STORE", url(db))
    code, out, _ = run(capsys, "sessions", "list", "--json")
    assert code == 0
    assert len(json.loads(out)["sessions"]) == 3
    # --store wins over the environment.
    code, out, _ = run(capsys, "sessions", "list", "--json", "--store", "memory://")
    assert (code, json.loads(out)["sessions"]) == (0, [])


# -- show ------------------------------------------------------------------------------------


def test_show_prints_every_message(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, err = run(capsys, "sessions", "show", "trip", "--user", "alice", "--store", url(db))
    assert (code, err) == (0, "")
    assert "Session 'trip' of user alice · since 2026-03-14" in out
    assert "8 message(s) · version 1" in out
    lines = out.splitlines()
    first = next(line for line in lines if "question 0" in line)
    assert "09:26:53" in first and "2026" not in first and "user" in first
    call = next(line for line in lines if "→ lookup" in line)
    assert '{"q": "q0"}' in call and "(call-0)" in call and "TOOL_CALLS" in call
    result = lines.index(next(line for line in lines if "← lookup · SUCCESS" in line))
    assert "result 0" in lines[result + 1]
    answer = next(line for line in lines if "answer 1" in line)
    assert "09:27:06" in answer and "2026-03-14" not in answer and "MODEL_STOP" in answer


def test_show_dates_the_rows_of_a_new_day(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    path = tmp_path / "days.db"
    key = SessionKey("alice", "long")
    with SqliteSessionStore(path) as store:
        store.save(key, AgentState(session_id="long", user_id="alice",
                                   context=a_round(0, T0) + a_round(1, T0 + 86400)))
    code, out, _ = run(capsys, "sessions", "show", "long", "--store", url(path))
    assert code == 0
    lines = out.splitlines()
    assert "2026-03-14" not in next(line for line in lines if "question 0" in line)
    assert "2026-03-15 09:26:53" in next(line for line in lines if "question 1" in line)
    assert "2026-03-15" not in next(line for line in lines if "answer 1" in line)


def test_show_json_round_trips_the_state(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, _ = run(capsys, "sessions", "show", "trip", "--user", "bob", "--store", url(db),
                       "--json")
    assert code == 0
    doc = json.loads(out)
    assert {k: doc[k] for k in ("user_id", "session_id", "version", "message_count")} == {
        "user_id": "bob", "session_id": "trip", "version": 1, "message_count": 4}
    with SqliteSessionStore(db) as store:
        assert AgentState.model_validate(doc["state"]) == store.load(BOB)


def test_show_finds_the_one_user_with_that_session(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    code, out, _ = run(capsys, "sessions", "show", "chat", "--store", url(db))
    assert code == 0
    assert "Session 'chat' of user (anonymous)" in out
    code, _, err = run(capsys, "sessions", "show", "trip", "--store", url(db))
    assert code == 2  # ambiguous: say which users have it
    one_line_error(err, "several users", "'alice'", "'bob'", "--user")


def test_show_a_missing_session(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, err = run(capsys, "sessions", "show", "nope", "--store", url(db))
    assert (code, out) == (1, "")
    one_line_error(err, "no session 'nope'", url(db), "sessions list")
    code, _, err = run(capsys, "sessions", "show", "trip", "--user", "carol", "--store", url(db),
                       "--json")
    assert code == 1
    one_line_error(err, "no session 'trip' of user carol")


def test_show_a_corrupt_record_is_one_line(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    corrupt(db, ALICE)
    code, out, err = run(capsys, "sessions", "show", "trip", "--user", "alice", "--store", url(db))
    assert (code, out) == (1, "")
    one_line_error(err, "session 'trip' of user 'alice'", "cannot be read", "repair or delete")


# -- delete ----------------------------------------------------------------------------------


def test_delete(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, err = run(capsys, "sessions", "delete", "trip", "--user", "bob", "--store", url(db))
    assert (code, err) == (0, "")
    assert out == f"deleted session 'trip' of user bob from {url(db)}\n"
    with SqliteSessionStore(db) as store:
        assert store.list_sessions() == [ANON, ALICE]
    # Now only alice has a "trip": no --user needed; --json says what was deleted.
    code, out, _ = run(capsys, "sessions", "delete", "trip", "--store", url(db), "--json")
    assert code == 0
    assert json.loads(out) == {"store": url(db), "user_id": "alice", "session_id": "trip",
                               "deleted": True}
    code, out, err = run(capsys, "sessions", "delete", "trip", "--store", url(db))
    assert (code, out) == (1, "")
    one_line_error(err, "no session 'trip'")
    code, _, err = run(capsys, "sessions", "delete", "chat", "--user", "alice", "--store", url(db))
    assert code == 1
    one_line_error(err, "no session 'chat' of user alice")
    with SqliteSessionStore(db) as store:
        assert store.list_sessions() == [ANON]


def test_a_corrupt_record_can_be_deleted(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    corrupt(db, ALICE)
    code, _, _ = run(capsys, "sessions", "delete", "trip", "--user", "alice", "--store", url(db))
    assert code == 0
    code, _, err = run(capsys, "sessions", "list", "--store", url(db))
    assert (code, err) == (0, "")


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(("store", "needles"), [
    ("sessions.db", ("not a session store URL", "sqlite:///sessions.db", "--store")),
    ("ftp://host/x", ("unknown session store URL scheme 'ftp'",)),
    ("sqlite://host/x.db", ("sqlite URLs have no host",)),
    ("redis://:secret@host:notaport/0", ("bad Redis URL",)),
])
@pytest.mark.parametrize("action", [("list",), ("show", "x"), ("delete", "x")])
def test_a_bad_store_url_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], store: str, needles: tuple[str, ...],
    action: tuple[str, ...],
) -> None:
    code, out, err = run(capsys, "sessions", *action, "--store", store)
    assert (code, out) == (2, "")
    line = one_line_error(err, *needles)
    assert "secret" not in line


def test_an_explicit_sqlite_file_that_does_not_exist_is_not_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "sessions", "list", "--store", "sqlite:///typo.db")
    assert code == 2
    one_line_error(err, f"no session database at {tmp_path / 'typo.db'}", "--store")
    assert not (tmp_path / "typo.db").exists()


def test_a_file_that_is_not_a_database(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_text("this is not SQLite\n" * 100)
    code, _, err = run(capsys, "sessions", "list", "--store", url(junk))
    assert code == 2
    one_line_error(err, "not a usable session database")


def test_an_unreachable_redis_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("redis")
    import socket

    with socket.socket() as sock:  # a port nobody listens on any more
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, _, err = run(capsys, "sessions", "list", "--store", f"redis://127.0.0.1:{port}/0")
    assert code == 1
    one_line_error(err, f"the session store redis://127.0.0.1:{port}/0 failed",
                   "ConnectionError")


def test_an_empty_session_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "sessions", "show", "", "--store", "memory://")
    assert code == 2
    assert "must not be empty" in err
    code, _, err = run(capsys, "chat", "--offline", "--session", " ")
    assert code == 2
    assert "must not be empty" in err


def test_help_shows_the_default_store(capsys: pytest.CaptureFixture[str],
                                      data_home: Path) -> None:
    default = str(data_home / "rx-agent" / "sessions.db")
    for argv in (("chat", "--help"), ("sessions", "list", "--help"),
                 ("sessions", "show", "--help"), ("sessions", "delete", "--help")):
        code, out, _ = run(capsys, *argv)
        assert code == 0
        # argparse wraps at spaces and hyphens: compare without the line breaks.
        assert default in "".join(out.split()), argv
        assert "RX_AGENT_STORE" in out and "redis://" in out


# -- chat ------------------------------------------------------------------------------------


def chat(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, lines: str,
         *argv: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    return run(capsys, "chat", "--offline", "--delay", "0", *argv)


def user_texts(state: AgentState | None) -> list[str]:
    assert state is not None
    return [m.text for m in state.context if m.role.value == "user"]


def test_chat_survives_a_restart(tmp_path: Path) -> None:
    first = cli("chat", "--offline", "--delay", "0", "--session", "trip", "--store",
                "sqlite:///chat.db", input="weather in London?\n", cwd=tmp_path)
    assert (first.returncode, first.stderr) == (0, "")
    assert "session 'trip'" in first.stdout and "new · saved to sqlite:///chat.db" in first.stdout
    with SqliteSessionStore(tmp_path / "chat.db") as store:
        before = store.load(SessionKey(ANONYMOUS_USER, "trip"))
    assert before is not None and user_texts(before) == ["weather in London?"]

    second = cli("chat", "--offline", "--delay", "0", "--session", "trip", "--store",
                 "sqlite:///chat.db", input="weather in Tokyo?\n", cwd=tmp_path)
    assert (second.returncode, second.stderr) == (0, "")
    assert f"continuing, {len(before.context)} earlier message(s)" in second.stdout
    assert "Tokyo" in second.stdout
    with SqliteSessionStore(tmp_path / "chat.db") as store:
        after = store.load(SessionKey(ANONYMOUS_USER, "trip"))
    assert after is not None
    # The second process continued the first one's conversation: same messages, then more.
    assert [m.id for m in after.context[:len(before.context)]] == [m.id for m in before.context]
    assert user_texts(after) == ["weather in London?", "weather in Tokyo?"]
    assert after.context[-1].generate_reason is GenerateReason.MODEL_STOP

    listed = cli("sessions", "list", "--json", "--store", "sqlite:///chat.db", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    (only,) = json.loads(listed.stdout)["sessions"]
    assert (only["session_id"], only["message_count"]) == ("trip", len(after.context))


def test_chat_session_uses_the_default_file(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch,
                                            data_home: Path) -> None:
    default = data_home / "rx-agent" / "sessions.db"
    code, out, err = chat(capsys, monkeypatch, "weather in Oslo?\n")  # no --session
    assert (code, err) == (0, "")
    assert "saved to" not in out
    assert not default.exists()  # without --session: in memory, as before

    code, out, err = chat(capsys, monkeypatch, "weather in Oslo?\n", "--session", "oslo",
                          "--user", "alice")
    assert (code, err) == (0, "")
    assert f"new · saved to sqlite:///{default}" in out
    with SqliteSessionStore(default) as store:
        assert store.list_sessions() == [SessionKey("alice", "oslo")]
    code, out, _ = run(capsys, "sessions", "show", "oslo")
    assert code == 0
    assert "weather in Oslo?" in out and "get_weather" in out


def test_chat_store_alone_persists_the_chat_session(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "only-store.db"
    code, _, err = chat(capsys, monkeypatch, "hi\n", "--store", url(path))
    assert (code, err) == (0, "")
    with SqliteSessionStore(path) as store:
        assert store.list_sessions() == [ANON]


def test_chat_new_skips_stored_names(capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteSessionStore(path) as store:
        store.save(SessionKey(ANONYMOUS_USER, "s-1"), state_of(SessionKey(ANONYMOUS_USER, "s-1"),
                                                               1))
    code, out, _ = chat(capsys, monkeypatch, "/new\nhello\n", "--session", "s", "--store",
                        url(path))
    assert code == 0
    assert "new session 's-2'" in out
    with SqliteSessionStore(path) as store:
        fresh = store.load(SessionKey(ANONYMOUS_USER, "s-2"))
        old = store.load(SessionKey(ANONYMOUS_USER, "s-1"))
    assert user_texts(fresh) == ["hello"]
    assert user_texts(old) == ["question 0"]  # the old conversation is untouched


def test_chat_on_a_corrupt_session_stops_before_the_first_message(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, db: Path
) -> None:
    corrupt(db, ANON)
    code, _, err = chat(capsys, monkeypatch, "hi\n", "--session", "chat", "--store", url(db))
    assert code == 1
    one_line_error(err, "session 'chat'", "cannot be read")


def test_chat_with_a_bad_store_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = chat(capsys, monkeypatch, "hi\n", "--session", "x", "--store", "nosuch://")
    assert code == 2
    one_line_error(err, "bad session store (--store)", "unknown session store URL scheme")
    monkeypatch.setenv("RX_AGENT_STORE", "oops")
    code, _, err = chat(capsys, monkeypatch, "hi\n", "--session", "x")
    assert code == 2
    one_line_error(err, "bad session store ($RX_AGENT_STORE)", "'oops'")


# -- Redis -----------------------------------------------------------------------------------


def test_redis_round_trip(capsys: pytest.CaptureFixture[str], redis_url: str) -> None:
    store = f"{redis_url}?prefix=cli{uuid.uuid4().hex[:8]}"
    for question in ("weather in Rome?", "weather in Lima?"):
        done = cli("chat", "--offline", "--delay", "0", "--session", "r1", "--user", "ann",
                   "--store", store, input=question + "\n")
        assert (done.returncode, done.stderr) == (0, "")
    assert "continuing, " in done.stdout

    code, out, _ = run(capsys, "sessions", "list", "--store", store, "--json")
    assert code == 0
    (row,) = json.loads(out)["sessions"]
    assert (row["user_id"], row["session_id"]) == ("ann", "r1")
    code, out, _ = run(capsys, "sessions", "show", "r1", "--store", store, "--json")
    assert code == 0
    state = AgentState.model_validate(json.loads(out)["state"])
    assert user_texts(state) == ["weather in Rome?", "weather in Lima?"]
    assert row["message_count"] == len(state.context)
    code, out, _ = run(capsys, "sessions", "show", "r1", "--store", store)
    assert code == 0 and "Rome" in out and "Lima" in out
    code, _, _ = run(capsys, "sessions", "delete", "r1", "--user", "ann", "--store", store)
    assert code == 0
    code, out, _ = run(capsys, "sessions", "list", "--store", store, "--json")
    assert (code, json.loads(out)["sessions"]) == (0, [])


# -- python -m rx_agent ----------------------------------------------------------------------


def test_sessions_as_a_program(db: Path) -> None:
    shown = cli("sessions", "show", "chat", "--store", url(db))
    assert shown.returncode == 0, shown.stderr
    assert "question 0" in shown.stdout and "MODEL_STOP" in shown.stdout
    missing = cli("sessions", "delete", "nope", "--store", url(db), "--json")
    assert (missing.returncode, missing.stdout) == (1, "")
    one_line_error(missing.stderr, "no session 'nope'")
