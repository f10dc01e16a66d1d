"""Tools that have not started never start after an interrupt (issue #24, item 2).

``interrupt()`` is called from the caller's event callback at every event index of a
two-round reply (three calls, then two), with sequential and concurrent batches, with
and without an ``on_acting`` layer: no tool function is entered once ``interrupt()``
has returned, and every call gets exactly one result before the final message.
"""

from __future__ import annotations

import asyncio
from collections import Counter
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


def _agent(entered: list[tuple[str, bool]], returned: list[bool], *, concurrent: bool,
           sync: bool, layer: bool) -> Any:
    if sync:
        @tool(concurrency_safe=concurrent)
        def effect(tag: str) -> str:
            """A side effect."""
            entered.append((tag, returned[0]))
            return f"did {tag}"
    else:
        @tool(concurrency_safe=concurrent)  # type: ignore[no-redef]
        async def effect(tag: str) -> str:
            """A side effect."""
            entered.append((tag, returned[0]))
            await asyncio.sleep(0)
            return f"did {tag}"

    script: list[Any] = [[ToolUseBlock(i, "effect", {"tag": i}) for i in ids] for ids in ROUNDS]
    script.append("done")
    return make_agent(ScriptedModel(script), toolkit=Toolkit([effect]),
                      middlewares=[PassThrough()] if layer else [])


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


@pytest.mark.parametrize("layer", [False, True], ids=["no-layer", "on_acting-layer"])
@pytest.mark.parametrize("sync", [False, True], ids=["async-tool", "sync-tool"])
@pytest.mark.parametrize("concurrent", [False, True], ids=["sequential", "concurrent"])
async def test_no_tool_starts_after_interrupt_returned_at_any_event(
    concurrent: bool, sync: bool, layer: bool,
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
