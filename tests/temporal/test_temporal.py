"""Agents on Temporal (issue #27, item 1), on a real dev server the tests start.

Workers are ``rx-agent worker`` processes; the model is a real OpenAI-compatible
server on loopback that counts its requests; the tools count their own runs
(``temporal_agents.py``). A worker killed with SIGKILL while a tool runs: the other
worker finishes the call, no finished model call or tool runs again, and the reply is
the one an uncrashed run gives.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from model.openai_server import OpenAIServer, Reply, text, tool_call

from rx_agent import (
    AgentEvent,
    AgentResultEvent,
    ConfirmResult,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    Msg,
    ReActAgent,
    RequireUserConfirmEvent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    UserConfirmResultEvent,
)
from rx_agent.temporal import (
    TemporalAgent,
    TemporalCallError,
    TemporalUnavailableError,
    Timeouts,
    connect,
)

from .conftest import Workers

pytestmark = pytest.mark.timeout(180)


def _lines(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


async def _until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def _events(agent: TemporalAgent, given: Any, ctx: RuntimeContext) -> list[AgentEvent]:
    return [e async for e in agent.astream(given, ctx)]


def _final(events: list[AgentEvent]) -> Msg:
    results = [e for e in events if isinstance(e, AgentResultEvent)]
    assert len(results) == 1
    return results[0].result


def _shape(msg: Msg) -> Any:
    return (msg.role, [b.model_dump(exclude={"id"}) if b.type != "tool_use" else b.model_dump()
                       for b in msg.content], msg.generate_reason)


def _crash_script() -> list[Reply]:
    return [
        Reply([text("Checking. "), tool_call(0, id="c1", name="quick", arguments='{"x": 1}')],
              finish_reason="tool_calls"),
        Reply([tool_call(0, id="c2", name="slow", arguments='{"x": 2}')],
              finish_reason="tool_calls"),
        Reply([text("quick 1, "), text("slow 2.")]),
    ]


def _serve_quick(workers: Workers, model_server: OpenAIServer, *answer: str) -> Path:
    """A served call's script: the quick tool (released), then ``answer`` as chunks; the
    test counts' directory."""
    counts = Path(workers.env["RX_TEST_COUNTS"])
    (counts / "release").touch()
    model_server.script(
        Reply([tool_call(0, id="q1", name="quick", arguments='{"x": 5}')],
              finish_reason="tool_calls"),
        Reply([text(piece) for piece in answer]))
    return counts


async def test_a_call_survives_a_worker_killed_while_its_tool_runs(
    workers: Workers, model_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = Path(workers.env["RX_TEST_COUNTS"])
    model_server.script(*_crash_script())
    workers.start("temporal_agents:build")
    workers.start("temporal_agents:build")
    client = await connect(workers.address)
    agent = TemporalAgent(client, "crashy", workers.queue, timeouts=Timeouts(heartbeat=1.5))
    ctx = RuntimeContext(session_id="crash")
    call = asyncio.create_task(_events(agent, "go", ctx))
    await _until(lambda: bool(_lines(counts / "slow.start")))
    victim = _lines(counts / "slow.start")[0]
    workers.kill(victim)
    (counts / "release").touch()
    events = await asyncio.wait_for(call, 120)
    final = _final(events)

    # Each model call and each finished tool ran exactly once; only the tool the kill
    # cut short ran again, on the other worker.
    assert len(model_server.requests) == 3
    assert _lines(counts / "quick.start") == _lines(counts / "quick.finish")
    assert len(_lines(counts / "quick.finish")) == 1
    survivor = [p.pid for p in workers.procs if p.pid != victim]
    assert _lines(counts / "slow.start") == [victim, *survivor]
    assert _lines(counts / "slow.finish") == survivor

    # The reply is the one an uncrashed, local run of the same agent gives.
    monkeypatch.setenv("RX_TEST_MODEL_URL", model_server.url)
    local_counts = counts.parent / "local"
    local_counts.mkdir()
    (local_counts / "release").touch()
    monkeypatch.setenv("RX_TEST_COUNTS", str(local_counts))
    from . import temporal_agents

    model_server.script(*_crash_script())
    local = temporal_agents.build()
    local_ctx = RuntimeContext(session_id="crash")
    expected = await local.acall("go", local_ctx)
    await local.model.aclose()
    assert final.text == expected.text == "quick 1, slow 2."
    assert _shape(final) == _shape(expected)
    assert ctx.agent_state is not None and local_ctx.agent_state is not None
    assert [_shape(m) for m in ctx.agent_state.context] == \
        [_shape(m) for m in local_ctx.agent_state.context]
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "AgentStartEvent" and kinds[-1] == "AgentEndEvent"
    assert kinds.count("ToolResultEndEvent") == 2

    # The history replays (the hooks and steps again, the effects from the history)
    # without a nondeterminism error, as a third worker would.
    history = await client.get_workflow_handle(agent.workflow_id(ctx)).fetch_history()
    await _replay(history, workers.queue, temporal_agents.build())


async def _replay(history: Any, queue: str, agent: Any) -> None:
    import concurrent.futures

    from temporalio.worker import Replayer
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    from rx_agent.temporal import AgentWorkflow
    from rx_agent.temporal._registry import register, unregister
    from rx_agent.temporal._worker import PASSTHROUGH

    register(queue, agent)
    executor = concurrent.futures.ThreadPoolExecutor(1)
    try:
        replayer = Replayer(
            workflows=[AgentWorkflow], workflow_task_executor=executor,
            workflow_runner=SandboxedWorkflowRunner(
                restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)))
        await replayer.replay_workflow(history)
    finally:
        unregister(queue, agent)
        executor.shutdown()


async def test_a_paused_call_waits_across_a_worker_restart(
    workers: Workers, model_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = Path(workers.env["RX_TEST_COUNTS"])
    model_server.script(
        Reply([tool_call(0, id="d1", name="deploy", arguments='{"env": "prod"}')],
              finish_reason="tool_calls"),
        Reply([text("Deployed to prod.")]))
    first = workers.start("temporal_agents:build_careful")
    client = await connect(workers.address)
    agent = TemporalAgent(client, "careful", workers.queue, timeouts=Timeouts(heartbeat=1.5))
    ctx = RuntimeContext(session_id="hitl", user_id="ann")
    events = await _events(agent, "ship it", ctx)
    assert _final(events).generate_reason is GenerateReason.PERMISSION_ASKING
    ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    assert ctx.agent_state is not None and ctx.agent_state.pending is not None
    workers.kill(first.pid)  # nobody serves the queue while the call waits
    second = workers.start("temporal_agents:build_careful")
    answer = UserConfirmResultEvent(reply_id=ask.reply_id,
                                    confirm_results=[ConfirmResult(ask.tool_calls[0], True)])
    resumed = await asyncio.wait_for(_events(agent, answer, ctx), 120)
    assert _final(resumed).text == "Deployed to prod."
    assert _lines(counts / "deploy.finish") == [second.pid]
    assert len(model_server.requests) == 2
    assert ctx.agent_state is not None and ctx.agent_state.pending is None
    # The workflow of the pause and its answer replays without a nondeterminism error.
    from . import temporal_agents

    monkeypatch.setenv("RX_TEST_MODEL_URL", model_server.url)
    handle = client.get_workflow_handle(agent.workflow_id(ctx))
    assert (await handle.result())["replies"] == 2
    await _replay(await handle.fetch_history(), workers.queue, temporal_agents.build_careful())
    # A next call of the session starts a new workflow on the saved session.
    model_server.script(Reply([text("Nothing left to deploy.")]))
    assert (await agent.acall("anything else?", ctx)).text == "Nothing left to deploy."
    assert model_server.requests[-1].body["messages"][-1]["content"] == "anything else?"
    assert len(model_server.requests[-1].body["messages"]) == 5  # the whole session


async def test_interrupt_ends_the_running_reply_and_its_tool(
    workers: Workers, model_server: OpenAIServer,
) -> None:
    counts = Path(workers.env["RX_TEST_COUNTS"])
    model_server.script(Reply([tool_call(0, id="c9", name="slow", arguments='{"x": 9}')],
                              finish_reason="tool_calls"))
    workers.start("temporal_agents:build")
    client = await connect(workers.address)
    agent = TemporalAgent(client, "crashy", workers.queue, timeouts=Timeouts(heartbeat=1.5))
    ctx = RuntimeContext(session_id="stop")
    call = asyncio.create_task(_events(agent, "go", ctx))
    await _until(lambda: bool(_lines(counts / "slow.start")))
    assert await agent.interrupt(ctx)
    events = await asyncio.wait_for(call, 60)
    assert _final(events).generate_reason is GenerateReason.INTERRUPTED
    # The activity hears of it at its next heartbeat, and the tool is cancelled.
    await _until(lambda: bool(_lines(counts / "slow.cancelled")))
    (counts / "release").touch()
    await asyncio.sleep(0.3)
    assert _lines(counts / "slow.finish") == []
    assert len(model_server.requests) == 1


def _dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def test_an_unreachable_server_is_a_clear_error() -> None:
    address = _dead_address()
    with pytest.raises(TemporalUnavailableError) as caught:
        await connect(address, timeout=10)
    assert address in str(caught.value) and "'.[temporal]'" in str(caught.value)


def test_the_worker_command_names_an_unreachable_server(tmp_path: Path) -> None:
    address = _dead_address()
    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parent.parent), str(here)]),
           "RX_TEST_MODEL_URL": "http://127.0.0.1:9/v1", "RX_TEST_COUNTS": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "rx_agent", "worker", "temporal_agents:build", "--temporal",
         address, "--task-queue", "q"], cwd=here, env=env, capture_output=True, text=True,
        check=False, timeout=60)
    assert done.returncode == 1, done.stderr
    assert address in done.stderr and "'.[temporal]'" in done.stderr
    assert "serving" not in done.stderr


def test_the_overhead_benchmark_runs(temporal_address: str) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "bench_temporal.py"), "--smoke",
         "--temporal", temporal_address],
        env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True,
        check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "overhead per call" in done.stdout and "ratio temporal / local" in done.stdout


def test_the_example_runs_a_call_and_a_pause_across_workers(temporal_address: str) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "examples" / "temporal_durable.py")],
        env={**os.environ, "PYTHONPATH": str(root), "RX_AGENT_TEMPORAL": temporal_address},
        capture_output=True, text=True, check=False, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "answer: Order 1234 has shipped.",
        "paused: PERMISSION_ASKING ['refund']",
        "no worker now; the pause waits in its workflow",
        "resumed: Order 1234 is refunded. refunds: ['1234']",
        "session: 8 messages",
    ]


def test_serve_with_the_temporal_engine_starts_each_call_as_a_workflow(
    workers: Workers, model_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import httpx

    from rx_agent.serve._cli import ServeConfig, ServeError, build_app

    counts = _serve_quick(workers, model_server, "quick 5.")
    served = workers.start("temporal_agents:build")
    monkeypatch.setenv("RX_TEST_MODEL_URL", model_server.url)
    monkeypatch.setenv("RX_TEST_COUNTS", str(counts))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    app = build_app(ServeConfig(target="temporal_agents:build", engine="temporal",
                                temporal=workers.address, task_queue=workers.queue))

    async def ask() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://serve") as http:
            answer = await http.post("/v1/sessions/s1/messages", json={"message": "go"},
                                     headers={"Accept": "application/json"}, timeout=60)
            assert answer.status_code == 200, answer.text
            assert answer.json()["content"][0]["text"] == "quick 5."
            state = (await http.get("/v1/sessions/s1")).json()
            assert [m["role"] for m in state["messages"]] == ["user", "assistant", "tool",
                                                              "assistant"]

    asyncio.run(ask())
    assert _lines(counts / "quick.finish") == [served.pid]  # the worker ran the tool
    with pytest.raises(ServeError, match=_dead_address().split(":")[0]):
        build_app(ServeConfig(target="temporal_agents:build", engine="temporal",
                              temporal=_dead_address(), task_queue="q"))


class _Where(MiddlewareBase):
    """Records where the hooks around the effects run."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool, str]] = []

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL, ExtensionPoint.ON_ACTING}

    def _note(self, point: str) -> None:
        from temporalio import workflow

        self.seen.append((point, workflow.in_workflow(), threading.current_thread().name))

    def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        self._note("model")
        return next(input)

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        self._note("acting")
        return next(input)


_TOOL_RAN: list[bool] = []


async def where_am_i() -> str:
    """Say where the tool runs."""
    from temporalio import activity

    _TOOL_RAN.append(activity.in_activity())
    return "in an activity"


async def test_hooks_run_in_the_workflow_and_a_replay_makes_the_same_events(
    temporal_address: str,
) -> None:
    from rx_agent.temporal import AgentWorker

    where = _Where()
    agent = ReActAgent(
        name="where", model=ScriptedModel([[ToolUseBlock(id="w1", name="where_am_i",
                                                         input={})], ["Found it."]]),
        toolkit=Toolkit([where_am_i]), middlewares=[where])
    client = await connect(temporal_address)
    queue = f"where-{time.time_ns()}"
    # No workflow cache: every workflow task replays the history from the start.
    async with AgentWorker(client, queue, [agent], max_cached_workflows=0):
        remote = TemporalAgent(client, "where", queue)
        ctx = RuntimeContext(session_id="w")
        events = await _events(remote, "where?", ctx)
        assert _final(events).text == "Found it."
        handle = client.get_workflow_handle(remote.workflow_id(ctx))
        await handle.result()
        # A query of the finished workflow replays it from its history: ids and
        # timestamps are the workflow's, so the events are the ones the caller got.
        replayed = await handle.query("read", args=[0, 0])
    assert [e.model_dump(mode="json") for e in events] == replayed["events"]
    assert _TOOL_RAN == [True]
    assert {(point, inside) for point, inside, _ in where.seen} == {
        ("model", True), ("acting", True)}
    assert {thread for _, _, thread in where.seen} == {"rx-agent-workflows_0"}


async def test_a_failed_model_attempt_is_retried_by_the_agents_policy_and_a_refusal_is_not(
    workers: Workers, model_server: OpenAIServer,
) -> None:
    # 503 is retryable: the agent's RetryPolicy (not Temporal's) makes a second attempt,
    # a second activity, after its backoff. 400 is not: the call fails with its kind.
    model_server.script(Reply(status=503), Reply([text("second time lucky")]))
    workers.start("temporal_agents:build")
    client = await connect(workers.address)
    agent = TemporalAgent(client, "crashy", workers.queue)
    msg = await agent.acall("hi", RuntimeContext(session_id="retry"))
    assert msg.text == "second time lucky"
    assert len(model_server.requests) == 2

    model_server.script(Reply(status=400, error={"message": "bad request"}))
    with pytest.raises(TemporalCallError) as caught:
        await agent.acall("again", RuntimeContext(session_id="refused"))
    assert "bad request" in str(caught.value), str(caught.value)
    assert len(model_server.requests) == 3  # no retry of a refusal
