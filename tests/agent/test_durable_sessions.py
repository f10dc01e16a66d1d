"""Durable sessions through the agent, across real processes (issue #12, item 9).

Every case runs agent calls in worker processes (``_worker.py``: ScriptedModel, real
tools) against a real SQLite file and a real ``redis-server`` (``tests/_services.py``),
and checks what the store holds afterwards from this process. Gates stop a call at
a known point (inside a tool, or before its model call) so a test can kill the
worker there (SIGKILL) or freeze it (SIGSTOP: a paused process whose lease runs out).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _services
import pytest

from rx_agent import (
    ConcurrentSessionModificationError,
    Msg,
    PermissionRule,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    SessionBusyError,
    ToolUseBlock,
)
from rx_agent.testing import assert_no_orphan_tool_calls

from ._worker import (
    CallReport,
    Pool,
    Spec,
    describe,
    key,
    one_call,
    open_every_gate,
    open_gate,
    open_store,
    wait_started,
)

redis_url = _services.redis_url  # the real server (skips locally / fails in CI without one)
postgres_url = _services.postgres_url

KINDS = ["sqlite", "redis", "postgres"]


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    workers = Pool(4)
    yield workers
    workers.close()


@pytest.fixture(params=KINDS)
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Spec:
    if request.param == "sqlite":
        return ("sqlite", str(tmp_path / "sessions.db"), "")
    if request.param == "postgres":
        return ("postgres", request.getfixturevalue("postgres_url"), f"ds{uuid.uuid4().hex[:10]}")
    return ("redis", request.getfixturevalue("redis_url"), f"ds{uuid.uuid4().hex[:10]}")


@pytest.fixture
def gates(tmp_path: Path) -> Iterator[Path]:
    """Where this test's gates are; whatever still waits at one goes when it ends."""
    yield tmp_path
    open_every_gate(tmp_path)


@pytest.fixture
def store(spec: Spec) -> Iterator[Any]:
    """The same store, opened here to look at what the workers left."""
    opened = open_store(spec)
    yield opened
    opened.close()


def stored(store: Any, session: str, user: str = "u") -> list[str]:
    state = store.load(key(session, user))
    assert state is not None, f"session {session!r} is not stored"
    assert_no_orphan_tool_calls(state.context)
    assert len({m.id for m in state.context}) == len(state.context), "a message is duplicated"
    return [describe(m) for m in state.context]


def stored_raw(store: Any, session: str) -> list[str]:
    """The stored context as it is (orphans included)."""
    state = store.load(key(session))
    assert state is not None
    return [describe(m) for m in state.context]


def ok(report: CallReport) -> CallReport:
    assert report.error is None, f"the call failed: {report.error!r} (events {report.events})"
    return report


# -- two processes, one conversation ---------------------------------------------------------


@pytest.mark.timeout(60)
def test_two_processes_alternate_twenty_calls_on_one_session(pool: Pool, spec: Spec,
                                                            store: Any) -> None:
    workers = (pool.get(0), pool.get(1))
    assert workers[0].pid != workers[1].pid
    history: list[str] = []
    for i in range(20):
        report = ok(workers[i % 2].run("call", spec=spec, session="alt", text=f"message {i}",
                                       script=[f"reply {i}"]))
        # Each call saw everything the other process saved, then its own message.
        assert report.seen == [[*history, f"user: message {i}"]], i
        assert report.reply == f"reply {i}"
        history += [f"user: message {i}", f"assistant: reply {i}"]
    assert stored(store, "alt") == history


@pytest.mark.timeout(60)
def test_a_worker_never_serves_its_cached_session_after_another_process_wrote_it(
        pool: Pool, spec: Spec, store: Any) -> None:
    """Each worker keeps the session it served (session/_cache.py); runs of calls in
    one process hit its cache, and whatever another process (or this one, without a
    lease) saved in between is what the next call sees."""
    history: list[str] = []
    for i, who in enumerate([0, 0, 1, 0, 0, "here", 0, 1, 1, 0, "here", 1]):
        if who == "here":
            state, version = store.load_versioned(key("mixed"))
            note = Msg("user", f"note {i}")
            state.context.append(note)
            store.save_if_version(key("mixed"), state, version)
            history.append(f"user: note {i}")
            continue
        report = ok(pool.get(int(who)).run("call", spec=spec, session="mixed",
                                           text=f"message {i}", script=[f"reply {i}"]))
        assert report.seen == [[*history, f"user: message {i}"]], i
        history += [f"user: message {i}", f"assistant: reply {i}"]
    assert stored(store, "mixed") == history


# -- a crashed worker --------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_worker_killed_mid_call_is_recovered_by_the_next_process(
    pool: Pool, spec: Spec, store: Any, gates: Path
) -> None:
    victim = pool.fresh()
    try:
        victim.send("call", spec=spec, session="crash", text="start the slow job",
                    script=[[ToolUseBlock("slow-1", "gate", {"name": "crash"})], "never said"],
                    ttl=1.0, gates=str(gates))
        wait_started(gates, "crash")
        # The assistant message was saved before its tool started (a checkpoint), and
        # the worker holds the session's lease.
        assert stored_raw(store, "crash") == ["user: start the slow job",
                                              "assistant: call:slow-1"]
        with pytest.raises(SessionBusyError):
            store.acquire_lease(key("crash"), "probe", 1.0, 0)
    finally:
        victim.kill()
    assert victim.proc.exitcode == -signal.SIGKILL

    report = ok(pool.get(1).run("call", spec=spec, session="crash", text="are you there?",
                                script=["yes, still here"], ttl=1.0, wait=10))
    assert report.events[:2] == ["AgentStartEvent", "SessionRecoveredEvent"]
    assert report.recovered == [("crash", ["slow-1"])]
    assert report.reply == "yes, still here"
    repaired = ["user: start the slow job", "assistant: call:slow-1",
                "tool: result:slow-1:INTERRUPTED"]
    assert report.seen == [[*repaired, "user: are you there?"]]
    assert stored(store, "crash") == [*repaired, "user: are you there?",
                                      "assistant: yes, still here"]
    result = store.load(key("crash")).context[2].content[0]
    assert "stopped before the tool finished" in str(result.output)


# -- a crash during a side-effect tool (issue #27, item 4) -----------------------------------


def paid(runs: Path) -> list[str]:
    """The payments the ``pay`` tool made, in any process."""
    if not runs.exists():
        return []
    return [line.split(" ", 1)[1] for line in runs.read_text().splitlines()]


@pytest.mark.timeout(60)
def test_a_side_effect_tool_killed_mid_call_is_not_run_again(
    pool: Pool, spec: Spec, store: Any, gates: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs.txt"
    victim = pool.fresh()
    try:
        victim.send("call", spec=spec, session="pay", text="pay the invoice",
                    script=[[ToolUseBlock("pay-1", "pay", {"name": "invoice"})], "never said"],
                    ttl=1.0, gates=str(gates), runs=str(runs))
        wait_started(gates, "invoice")  # inside the tool, after its payment
        # Its start mark was saved before the tool ran.
        state = store.load(key("pay"))
        assert state.context[-1].metadata == {
            "tool_journal": {"pay-1": {"state": "started", "tool": "pay"}}}
    finally:
        victim.kill()
    assert victim.proc.exitcode == -signal.SIGKILL
    assert paid(runs) == ["pay invoice"]

    report = ok(pool.get(1).run("call", spec=spec, session="pay", text="did it go through?",
                                script=["Let me check with the bank first."], ttl=1.0,
                                wait=10, gates=str(gates), runs=str(runs)))
    assert paid(runs) == ["pay invoice"]  # not run again
    assert report.recovered == [("pay", ["pay-1"])]
    repaired = ["user: pay the invoice", "assistant: call:pay-1",
                "tool: result:pay-1:INTERRUPTED"]
    assert report.seen == [[*repaired, "user: did it go through?"]]
    state = store.load(key("pay"))
    assert stored(store, "pay") == [*repaired, "user: did it go through?",
                                    "assistant: Let me check with the bank first."]
    result = state.context[2].content[0]
    assert "may have run" in str(result.output) and "not run again" in str(result.output)
    assert state.context[1].metadata is None  # the journal has served


@pytest.mark.timeout(60)
def test_a_side_effect_result_saved_before_a_crash_is_restored_not_rerun(
    pool: Pool, spec: Spec, store: Any, gates: Path, tmp_path: Path
) -> None:
    """The worker dies after the payment returned (its result journaled) but before
    the batch published it: the next process restores that result."""
    runs = tmp_path / "runs.txt"
    victim = pool.fresh()
    try:
        victim.send("call", spec=spec, session="paid", text="pay, then wait",
                    script=[[ToolUseBlock("pay-1", "pay", {"name": "rent", "wait": False}),
                             ToolUseBlock("slow-1", "gate", {"name": "after"})], "never said"],
                    ttl=1.0, gates=str(gates), runs=str(runs))
        wait_started(gates, "after")
        journal = store.load(key("paid")).context[-1].metadata["tool_journal"]
        assert journal["pay-1"]["state"] == "finished"
    finally:
        victim.kill()
    assert paid(runs) == ["pay rent"]

    report = ok(pool.get(1).run("call", spec=spec, session="paid", text="status?",
                                script=["Rent is paid."], ttl=1.0, wait=10,
                                gates=str(gates), runs=str(runs)))
    assert paid(runs) == ["pay rent"]
    assert report.recovered == [("paid", ["pay-1", "slow-1"])]  # the journaled one first
    repaired = ["user: pay, then wait", "assistant: call:pay-1 call:slow-1",
                "tool: result:pay-1:SUCCESS",
                "tool: result:slow-1:INTERRUPTED"]
    assert report.seen == [[*repaired, "user: status?"]]
    state = store.load(key("paid"))
    assert state.context[2].content[0].output == "paid rent"
    assert "stopped before the tool finished" in str(state.context[3].content[0].output)


# -- a writer that lost its lease --------------------------------------------------------------


RECORD = ToolUseBlock("r1", "record", {"text": "stale side effect"})
SHAPES = {
    # The stale call's reply: a plain answer (saved once, when the call ends) or a
    # tool round (saved before the tool runs, after it, and at the end).
    "answer": (["stale reply"], ["assistant: stale reply"]),
    "tool round": ([[RECORD], "stale reply"], ["assistant: call:r1", "tool: result:r1:SUCCESS",
                                               "assistant: stale reply"]),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("policy", ["FAIL", "APPEND_MERGE", "OVERWRITE"])
def test_a_paused_writer_whose_lease_was_taken_follows_the_conflict_policy(
    pool: Pool, spec: Spec, store: Any, gates: Path, policy: str, shape: str
) -> None:
    script, reply = SHAPES[shape]
    runs = gates / "runs.txt"
    ok(pool.get(1).run("call", spec=spec, session="fenced", text="hello", script=["hi"]))
    _, loaded_version = store.load_versioned(key("fenced"))
    stale = pool.get(0)
    stale.send("call", spec=spec, session="fenced", text="from the stale writer", script=script,
               ttl=0.5, wait=2.0, policy=policy, gates=str(gates), runs=str(runs),
               model_gate="stale")
    wait_started(gates, "stale")
    # Frozen before its model call: it cannot renew, its lease runs out, and a new
    # owner serves the session meanwhile.
    os.kill(stale.pid, signal.SIGSTOP)
    try:
        fresh = ok(pool.get(1).run("call", spec=spec, session="fenced",
                                   text="from the new owner", script=["new reply"], wait=10))
        assert fresh.recovered == []
        _, newer_version = store.load_versioned(key("fenced"))
        assert newer_version > loaded_version
        probe = store.acquire_lease(key("fenced"), "probe", 30, 5) if policy == "FAIL" else None
    finally:
        os.kill(stale.pid, signal.SIGCONT)
    open_gate(gates, "stale")
    late: CallReport = stale.result()

    base = ["user: hello", "assistant: hi"]
    new_owner = ["user: from the new owner", "assistant: new reply"]
    mine = ["user: from the stale writer", *reply]
    if policy == "FAIL":
        assert isinstance(late.error, ConcurrentSessionModificationError), late
        assert late.error.session_id == "fenced"
        assert late.error.expected_version == loaded_version
        assert late.error.actual_version == newer_version
        # Nothing written, no tool run after the conflict, and the lease the probe took
        # meanwhile is still its own.
        assert store.load_versioned(key("fenced"))[1] == newer_version
        assert stored(store, "fenced") == [*base, *new_owner]
        assert not runs.exists()
        assert probe is not None
        assert store.renew_lease(probe) is True
        assert store.release_lease(probe) is True
        return
    ok(late)
    if policy == "APPEND_MERGE":
        assert stored(store, "fenced") == [*base, *new_owner, *mine]
    else:
        assert stored(store, "fenced") == [*base, *mine]
    if shape == "tool round":
        assert runs.read_text().splitlines() == [f"{stale.pid} stale side effect"]


# -- a busy session ----------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_session_served_elsewhere_is_busy_after_session_wait(
    pool: Pool, spec: Spec, store: Any, gates: Path
) -> None:
    holder = pool.get(0)
    holder.send("call", spec=spec, session="busy", text="long job",
                script=[[ToolUseBlock("hold-1", "gate", {"name": "busy"})], "job done"],
                ttl=1.0, gates=str(gates))
    wait_started(gates, "busy")
    # Waiting longer than the holder's ttl: its renewals keep the lease.
    started = time.monotonic()
    report = pool.get(1).run("call", spec=spec, session="busy", text="me too",
                             script=["never said"], wait=1.5)
    elapsed = time.monotonic() - started
    open_gate(gates, "busy")
    assert isinstance(report.error, SessionBusyError), report.error
    assert report.error.session_id == "busy"
    assert report.seconds >= 1.5 and elapsed < 6
    assert ok(holder.result()).reply == "job done"
    assert stored(store, "busy") == ["user: long job", "assistant: call:hold-1",
                                     "tool: result:hold-1:SUCCESS", "assistant: job done"]


# -- load --------------------------------------------------------------------------------------

SESSIONS, CALLS, PROCESSES = 100, 10, 4


@pytest.mark.timeout(120)
def test_a_hundred_sessions_ten_calls_each_from_four_processes(pool: Pool, spec: Spec,
                                                              store: Any) -> None:
    sessions = [f"s{n:03d}" for n in range(SESSIONS)]
    for w in range(PROCESSES):
        # Each process takes every fourth round; two walk the sessions backwards, so
        # they meet the others on the same sessions.
        order = sessions if w % 2 == 0 else sessions[::-1]
        pool.get(w).send("bulk", spec=spec, worker=w, sessions=order,
                         rounds=[r for r in range(CALLS) if r % PROCESSES == w])
    done = [pool.get(w).result(timeout=110) for w in range(PROCESSES)]
    assert [errors for _, errors in done] == [[]] * PROCESSES
    assert sum(calls for calls, _ in done) == SESSIONS * CALLS
    assert store.list_sessions("bulk") == [key(s, "bulk") for s in sessions]
    for s in sessions:
        got = stored(store, s, "bulk")
        assert len(got) == 2 * CALLS, s
        asked = [line.removeprefix("user: ") for line in got[::2]]
        # Every call's message once, each followed by its own reply ...
        assert got[1::2] == [f"assistant: re {text}" for text in asked], s
        assert sorted(asked) == sorted(f"{s} w{r % PROCESSES} r{r}" for r in range(CALLS)), s
        # ... and each process's calls in the order it made them.
        for w in range(PROCESSES):
            mine = [t for t in asked if f" w{w} " in t]
            assert mine == [f"{s} w{w} r{r}" for r in range(CALLS) if r % PROCESSES == w], s


# -- restart -----------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_sqlite_sessions_survive_a_process_restart(tmp_path: Path) -> None:
    spec: Spec = ("sqlite", str(tmp_path / "chat.db"), "")
    first = one_call(spec=spec, session="restart", text="remember 42", script=["noted"])
    assert ok(first).reply == "noted"
    second = ok(one_call(spec=spec, session="restart", text="what number?", script=["42"]))
    assert second.seen == [["user: remember 42", "assistant: noted", "user: what number?"]]
    with open_store(spec) as store:
        assert stored(store, "restart") == ["user: remember 42", "assistant: noted",
                                            "user: what number?", "assistant: 42"]


# -- human in the loop -------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_call_paused_for_confirmation_in_one_process_resumes_in_another(
    pool: Pool, spec: Spec, store: Any, tmp_path: Path
) -> None:
    runs = tmp_path / "runs.txt"
    a, b = pool.get(0), pool.get(1)
    common: dict[str, Any] = {"spec": spec, "session": "hitl", "gates": str(tmp_path),
                              "runs": str(runs)}
    asked = ok(a.run("call", text="clean up", **common,
                     script=[[ToolUseBlock("c1", "delete_file", {"path": "/tmp/x"})]]))
    assert asked.confirm is not None and asked.events[-1] == "AgentEndEvent"
    reply_id, calls = asked.confirm
    assert [c.id for c in calls] == ["c1"]
    assert not runs.exists()
    paused = store.load(key("hitl"))
    assert paused.pending is not None and paused.pending.reply_id == reply_id
    assert stored_raw(store, "hitl") == ["user: clean up", "assistant: call:c1"]

    # Process B answers, remembering an allow rule for the tool.
    resumed = ok(b.run("call", **common, script=["all clean"],
                       confirm=(reply_id, [(calls[0], True)],
                                [PermissionRule("delete_file", "allow")])))
    assert resumed.reply == "all clean" and resumed.confirm is None
    assert runs.read_text().splitlines() == [f"{b.pid} /tmp/x"]  # once, in B
    assert stored(store, "hitl") == ["user: clean up", "assistant: call:c1",
                                     "tool: result:c1:SUCCESS", "assistant: all clean"]
    state = store.load(key("hitl"))
    assert state.pending is None
    assert [(r.pattern, r.decision.value) for r in state.permission_rules] == [
        ("delete_file", "allow")]

    # Back in A, the remembered rule lets the tool run without asking.
    again = ok(a.run("call", text="and /tmp/y", **common, script=[
        [ToolUseBlock("c2", "delete_file", {"path": "/tmp/y"})], "done too"]))
    assert again.confirm is None and again.reply == "done too"
    assert runs.read_text().splitlines() == [f"{b.pid} /tmp/x", f"{a.pid} /tmp/y"]
    assert stored(store, "hitl")[4:] == ["user: and /tmp/y", "assistant: call:c2",
                                         "tool: result:c2:SUCCESS", "assistant: done too"]


def interrupt_here(store: Any, session: str) -> bool:
    """``agent.interrupt()`` from this process, where no call of the session runs."""
    agent = ReActAgent(name="agent", model=ScriptedModel([]), session_store=store)
    return agent.interrupt(RuntimeContext(session_id=session, user_id="u"))


@pytest.mark.timeout(60)
def test_interrupting_a_pause_another_worker_is_resuming_writes_nothing(
    pool: Pool, spec: Spec, store: Any, gates: Path
) -> None:
    a, b = pool.get(0), pool.get(1)
    common: dict[str, Any] = {"spec": spec, "session": "fence", "gates": str(gates),
                              "ask": ("gate",)}
    asked = ok(a.run("call", text="wait for g1", **common,
                     script=[[ToolUseBlock("c1", "gate", {"name": "g1"})]]))
    assert asked.confirm is not None
    reply_id, calls = asked.confirm
    # B resumes the pause: the confirmed tool really runs, and waits at its gate.
    b.send("call", **common, script=["g1 is through"],
           confirm=(reply_id, [(calls[0], True)], []))
    wait_started(gates, "g1")
    state, version = store.load_versioned(key("fence"))
    assert state.pending is not None  # B saves once the tool is done

    # Interrupting here would fence B out and record the tool as INTERRUPTED: B holds
    # the session's lease, so the interrupt writes nothing.
    assert interrupt_here(store, "fence") is False
    assert store.load_versioned(key("fence"))[1] == version

    open_gate(gates, "g1")
    resumed = ok(b.result())
    assert resumed.reply == "g1 is through"
    assert stored(store, "fence") == ["user: wait for g1", "assistant: call:c1",
                                      "tool: result:c1:SUCCESS", "assistant: g1 is through"]


@pytest.mark.timeout(60)
def test_interrupting_a_pause_nobody_serves_takes_the_lease_and_the_version(
    pool: Pool, spec: Spec, store: Any, gates: Path
) -> None:
    a, b = pool.get(0), pool.get(1)
    common: dict[str, Any] = {"spec": spec, "session": "closed", "gates": str(gates),
                              "ask": ("gate",)}
    ok(a.run("call", text="wait for g2", **common,
             script=[[ToolUseBlock("c1", "gate", {"name": "g2"})]]))
    version = store.load_versioned(key("closed"))[1]
    assert interrupt_here(store, "closed") is True
    state, after = store.load_versioned(key("closed"))
    assert after == version + 1 and state.pending is None
    assert stored(store, "closed") == ["user: wait for g2", "assistant: call:c1",
                                       "tool: result:c1:INTERRUPTED"]
    assert interrupt_here(store, "closed") is False  # nothing is paused any more
    # The lease went with it: the next call does not wait for it.
    again = ok(b.run("call", text="next", **common, script=["hello"], wait=0.5))
    assert again.reply == "hello"


def test_an_interrupt_that_finds_newer_state_writes_nothing(spec: Spec, store: Any,
                                                            pool: Pool, gates: Path) -> None:
    a = pool.get(0)
    ok(a.run("call", spec=spec, session="raced", text="wait for g3", gates=str(gates),
             ask=("gate",), script=[[ToolUseBlock("c1", "gate", {"name": "g3"})]]))
    loaded = store.aload_versioned

    async def then_a_lease_less_writer_saves(k: Any) -> Any:
        state, version = await loaded(k)
        newer = state.model_copy(deep=True)
        newer.data["written"] = "elsewhere"
        store.save(k, newer)  # no lease, no version: what the interrupt must not be
        return state, version

    store.aload_versioned = then_a_lease_less_writer_saves
    assert interrupt_here(store, "raced") is False
    del store.aload_versioned
    state = store.load(key("raced"))
    assert state.data == {"written": "elsewhere"} and state.pending is not None
