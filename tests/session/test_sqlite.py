"""SQLite specifics: one WAL file that outlives the process, threads, the event loop."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from rx_agent import Msg
from rx_agent.session import ConcurrentSessionModificationError, SessionKey, SqliteSessionStore

from .conftest import KEY, round_msgs, state_with, texts

WRITER = textwrap.dedent("""
    import sys
    from rx_agent import AgentState, Msg, PermissionRule, ToolUseBlock
    from rx_agent.context import PendingToolCalls
    from rx_agent.session import SessionKey, SqliteSessionStore
    store = SqliteSessionStore(sys.argv[1])
    call = ToolUseBlock("c1", "deploy", {"env": "prod"})
    state = AgentState(session_id="s", user_id="u", context=[
        Msg("user", "deploy it"), Msg("assistant", [call])])
    state.pending = PendingToolCalls(reply_id="r7", kind="confirm", tool_calls=[call],
                                     batch=[call])
    state.permission_rules = [PermissionRule("read_*", "allow")]
    state.data["plan"] = {"step": 2}
    print(store.save_if_version(SessionKey("u", "s"), state, 0))
""")

READER = textwrap.dedent("""
    import sys
    from rx_agent.session import SessionKey, SqliteSessionStore
    store = SqliteSessionStore(sys.argv[1])
    state, version = store.load_versioned(SessionKey("u", "s"))
    print(version)
    print(state.model_dump_json())
""")


def _python(code: str, *args: str, cwd: Path | None = None) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], check=False,
                          capture_output=True, text=True, timeout=60, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_state_survives_a_process_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "app" / "sessions.db")  # the parent directory is created
    assert _python(WRITER, db).strip() == "1"
    version, dumped = _python(READER, db).splitlines()
    assert version == "1"
    state = json.loads(dumped)
    assert [m["role"] for m in state["context"]] == ["user", "assistant"]
    assert state["pending"]["reply_id"] == "r7"
    assert state["pending"]["tool_calls"][0]["input"] == {"env": "prod"}
    assert state["permission_rules"][0]["pattern"] == "read_*"
    assert state["data"] == {"plan": {"step": 2}}


def test_the_file_is_in_wal_mode(sqlite_store: SqliteSessionStore) -> None:
    sqlite_store.save(KEY, state_with(1))
    conn = sqlite3.connect(sqlite_store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_relative_path_is_taken_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SqliteSessionStore("rel.db")
    monkeypatch.chdir("/")  # a later chdir does not move the store
    store.save(KEY, state_with(1))
    store.close()
    assert store.path == tmp_path / "rel.db" and (tmp_path / "rel.db").exists()


def test_threads_share_one_store(sqlite_store: SqliteSessionStore) -> None:
    sqlite_store.save_if_version(KEY, state_with(0), 0)
    conflicts = []

    def writer(n: int) -> None:
        for i in range(20):
            while True:  # compare-and-set with retry: nothing may get lost
                state, version = sqlite_store.load_versioned(KEY)
                assert state is not None
                state.context.append(Msg("user", f"{n}:{i}"))
                try:
                    sqlite_store.save_if_version(KEY, state, version)
                    break
                except ConcurrentSessionModificationError:
                    conflicts.append(n)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    final = texts(sqlite_store.load(KEY))
    assert sorted(final) == sorted(f"{n}:{i}" for n in range(4) for i in range(20))
    for n in range(4):  # each writer's messages in its own order
        mine = [t for t in final if t.startswith(f"{n}:")]
        assert mine == [f"{n}:{i}" for i in range(20)]


async def test_coroutines_never_block_the_loop(sqlite_store: SqliteSessionStore) -> None:
    await sqlite_store.asave(KEY, state_with(1))
    blocker = sqlite3.connect(sqlite_store.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    tick_task = asyncio.create_task(ticker())
    state = state_with(2)
    saving = asyncio.create_task(sqlite_store.asave_if_version(KEY, state, 1))
    await asyncio.sleep(0.3)
    assert not saving.done() and ticks >= 10  # waiting on the lock, off the loop
    blocker.execute("ROLLBACK")
    blocker.close()
    assert await asyncio.wait_for(saving, 10) == 2
    tick_task.cancel()
    assert len((await sqlite_store.aload(KEY)).context) == 8
    await sqlite_store.aclose()


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(ValueError, match="not a usable session database"):
        SqliteSessionStore(bad)
    assert bad.read_text().startswith("these are my notes")


def test_a_newer_table_layout_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    SqliteSessionStore(db).close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE rx_meta SET value = '9' WHERE name = 'layout'")
    conn.commit()
    conn.close()
    with pytest.raises(ValueError, match="layout '9'"):
        SqliteSessionStore(db)


@pytest.mark.parametrize("path", ["", ":memory:", "file:x.db?mode=memory"])
def test_non_file_paths_are_refused(path: str) -> None:
    with pytest.raises(ValueError, match="needs a file path"):
        SqliteSessionStore(path)


def test_the_file_holds_other_tables_too(sqlite_store: SqliteSessionStore) -> None:
    conn = sqlite3.connect(sqlite_store.path)
    conn.execute("CREATE TABLE app_users (name TEXT)")
    conn.commit()
    conn.close()
    sqlite_store.save(SessionKey("u", "s"), state_with(1))
    again = SqliteSessionStore(sqlite_store.path)
    assert again.list_sessions() == [SessionKey("u", "s")]
    again.close()


def test_close_then_reuse(sqlite_store: SqliteSessionStore) -> None:
    sqlite_store.save(KEY, state_with(1))
    sqlite_store.close()
    sqlite_store.close()
    state = sqlite_store.load(KEY)
    assert state is not None
    state.context.extend(round_msgs(1))
    sqlite_store.save(KEY, state)
    assert len(sqlite_store.load(KEY).context) == 8


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_a_forked_child_opens_its_own_connection(sqlite_store: SqliteSessionStore) -> None:
    sqlite_store.save(KEY, state_with(1))
    pid = os.fork()
    if pid == 0:  # the child: must not use the parent's connection
        code = 0
        try:
            state = sqlite_store.load(KEY)
            assert state is not None
            state.context.extend(round_msgs(1))
            sqlite_store.save(KEY, state)
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(sqlite_store.load(KEY).context) == 8
