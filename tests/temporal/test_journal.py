"""Temporal-run calls whose events go through the run journal (issue #27, items 1 and 3).

The workers' agents are built on a store the test shares with them (Redis, a SQLite
file); the caller reads each reply from that store's journal, where the workflow appends
it. A worker killed while a tool runs leaves every event journaled exactly once; a
pause and its answer are two runs; a server started with ``--engine temporal`` sends
the journal's ids, and a client reconnecting to another server resumes there.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from _services import redis_url
from model.openai_server import OpenAIServer, Reply, text, tool_call

from rx_agent import (
    AgentEvent,
    AgentResultEvent,
    ConfirmResult,
    GenerateReason,
    RequireUserConfirmEvent,
    RuntimeContext,
    UserConfirmResultEvent,
    session_store_from_url,
    subscribe_durable_events,
)
from rx_agent.session import ANONYMOUS_USER, SessionKey, SessionStore
from rx_agent.temporal import TemporalAgent, TemporalCallError, Timeouts, connect

from .conftest import Workers
from .test_temporal import _crash_script, _final, _lines, _serve_quick, _until

__all__ = ["redis_url"]

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def shared(redis_url: str) -> str:
    """A Redis store URL of this test's own (its keys under a fresh prefix)."""
    return f"{redis_url}?prefix=tj{time.time_ns()}"


async def _journaled(store: SessionStore, session: str, user: str | None = None,
                     run_id: str | None = None) -> list[Any]:
    return [e async for e in _entries(store, session, user, run_id)]


async def _entries(store: SessionStore, session: str, user: str | None,
                   run_id: str | None) -> Any:
    key = SessionKey(user or ANONYMOUS_USER, session)
    async for entry in store.journal().follow(key, 0, run_id=run_id, live=False):  # type: ignore[attr-defined]
        yield entry


async def test_a_killed_worker_leaves_each_event_journaled_once(
    workers: Workers, model_server: OpenAIServer, shared: str,
) -> None:
    counts = Path(workers.env["RX_TEST_COUNTS"])
    model_server.script(*_crash_script())
    workers.start("temporal_agents:build_shared", "--store", shared)
    workers.start("temporal_agents:build_shared", "--store", shared)
    store = session_store_from_url(shared)
    client = await connect(workers.address)
    agent = TemporalAgent(client, "crashy", workers.queue, timeouts=Timeouts(heartbeat=1.5),
                          store=store)
    ctx = RuntimeContext(session_id="crash")
    events: list[AgentEvent] = []
    # Another reader follows the session's journal live while the call runs.
    follower = subscribe_durable_events(store, "crash", run_id=ctx.run_id)
    seen: list[AgentEvent] = []
    done = asyncio.get_running_loop().create_future()
    subscription = follower.subscribe(lambda e: seen.append(e.event) if not e.is_end else None,
                                      done.set_exception, lambda: done.set_result(None))

    async def call() -> None:
        async for event in agent.astream("go", ctx):
            events.append(event)

    task = asyncio.create_task(call())
    await _until(lambda: bool(_lines(counts / "slow.start")))
    victim = _lines(counts / "slow.start")[0]
    workers.kill(victim)
    (counts / "release").touch()
    await asyncio.wait_for(task, 120)
    await asyncio.wait_for(done, 30)
    subscription.dispose()

    assert len(model_server.requests) == 3  # no model call again
    assert len(_lines(counts / "quick.finish")) == 1
    assert len(_lines(counts / "slow.finish")) == 1
    assert _final(events).text == "quick 1, slow 2."
    # Every event once, in the run's order: what the caller got is what the journal holds
    # and what the live follower saw, indices 0..n-1 and the end.
    entries = await _journaled(store, "crash", run_id=ctx.run_id)
    assert [e.index for e in entries] == list(range(len(entries)))
    assert entries[-1].is_end and entries[-1].status == "completed"
    kept = [e.event for e in entries[:-1]]
    assert [e.model_dump() for e in kept] == [e.model_dump() for e in events]
    assert [e.model_dump() for e in seen] == [e.model_dump() for e in events]
    assert [type(e).__name__ for e in events].count("ToolResultEndEvent") == 2
    # The state the caller reads after the end is the one the workflow saved.
    assert ctx.agent_state is not None
    assert [m.role for m in ctx.agent_state.context] == ["user", "assistant", "tool",
                                                         "assistant", "tool", "assistant"]
    # The workflow kept no event (they are in the journal, not in its history).
    state = await client.get_workflow_handle(agent.workflow_id(ctx)).query("state")
    assert state["events"] == len(events)
    store.close()


async def test_a_pause_and_its_answer_are_two_runs_of_the_journal(
    workers: Workers, model_server: OpenAIServer, tmp_path: Path,
) -> None:
    shared = f"sqlite:///{tmp_path / 'sessions.db'}"
    model_server.script(
        Reply([tool_call(0, id="d1", name="deploy", arguments='{"env": "prod"}')],
              finish_reason="tool_calls"),
        Reply([text("Deployed to prod.")]))
    first = workers.start("temporal_agents:build_careful_shared", "--store", shared)
    store = session_store_from_url(shared)
    client = await connect(workers.address)
    agent = TemporalAgent(client, "careful", workers.queue, timeouts=Timeouts(heartbeat=1.5),
                          store=store)
    ctx = RuntimeContext(session_id="hitl", user_id="ann")
    events = [e async for e in agent.astream("ship it", ctx)]
    assert _final(events).generate_reason is GenerateReason.PERMISSION_ASKING
    ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    assert ctx.agent_state is not None and ctx.agent_state.pending is not None
    workers.kill(first.pid)
    workers.start("temporal_agents:build_careful_shared", "--store", shared)
    answer = UserConfirmResultEvent(reply_id=ask.reply_id,
                                    confirm_results=[ConfirmResult(ask.tool_calls[0], True)])
    again = RuntimeContext(session_id="hitl", user_id="ann")
    resumed = [e async for e in agent.astream(answer, again)]
    assert _final(resumed).text == "Deployed to prod."
    assert again.agent_state is not None and again.agent_state.pending is None

    entries = await _journaled(store, "hitl", "ann")
    runs = list(dict.fromkeys(e.run_id for e in entries))
    assert runs == [ctx.run_id, again.run_id]
    for run, got in ((ctx.run_id, events), (again.run_id, resumed)):
        mine = [e for e in entries if e.run_id == run]
        assert mine[-1].is_end and mine[-1].status == "completed"
        assert [e.event.model_dump() for e in mine[:-1]] == [e.model_dump() for e in got]
    store.close()


async def test_workers_on_a_store_without_a_shared_journal_are_a_clear_error(
    workers: Workers, model_server: OpenAIServer, tmp_path: Path,
) -> None:
    model_server.script(Reply([text("never")]))
    workers.start("temporal_agents:build")  # its own in-memory store
    store = session_store_from_url(f"sqlite:///{tmp_path / 'mine.db'}")
    client = await connect(workers.address)
    agent = TemporalAgent(client, "crashy", workers.queue, store=store)
    with pytest.raises(TemporalCallError, match="cannot share") as caught:
        await asyncio.wait_for(agent.acall("hi", RuntimeContext(session_id="x")), 60)
    assert "rx-agent worker --store" in str(caught.value)
    assert model_server.requests == []  # failed before the model was called
    store.close()
    with pytest.raises(TypeError, match="keeps no run journal"):
        TemporalAgent(client, "crashy", workers.queue, store=object())  # type: ignore[arg-type]


def test_serve_on_temporal_sends_the_journals_ids_and_resumes_on_another_server(
    workers: Workers, model_server: OpenAIServer, shared: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import httpx

    from rx_agent.serve._cli import ServeConfig, build_app

    counts = _serve_quick(workers, model_server, "quick ", "5.")
    workers.start("temporal_agents:build_shared", "--store", shared)
    monkeypatch.setenv("RX_TEST_MODEL_URL", model_server.url)
    monkeypatch.setenv("RX_TEST_COUNTS", str(counts))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))

    def server() -> Any:
        return build_app(ServeConfig(target="temporal_agents:build_shared", engine="temporal",
                                     temporal=workers.address, task_queue=workers.queue,
                                     store=shared))

    one, two = server(), server()

    def frames(body: str) -> list[tuple[str, str]]:
        out = []
        for block in body.strip().split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
            if "id" in fields:
                out.append((fields["id"], fields["event"]))
        return out

    async def ask() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=one),
                                     base_url="http://one") as a, \
                httpx.AsyncClient(transport=httpx.ASGITransport(app=two),
                                  base_url="http://two") as b:
            answer = await a.post("/v1/sessions/s1/messages", json={"message": "go"},
                                  headers={"Accept": "text/event-stream"}, timeout=60)
            assert answer.status_code == 200, answer.text
            sent = frames(answer.text)
            run = answer.headers["x-run-id"]
            assert [i for i, _ in sent] == [f"{run}.{n}" for n in range(len(sent))]
            # A client that got the first three frames reconnects to the other server.
            rest = await b.get(f"/v1/sessions/s1/runs/{run}/events",
                               headers={"Last-Event-ID": sent[2][0]}, timeout=60)
            assert rest.status_code == 200, rest.text
            again = frames(rest.text)
            assert again[:-1] == sent[3:]
            assert again[-1][1] == "run_end"
            state = (await b.get("/v1/sessions/s1")).json()
            assert [m["role"] for m in state["messages"]] == ["user", "assistant", "tool",
                                                              "assistant"]

    asyncio.run(ask())
    store = session_store_from_url(shared)
    entries = asyncio.run(_journaled(store, "s1"))
    assert [e.type for e in entries].count("run_end") == 1  # the server wrote none itself
    assert sum(1 for e in entries if e.type == AgentResultEvent.model_fields["type"].default) == 1
    store.close()


async def test_a_batch_appended_again_after_a_lost_worker_is_kept_once(tmp_path: Path) -> None:
    # A worker that appended a batch and died before the workflow recorded it leaves the
    # next worker to run the same local activity again: the journal keeps it once.
    from rx_agent import ReActAgent, ScriptedModel
    from rx_agent.temporal._activities import Activities

    store = session_store_from_url(f"sqlite:///{tmp_path / 's.db'}")
    agent = ReActAgent(name="a", model=ScriptedModel([]), session_store=store)
    acts = Activities({"a": agent})
    now = time.time()  # entries older than the retention (24 h) would be trimmed at once
    batch = {"agent": "a", "user_id": "u", "session_id": "s",
             "runs": [["r1", [[0, "x", "{}", now], [1, "y", "{}", now]]]]}
    assert await acts.journal_append(batch) == 2
    assert await acts.journal_append(batch) == 0  # already there: nothing appended
    more = {**batch, "runs": [["r1", [[2, "run_end", '{"status": "completed"}', now]]],
                              ["r2", [[0, "x", "{}", now]]]]}
    assert await acts.journal_append(more) == 4
    entries = await _journaled(store, "s", "u")
    assert [(e.run_id, e.index) for e in entries] == [("r1", 0), ("r1", 1), ("r1", 2),
                                                      ("r2", 0)]
    with pytest.raises(Exception, match="cannot share"):
        await Activities({"a": ReActAgent(name="a", model=ScriptedModel([]))}).journal_append(
            batch)
    store.close()
