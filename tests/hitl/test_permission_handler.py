"""The permission handler (Blade's ``permissionHandler``, issue 24 item 6): a callback
asked about "ask" tool calls while the reply runs, before it would pause for a human."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from reactivex import operators as ops

from rx_agent import (
    AgentEvent,
    AllToolsDeniedEvent,
    ConfirmResult,
    GenerateReason,
    Msg,
    PermissionRule,
    ReActAgent,
    RequireUserConfirmEvent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
    UserConfirmResultEvent,
)

RAN: list[tuple[str, dict[str, Any]]] = []


def delete_file(path: str) -> str:
    """Delete a file."""
    RAN.append(("delete_file", {"path": path}))
    return f"deleted {path}"


def read_file(path: str) -> str:
    """Read a file."""
    RAN.append(("read_file", {"path": path}))
    return f"contents of {path}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def toolkit() -> Toolkit:
    tk = Toolkit()
    tk.register_tool(delete_file, permission="ask")
    tk.register_tool(read_file, permission="ask")
    return tk


def call(id_: str, name: str, **args: Any) -> ToolUseBlock:
    return ToolUseBlock(id=id_, name=name, input=args)


def agent_with(handler: Any, *script: Any, **kwargs: Any) -> ReActAgent:
    model = ScriptedModel(list(script) or [[call("c1", "delete_file", path="/tmp/a")], "done"])
    return ReActAgent(name="ops", model=model, toolkit=toolkit(),
                      permission_handler=handler, **kwargs)


def events(agent: ReActAgent, inp: Any, ctx: RuntimeContext) -> list[AgentEvent]:
    return agent.stream(inp, ctx).pipe(ops.to_list()).run()


def results(ctx: RuntimeContext) -> dict[str, ToolResultBlock]:
    assert ctx.agent_state is not None
    return {b.id: b for m in ctx.agent_state.context for b in m.tool_results}


@pytest.mark.parametrize("answer", [True, "allow"])
def test_an_approval_runs_the_call_without_pausing(answer: Any) -> None:
    seen: list[tuple[ToolUseBlock, RuntimeContext]] = []

    def approve(tool_call: ToolUseBlock, ctx: RuntimeContext) -> Any:
        seen.append((tool_call, ctx))
        return answer

    ctx = RuntimeContext(session_id="s", user_id="u1")
    agent = agent_with(approve)
    out = events(agent, "delete /tmp/a", ctx)
    assert not any(isinstance(e, RequireUserConfirmEvent) for e in out)
    assert out[-2].result.generate_reason is GenerateReason.MODEL_STOP  # type: ignore[attr-defined]
    assert RAN == [("delete_file", {"path": "/tmp/a"})]
    [(asked, handler_ctx)] = seen
    assert asked.id == "c1" and handler_ctx.user_id == "u1"
    assert handler_ctx.agent_state is ctx.agent_state


@pytest.mark.parametrize(("answer", "text"), [
    (False, "Denied by the permission handler."),
    ("deny", "Denied by the permission handler."),
    (ConfirmResult(call("c1", "delete_file", path="/tmp/a"), False, reason="not in prod"),
     "not in prod"),
])
def test_a_denial_is_a_denied_result_and_the_reply_goes_on(answer: Any, text: str) -> None:
    ctx = RuntimeContext(session_id="s")
    out = events(agent_with(lambda c, x: answer), "delete", ctx)
    assert RAN == []
    denied = results(ctx)["c1"]
    assert denied.state is ToolResultState.DENIED and denied.text == text
    # Every call of the batch was denied, as when a human denies them all.
    assert any(isinstance(e, AllToolsDeniedEvent) for e in out)
    assert out[-2].result.text == "done"  # type: ignore[attr-defined]


def test_an_edited_confirmation_runs_and_stores_what_ran() -> None:
    def safer(tool_call: ToolUseBlock, ctx: RuntimeContext) -> ConfirmResult:
        return ConfirmResult(call(tool_call.id, tool_call.name, path="/tmp/sandbox/a"), True,
                             rules=[PermissionRule("read_file", "allow")])

    ctx = RuntimeContext(session_id="s")
    events(agent_with(safer), "delete", ctx)
    assert RAN == [("delete_file", {"path": "/tmp/sandbox/a"})]
    assert ctx.agent_state is not None
    stored = ctx.agent_state.context[1].tool_calls[0]
    assert stored.input == {"path": "/tmp/sandbox/a"}
    # The rules it returned are remembered for the session.
    assert [r.pattern for r in ctx.agent_state.permission_rules] == ["read_file"]


def test_no_decision_pauses_for_a_human_as_before() -> None:
    asked: list[str] = []

    def only_reads(tool_call: ToolUseBlock, ctx: RuntimeContext) -> bool | None:
        asked.append(tool_call.id)
        return True if tool_call.name == "read_file" else None

    agent = agent_with(only_reads,
                       [call("c1", "read_file", path="a"), call("c2", "delete_file", path="b")],
                       "done")
    ctx = RuntimeContext(session_id="s")
    out = events(agent, "go", ctx)
    [pause] = [e for e in out if isinstance(e, RequireUserConfirmEvent)]
    assert [c.id for c in pause.tool_calls] == ["c2"]  # only what it left to a human
    assert RAN == []  # no tool of a paused batch runs
    answer = UserConfirmResultEvent(reply_id=pause.reply_id,
                                    confirm_results=[ConfirmResult(pause.tool_calls[0], True)])
    events(agent, answer, ctx)
    assert RAN == [("read_file", {"path": "a"}), ("delete_file", {"path": "b"})]
    # The resumed batch asks the handler again about the call it had allowed.
    assert asked == ["c1", "c2", "c1"]


def test_an_async_handler_can_wait_for_a_ui() -> None:
    # A UI-driven approval: the reply waits (it does not end) until the user clicks.
    clicks: asyncio.Queue[bool] = asyncio.Queue()
    shown: list[str] = []

    async def ui(tool_call: ToolUseBlock, ctx: RuntimeContext) -> bool:
        shown.append(f"{tool_call.name}({tool_call.input['path']})")
        return await clicks.get()

    async def main() -> Msg:
        agent = agent_with(ui)
        reply = asyncio.ensure_future(agent.acall("delete", RuntimeContext(session_id="s")))
        while not shown:
            await asyncio.sleep(0.01)
        assert not reply.done() and RAN == []
        await clicks.put(True)
        return await asyncio.wait_for(reply, 5)

    assert asyncio.run(main()).text == "done"
    assert shown == ["delete_file(/tmp/a)"] and RAN == [("delete_file", {"path": "/tmp/a"})]


def test_a_plain_handler_runs_off_the_event_loop() -> None:
    threads: list[int] = []

    def blocking(tool_call: ToolUseBlock, ctx: RuntimeContext) -> bool:
        threads.append(threading.get_ident())  # e.g. input() in a terminal
        return True

    async def main() -> int:
        await agent_with(blocking).acall("delete", RuntimeContext(session_id="s"))
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads and threads[0] != loop_thread


def test_a_failing_handler_denies_the_call(caplog: pytest.LogCaptureFixture) -> None:
    def broken(tool_call: ToolUseBlock, ctx: RuntimeContext) -> bool:
        raise ConnectionError("approval service down")

    ctx = RuntimeContext(session_id="s")
    events(agent_with(broken), "delete", ctx)
    assert RAN == []
    assert results(ctx)["c1"].text == \
        "permission handler failed: ConnectionError: approval service down"
    assert "permission handler failed" in caplog.text


def test_rules_decide_first_and_allowed_calls_never_reach_the_handler() -> None:
    asked: list[str] = []

    def handler(tool_call: ToolUseBlock, ctx: RuntimeContext) -> bool:
        asked.append(tool_call.name)
        return True

    agent = agent_with(handler,
                       [call("c1", "read_file", path="a"), call("c2", "delete_file", path="b")],
                       "done", permission_rules=[PermissionRule("read_file", "allow"),
                                                 PermissionRule("delete_file", "deny")])
    ctx = RuntimeContext(session_id="s")
    events(agent, "go", ctx)
    assert asked == []
    assert results(ctx)["c2"].state is ToolResultState.DENIED
    assert RAN == [("read_file", {"path": "a"})]


@pytest.mark.parametrize("answer", [True, None])
def test_interrupt_while_the_handler_decides_runs_no_tool_and_does_not_pause(
    answer: bool | None,
) -> None:
    ctx = RuntimeContext(session_id="s")

    async def main() -> Msg:
        holder: dict[str, Any] = {}

        async def slow(tool_call: ToolUseBlock, handler_ctx: RuntimeContext) -> bool | None:
            holder["agent"].interrupt(ctx)  # the user stopped the reply meanwhile
            return answer

        agent = agent_with(slow)
        holder["agent"] = agent
        return await agent.acall("delete", ctx)

    reply = asyncio.run(main())
    assert reply.generate_reason is GenerateReason.INTERRUPTED
    assert RAN == []
    assert ctx.agent_state is not None and ctx.agent_state.pending is None
    assert results(ctx)["c1"].state is ToolResultState.INTERRUPTED


@pytest.mark.parametrize(("answer", "error", "message"), [
    ("maybe", TypeError, "answered 'maybe' for tool call 'c1'; a str answer is 'allow', "
                         "'deny' or 'ask'"),
    (1, TypeError, "answered int for tool call 'c1'; answer True / False"),
    (ConfirmResult(call("other", "delete_file"), True), ValueError,
     "answered for tool call 'other' \\(delete_file\\) when asked about 'c1'"),
])
def test_a_bad_answer_is_a_clear_error(answer: Any, error: type[Exception],
                                       message: str) -> None:
    ctx = RuntimeContext(session_id="s")
    with pytest.raises(error, match=message):
        agent_with(lambda c, x: answer).call_sync("delete", ctx)
    assert RAN == []
    # The session keeps no tool call without its result.
    assert set(results(ctx)) == {"c1"}


def test_the_builder_and_constructor_check_the_handler() -> None:
    model = ScriptedModel([])
    with pytest.raises(TypeError, match="permission_handler must be callable"):
        ReActAgent.builder().name("a").model(model).permission_handler("yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="is called as fn\\(call, ctx\\); approve does not"):
        def approve(tool_call: ToolUseBlock) -> bool:
            return True

        ReActAgent(name="a", model=model, permission_handler=approve)  # type: ignore[arg-type]
    built = (ReActAgent.builder().name("a").model(model)
             .permission_handler(lambda c, x: True).build())
    assert built.config.permission_handler is not None
