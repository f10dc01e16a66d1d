"""Tools that have not started never start after an interrupt (issue #24, item 2).

``interrupt()`` is called from the caller's event callback at every event index of a
two-round reply (three calls, then two), with sequential and concurrent batches, with
and without an ``on_acting`` layer or a tool middleware: no tool function is entered
once ``interrupt()`` has returned, and every call gets exactly one result before the
final message.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

import pytest
from conftest import make_agent, of_type, tool_results

from rx_agent import (
    AgentEvent,
    AgentResultEvent,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultState,
    ToolUseBlock,
    tool,
)
from rx_agent.testing import assert_no_orphan_tool_calls, assert_well_formed

ROUNDS = [["c0", "c1", "c2"], ["d0", "d1"]]


class PassThrough(MiddlewareBase):
    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_ACTING}

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return next(input)


def _pass(tool: Any, ctx: Any, call: Any, next: Any) -> Any:
    return next(call)


class Inline(Executor):
    """Runs a sync tool at once on the loop's thread: a concurrent batch of sync tools
    whose function starts exactly when the runtime hands it over."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        done: Future[Any] = Future()
        done.set_result(fn(*args, **kwargs))
        return done


class Held(Executor):
    """Keeps the jobs until the test runs them on a thread, cancelled or not (a worker
    that picked a job up between interrupt() and the cut)."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Callable[[], Any], Future[Any]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        done: Future[Any] = Future()
        self.jobs.append((lambda: fn(*args, **kwargs), done))
        return done


def _agent(entered: list[tuple[str, bool]], returned: list[bool], *, concurrent: bool,
           sync: bool, layer: str) -> Any:
    own = [_pass] if layer == "tool-middleware" else []
    if sync:
        @tool(concurrency_safe=concurrent, middlewares=own)
        def effect(tag: str) -> str:
            """A side effect."""
            entered.append((tag, returned[0]))
            return f"did {tag}"
    else:
        @tool(concurrency_safe=concurrent, middlewares=own)  # type: ignore[no-redef]
        async def effect(tag: str) -> str:
            """A side effect."""
            entered.append((tag, returned[0]))
            await asyncio.sleep(0)
            return f"did {tag}"

    script: list[Any] = [[ToolUseBlock(i, "effect", {"tag": i}) for i in ids] for ids in ROUNDS]
    script.append("done")
    # Concurrent sync tools start on the loop's thread: "entered after interrupt()
    # returned" is then exact (on a worker thread it is measured a few bytecodes after
    # the runtime's last check; test_a_sync_call_waiting_for_a_thread_... covers that).
    executor = Inline() if sync and concurrent else None
    return make_agent(ScriptedModel(script), toolkit=Toolkit([effect], executor=executor),
                      middlewares=[PassThrough()] if layer == "on_acting" else [])


async def _run(agent: Any, ctx: RuntimeContext, at: int | None,
               returned: list[bool]) -> list[AgentEvent]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    events: list[AgentEvent] = []

    def on_next(event: AgentEvent) -> None:
        events.append(event)
        if len(events) - 1 == at:
            agent.interrupt(ctx)
            returned[0] = True  # from here on, no tool may be entered

    def on_error(exc: Exception) -> None:
        done.set_exception(exc)

    agent.stream("go", ctx).subscribe(on_next, on_error, lambda: done.set_result(None))
    await asyncio.wait_for(done, 5)
    return events


@pytest.mark.parametrize("layer", ["none", "on_acting", "tool-middleware"])
@pytest.mark.parametrize("sync", [False, True], ids=["async-tool", "sync-tool"])
@pytest.mark.parametrize("concurrent", [False, True], ids=["sequential", "concurrent"])
async def test_no_tool_starts_after_interrupt_returned_at_any_event(
    concurrent: bool, sync: bool, layer: str,
) -> None:
    entered: list[tuple[str, bool]] = []
    returned = [False]
    whole = await _run(_agent(entered, returned, concurrent=concurrent, sync=sync, layer=layer),
                       RuntimeContext(session_id="s"), None, returned)
    assert [tag for tag, _ in entered] == [i for ids in ROUNDS for i in ids] or concurrent
    assert len(whole) > 20
    for at in range(len(whole)):
        entered.clear()
        returned[0] = False
        ctx = RuntimeContext(session_id="s")
        agent = _agent(entered, returned, concurrent=concurrent, sync=sync, layer=layer)
        events = await _run(agent, ctx, at, returned)
        late = [tag for tag, after in entered if after]
        assert late == [], f"interrupt at event #{at} ({type(whole[at]).__name__}): {late} started"
        assert_well_formed(events, complete=False)  # a cut model call has no end event
        assert_well_formed([e for e in events if type(e).__name__.startswith("ToolResult")])
        context = ctx.agent_state.context
        assert_no_orphan_tool_calls(context)
        results = tool_results(context)
        assert len({r.id for r in results}) == len(results), f"#{at}: two results for a call"
        starts = Counter(e.tool_call_id for e in of_type(events, ToolResultStartEvent))
        ends = Counter(e.tool_call_id for e in of_type(events, ToolResultEndEvent))
        assert starts == ends == Counter(r.id for r in results), f"#{at}: {starts} {ends}"
        (final,) = of_type(events, AgentResultEvent)
        last_result = max((i for i, e in enumerate(events) if isinstance(e, ToolResultEndEvent)),
                          default=-1)
        assert events.index(final) > last_result
        ran = {tag for tag, _ in entered}
        for result in results:  # a call that never started says so
            if result.id not in ran:
                assert result.state is not ToolResultState.SUCCESS, (at, result)
        if final.result.generate_reason is not GenerateReason.INTERRUPTED:
            assert at >= events.index(final), f"#{at} was not interrupted"


async def test_a_sync_call_waiting_for_a_thread_is_not_entered_after_interrupt() -> None:
    entered: list[str] = []
    held = Held()

    @tool(concurrency_safe=True)
    def effect(tag: str) -> str:
        """A side effect."""
        entered.append(tag)
        return f"did {tag}"

    model = ScriptedModel([[ToolUseBlock("c0", "effect", {"tag": "c0"}),
                            ToolUseBlock("c1", "effect", {"tag": "c1"})], "never"])
    agent = make_agent(model, toolkit=Toolkit([effect], executor=held))
    ctx = RuntimeContext(session_id="s")
    reply = asyncio.ensure_future(agent.acall("go", ctx))
    while len(held.jobs) < 2:  # both calls are handed to the executor
        await asyncio.sleep(0.001)
    agent.interrupt(ctx)
    worker = threading.Thread(target=lambda: [job() for job, _ in held.jobs])
    worker.start()  # picked up after interrupt() returned, before the cut
    worker.join()
    msg = await asyncio.wait_for(reply, 5)
    assert entered == []
    assert msg.generate_reason is GenerateReason.INTERRUPTED
    results = tool_results(ctx.agent_state.context)
    assert [(r.id, r.state) for r in results] == [("c0", ToolResultState.INTERRUPTED),
                                                  ("c1", ToolResultState.INTERRUPTED)]
