"""Human in the loop: permission rules, confirm-and-resume, external execution."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from reactivex import Observable
from reactivex import operators as ops

from rx_agent import (
    ActingInput,
    AgentEvent,
    AgentResultEvent,
    AllToolsDeniedEvent,
    ConfirmResult,
    ExternalExecutionResultEvent,
    GenerateReason,
    MiddlewareBase,
    Msg,
    PermissionRule,
    ReActAgent,
    RequestStopEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    ResumeError,
    Role,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultBlock,
    ToolResultEndEvent,
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


def deploy(env: str) -> str:
    """Deploy (runs outside the agent)."""
    raise AssertionError("external tools never run inside the agent")


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def toolkit(delete: str = "ask", read: str = "allow") -> Toolkit:
    tk = Toolkit()
    tk.register_tool(delete_file, permission=delete)  # type: ignore[arg-type]
    tk.register_tool(read_file, permission=read)  # type: ignore[arg-type]
    tk.register_tool(deploy, external=True)
    return tk


def call(id_: str, name: str, **args: Any) -> ToolUseBlock:
    return ToolUseBlock(id=id_, name=name, input=args)


def events(agent: ReActAgent, inp: Any, ctx: RuntimeContext) -> list[AgentEvent]:
    return agent.stream(inp, ctx).pipe(ops.to_list()).run()


def results_in_context(ctx: RuntimeContext) -> dict[str, ToolResultBlock]:
    assert ctx.agent_state is not None
    return {b.id: b for m in ctx.agent_state.context if m.role is Role.TOOL
            for b in m.tool_results}


def assert_no_orphans(ctx: RuntimeContext) -> None:
    assert ctx.agent_state is not None
    calls = [c.id for m in ctx.agent_state.context for c in m.tool_calls]
    answered = results_in_context(ctx)
    assert [c for c in calls if c not in answered] == []


def test_deny_by_tool_default_writes_denied_result_and_continues() -> None:
    model = ScriptedModel([[call("c1", "delete_file", path="/x")], "ok"])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit(delete="deny"))
    ctx = RuntimeContext(session_id="s")
    evs = events(agent, "go", ctx)
    ends = [e for e in evs if isinstance(e, ToolResultEndEvent)]
    assert [e.state for e in ends] == [ToolResultState.DENIED]
    block = results_in_context(ctx)["c1"]
    assert block.state is ToolResultState.DENIED
    assert block.text == "permission denied by rules"
    assert RAN == []
    assert evs[-2].result.generate_reason is GenerateReason.MODEL_STOP  # type: ignore[attr-defined]


def test_builder_rule_with_argument_predicate_and_reason() -> None:
    model = ScriptedModel([[call("c1", "read_file", path="/etc/shadow"),
                            call("c2", "read_file", path="/tmp/a")], "ok"])
    agent = (
        ReActAgent.builder().name("a").model(model).toolkit(toolkit())
        .permission_rule("read_*", "deny", when=lambda a: a["path"].startswith("/etc"),
                         reason="system files are off limits")
        .build()
    )
    ctx = RuntimeContext(session_id="s")
    events(agent, "go", ctx)
    res = results_in_context(ctx)
    assert res["c1"].state is ToolResultState.DENIED
    assert res["c1"].text == "system files are off limits"
    assert res["c2"].state is ToolResultState.SUCCESS
    assert RAN == [("read_file", {"path": "/tmp/a"})]


def test_deny_beats_ask_beats_allow() -> None:
    model = ScriptedModel([[call("c1", "read_file", path="a")], "ok"])
    agent = ReActAgent(
        name="a", model=model, toolkit=toolkit(),
        permission_rules=[PermissionRule("*", "allow"), PermissionRule("read_*", "ask")],
    )
    ctx = RuntimeContext(session_id="s")
    evs = events(agent, "go", ctx)
    assert any(isinstance(e, RequireUserConfirmEvent) for e in evs)


def test_ask_pauses_without_running_any_tool_of_the_batch() -> None:
    model = ScriptedModel([[call("c1", "read_file", path="a"),
                            call("c2", "delete_file", path="b")]])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx = RuntimeContext(session_id="s")
    evs = events(agent, "go", ctx)
    kinds = [type(e).__name__ for e in evs]
    i = kinds.index("RequireUserConfirmEvent")
    assert kinds[i + 1] == "RequestStopEvent"
    confirm = evs[i]
    stop = evs[i + 1]
    assert isinstance(confirm, RequireUserConfirmEvent)
    assert isinstance(stop, RequestStopEvent)
    assert [c.id for c in confirm.tool_calls] == ["c2"]
    assert stop.generate_reason is GenerateReason.PERMISSION_ASKING
    result = evs[-2]
    assert isinstance(result, AgentResultEvent)
    assert result.result.generate_reason is GenerateReason.PERMISSION_ASKING
    assert result.result.metadata == {"reply_id": confirm.reply_id}
    assert kinds[-1] == "AgentEndEvent"
    assert RAN == []  # not even the allowed read
    state = ctx.agent_state
    assert state is not None and state.pending is not None
    assert state.pending.reply_id == confirm.reply_id
    assert [c.id for c in state.pending.batch] == ["c1", "c2"]


def test_confirm_resume_runs_confirmed_calls_with_edited_arguments() -> None:
    model = ScriptedModel([[call("c1", "read_file", path="a"),
                            call("c2", "delete_file", path="b")], "done"])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx = RuntimeContext(session_id="s")
    evs = events(agent, "go", ctx)
    ask = next(e for e in evs if isinstance(e, RequireUserConfirmEvent))
    edited = ask.tool_calls[0].model_copy(update={"input": {"path": "b.bak"}})
    resume = UserConfirmResultEvent(reply_id=ask.reply_id,
                                    confirm_results=[ConfirmResult(edited, True)])
    evs2 = events(agent, resume, ctx)
    echoed = [e for e in evs2 if isinstance(e, UserConfirmResultEvent)]
    assert len(echoed) == 1 and echoed[0].reply_id == ask.reply_id
    assert RAN == [("read_file", {"path": "a"}), ("delete_file", {"path": "b.bak"})]
    assert evs2[-2].result.text == "done"  # type: ignore[attr-defined]
    assert ctx.agent_state is not None and ctx.agent_state.pending is None
    stored_calls = [c for m in ctx.agent_state.context for c in m.tool_calls]
    assert [c.input for c in stored_calls] == [{"path": "a"}, {"path": "b.bak"}]
    assert_no_orphans(ctx)


def test_user_denial_writes_reason_and_remembered_rules_apply_next_time() -> None:
    model = ScriptedModel([
        [call("c1", "delete_file", path="a"), call("c2", "read_file", path="r")],
        [call("c3", "delete_file", path="z")],
        "end",
    ])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx = RuntimeContext(session_id="s")
    ask = next(e for e in events(agent, "go", ctx) if isinstance(e, RequireUserConfirmEvent))
    resume = UserConfirmResultEvent(
        reply_id=ask.reply_id,
        confirm_results=[ConfirmResult(ask.tool_calls[0], False, reason="not that one",
                                       rules=[PermissionRule("delete_file", "allow")])],
    )
    evs = events(agent, resume, ctx)
    res = results_in_context(ctx)
    assert res["c1"].state is ToolResultState.DENIED and res["c1"].text == "not that one"
    assert res["c2"].state is ToolResultState.SUCCESS
    # The remembered allow rule: c3 runs without asking.
    assert not any(isinstance(e, RequireUserConfirmEvent) for e in evs)
    assert res["c3"].state is ToolResultState.SUCCESS
    assert ("delete_file", {"path": "z"}) in RAN


class StopOnAllDenied(MiddlewareBase):
    def on_acting(self, agent: Any, ctx: RuntimeContext, input: ActingInput,
                  next: Any) -> Observable[AgentEvent]:
        def expand(event: AgentEvent) -> Observable[AgentEvent]:
            import reactivex

            if isinstance(event, AllToolsDeniedEvent):
                return reactivex.of(event, RequestStopEvent(
                    "All tools denied by user", GenerateReason.ALL_TOOLS_DENIED))
            return reactivex.of(event)

        return next(input).pipe(ops.concat_map(expand))


@pytest.mark.parametrize("stop_mw", [False, True])
def test_all_tools_denied(stop_mw: bool) -> None:
    model = ScriptedModel([[call("c1", "delete_file", path="a")], "continued"])
    mws = [StopOnAllDenied()] if stop_mw else []
    agent = ReActAgent(name="a", model=model, toolkit=toolkit(), middlewares=mws)
    ctx = RuntimeContext(session_id="s")
    ask = next(e for e in events(agent, "go", ctx) if isinstance(e, RequireUserConfirmEvent))
    evs = events(agent, UserConfirmResultEvent(
        reply_id=ask.reply_id, confirm_results=[ConfirmResult(ask.tool_calls[0], False)]), ctx)
    denied = [e for e in evs if isinstance(e, AllToolsDeniedEvent)]
    assert len(denied) == 1 and [c.id for c in denied[0].denied_tool_calls] == ["c1"]
    result = evs[-2]
    assert isinstance(result, AgentResultEvent)
    if stop_mw:
        assert result.result.generate_reason is GenerateReason.ALL_TOOLS_DENIED
        assert len(model.calls) == 1
    else:
        assert result.result.generate_reason is GenerateReason.MODEL_STOP
        assert result.result.text == "continued"
    assert_no_orphans(ctx)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda ask: [], "no results"),
        (lambda ask: [ConfirmResult(ask.tool_calls[0], True)] * 2, "duplicate"),
        (lambda ask: [ConfirmResult(ToolUseBlock("nope", "delete_file", {}), True)],
         "not pending"),
    ],
)
def test_bad_confirm_input_is_a_clear_error_and_leaves_state(make: Any, message: str) -> None:
    model = ScriptedModel([[call("c1", "delete_file", path="a")], "x"])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx = RuntimeContext(session_id="s")
    ask = next(e for e in events(agent, "go", ctx) if isinstance(e, RequireUserConfirmEvent))
    assert ctx.agent_state is not None
    before = ctx.agent_state.model_dump_json()
    with pytest.raises(ResumeError, match=message):
        events(agent, UserConfirmResultEvent(reply_id=ask.reply_id,
                                             confirm_results=make(ask)), ctx)
    assert ctx.agent_state.model_dump_json() == before
    # The session still works: a proper answer resumes it.
    ok = events(agent, UserConfirmResultEvent(
        reply_id=ask.reply_id, confirm_results=[ConfirmResult(ask.tool_calls[0], True)]), ctx)
    assert ok[-2].result.text == "x"  # type: ignore[attr-defined]


def test_resume_with_wrong_reply_id_or_nothing_pending() -> None:
    model = ScriptedModel(["hi"])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx = RuntimeContext(session_id="s")
    with pytest.raises(ResumeError, match="not paused"):
        events(agent, UserConfirmResultEvent(reply_id="r", confirm_results=[]), ctx)


def test_external_execution_suspends_and_resumes() -> None:
    model = ScriptedModel([[call("c1", "read_file", path="a"), call("c2", "deploy", env="prod")],
                           "deployed"])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx = RuntimeContext(session_id="s")
    evs = events(agent, "go", ctx)
    req = next(e for e in evs if isinstance(e, RequireExternalExecutionEvent))
    assert [c.id for c in req.tool_calls] == ["c2"]
    assert evs[-2].result.generate_reason is GenerateReason.TOOL_SUSPENDED  # type: ignore[attr-defined]
    assert RAN == [("read_file", {"path": "a"})]  # the internal call of the batch ran
    bad = ExternalExecutionResultEvent(reply_id=req.reply_id,
                                       tool_results=[ToolResultBlock("zz", "deploy", "ok")])
    with pytest.raises(ResumeError, match="not pending"):
        events(agent, bad, ctx)
    with pytest.raises(ResumeError, match="waiting for external"):
        events(agent, UserConfirmResultEvent(reply_id=req.reply_id, confirm_results=[]), ctx)
    good = ExternalExecutionResultEvent(
        reply_id=req.reply_id, tool_results=[ToolResultBlock("c2", "deploy", "deployed v2")])
    evs2 = events(agent, good, ctx)
    assert any(isinstance(e, ExternalExecutionResultEvent) for e in evs2)
    assert evs2[-2].result.text == "deployed"  # type: ignore[attr-defined]
    assert results_in_context(ctx)["c2"].text == "deployed v2"
    assert_no_orphans(ctx)


def test_interrupt_while_paused_closes_pending_calls() -> None:
    model = ScriptedModel([[call("c1", "delete_file", path="a")], "fresh"])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx = RuntimeContext(session_id="s")
    events(agent, "go", ctx)
    assert agent.interrupt(ctx) is True
    assert ctx.agent_state is not None and ctx.agent_state.pending is None
    assert results_in_context(ctx)["c1"].state is ToolResultState.INTERRUPTED
    assert_no_orphans(ctx)
    assert agent.call_sync("next", ctx).text == "fresh"


def test_new_message_instead_of_answer_closes_pending_calls() -> None:
    model = ScriptedModel([[call("c1", "delete_file", path="a")], "fresh"])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx = RuntimeContext(session_id="s")
    events(agent, "go", ctx)
    evs = events(agent, "never mind", ctx)
    ends = [e for e in evs if isinstance(e, ToolResultEndEvent)]
    assert [e.state for e in ends] == [ToolResultState.INTERRUPTED]
    assert_no_orphans(ctx)
    assert evs[-2].result.text == "fresh"  # type: ignore[attr-defined]


async def test_two_sessions_paused_at_once_resume_independently() -> None:
    model = ScriptedModel([
        [call("a1", "delete_file", path="A")],
        [call("b1", "delete_file", path="B")],
        "A done", "B done",
    ], delay=0.005)
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx_a, ctx_b = RuntimeContext(session_id="A"), RuntimeContext(session_id="B")

    async def ask(ctx: RuntimeContext, text: str) -> RequireUserConfirmEvent:
        found = None
        async for e in agent.astream(text, ctx):
            if isinstance(e, RequireUserConfirmEvent):
                found = e
        assert found is not None
        return found

    ask_a = await ask(ctx_a, "a")
    ask_b = await ask(ctx_b, "b")
    assert ctx_a.agent_state is not ctx_b.agent_state
    # Resume B first, then A, concurrently with each other.
    res_b, res_a = await asyncio.gather(
        agent.acall(UserConfirmResultEvent(
            reply_id=ask_b.reply_id,
            confirm_results=[ConfirmResult(ask_b.tool_calls[0], False, reason="no")]), ctx_b),
        agent.acall(UserConfirmResultEvent(
            reply_id=ask_a.reply_id,
            confirm_results=[ConfirmResult(ask_a.tool_calls[0], True)]), ctx_a),
    )
    assert {res_a.text, res_b.text} == {"A done", "B done"}
    assert results_in_context(ctx_a)["a1"].state is ToolResultState.SUCCESS
    assert results_in_context(ctx_b)["b1"].state is ToolResultState.DENIED
    assert RAN == [("delete_file", {"path": "A"})]
    # A reply id from the other session is refused.
    with pytest.raises(ResumeError):
        await agent.acall(UserConfirmResultEvent(
            reply_id=ask_a.reply_id, confirm_results=[ConfirmResult(ask_a.tool_calls[0], True)]),
            ctx_b)


def test_pause_result_is_not_stored_so_results_follow_the_tool_calls() -> None:
    model = ScriptedModel([[call("c1", "delete_file", path="a")], "x"])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx = RuntimeContext(session_id="s")
    ask = next(e for e in events(agent, "go", ctx) if isinstance(e, RequireUserConfirmEvent))
    events(agent, UserConfirmResultEvent(
        reply_id=ask.reply_id, confirm_results=[ConfirmResult(ask.tool_calls[0], True)]), ctx)
    assert ctx.agent_state is not None
    roles = [m.role for m in ctx.agent_state.context]
    assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert isinstance(ctx.agent_state.context[0], Msg)


def test_resume_with_a_reply_id_that_does_not_match() -> None:
    model = ScriptedModel([[call("c1", "delete_file", path="a")], "x"])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx = RuntimeContext(session_id="s")
    ask = next(e for e in events(agent, "go", ctx) if isinstance(e, RequireUserConfirmEvent))
    with pytest.raises(ResumeError, match="does not match"):
        events(agent, UserConfirmResultEvent(
            reply_id="other", confirm_results=[ConfirmResult(ask.tool_calls[0], True)]), ctx)


def test_a_confirmation_must_answer_every_waiting_call() -> None:
    model = ScriptedModel([[call("c1", "delete_file", path="a"),
                            call("c2", "delete_file", path="b")], "x"])
    agent = ReActAgent(name="a", model=model, toolkit=toolkit())
    ctx = RuntimeContext(session_id="s")
    ask = next(e for e in events(agent, "go", ctx) if isinstance(e, RequireUserConfirmEvent))
    with pytest.raises(ResumeError, match="no answer for pending tool calls: c2"):
        events(agent, UserConfirmResultEvent(
            reply_id=ask.reply_id, confirm_results=[ConfirmResult(ask.tool_calls[0], True)]), ctx)


def test_every_result_of_a_batch_shares_one_reply_id() -> None:
    model = ScriptedModel([[call("c1", "read_file", path="/etc/x"),
                            call("c2", "read_file", path="a"),
                            call("c3", "read_file", path="b")], "ok"])
    agent = (
        ReActAgent.builder().name("a").model(model).toolkit(toolkit())
        .permission_rule("read_file", "deny", when=lambda a: a["path"].startswith("/etc"))
        .build()
    )
    evs = events(agent, "go", RuntimeContext(session_id="s"))
    ends = [e for e in evs if isinstance(e, ToolResultEndEvent)]
    assert [e.tool_call_id for e in ends] == ["c1", "c2", "c3"]
    assert len({e.reply_id for e in ends}) == 1
