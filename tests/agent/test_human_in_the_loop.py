"""Human in the loop: resuming a paused session, ConfirmResult, all tools denied (docs/hitl.md)."""

from __future__ import annotations

import reactivex
import reactivex.operators as ops
from conftest import (
    assert_no_orphan_tool_calls,
    make_agent,
    of_type,
    result_msg,
    stream_events,
    tool_results,
)

from rx_agent import (
    AgentEndEvent,
    AllToolsDeniedEvent,
    ConfirmResult,
    ExtensionPoint,
    ExternalExecutionResultEvent,
    GenerateReason,
    MiddlewareBase,
    RequestStopEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
    UserConfirmResultEvent,
)

CALL = ToolUseBlock("c1", "delete_file", {"path": "/tmp/x"})


def _toolkit(ran: list, permission: str = "ask", external: bool = False) -> Toolkit:
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    toolkit = Toolkit()
    toolkit.register_tool(delete_file, permission=permission, external=external)
    return toolkit


def _paused(model: ScriptedModel, ran: list, middlewares=(), **toolkit_kw):  # type: ignore[no-untyped-def]
    agent = make_agent(model, toolkit=_toolkit(ran, **toolkit_kw), middlewares=list(middlewares))
    ctx = RuntimeContext(session_id="hitl")
    events = stream_events(agent, "clean up", ctx)
    return agent, ctx, events


# -- asking for confirmation -------------------------------------------------------------------


def test_ask_permission_pauses_with_require_user_confirm() -> None:
    ran: list = []
    model = ScriptedModel([[CALL], "never yet"])
    _, _, events = _paused(model, ran)
    (ask,) = of_type(events, RequireUserConfirmEvent)
    assert [c.id for c in ask.tool_calls] == ["c1"]
    assert ask.reply_id
    assert ran == []
    assert len(model.calls) == 1
    assert result_msg(events).generate_reason is GenerateReason.PERMISSION_ASKING
    assert isinstance(events[-1], AgentEndEvent)


def test_confirming_resumes_and_runs_the_tool() -> None:
    ran: list = []
    model = ScriptedModel([[CALL], "all clean"])
    agent, ctx, events = _paused(model, ran)
    (ask,) = of_type(events, RequireUserConfirmEvent)
    resume = UserConfirmResultEvent(
        reply_id=ask.reply_id, confirm_results=[ConfirmResult(ask.tool_calls[0], True)]
    )
    after = stream_events(agent, resume, ctx)
    assert ran == ["/tmp/x"]
    msg = result_msg(after)
    assert msg.text == "all clean"
    assert msg.generate_reason is GenerateReason.MODEL_STOP
    assert [r.id for r in tool_results(model.calls[1].messages)] == ["c1"]
    assert_no_orphan_tool_calls(ctx.agent_state.context)


def test_confirmation_may_carry_edited_arguments() -> None:
    ran: list = []
    model = ScriptedModel([[CALL], "done"])
    agent, ctx, events = _paused(model, ran)
    (ask,) = of_type(events, RequireUserConfirmEvent)
    edited = ToolUseBlock("c1", "delete_file", {"path": "/tmp/safer"})
    stream_events(
        agent,
        UserConfirmResultEvent(
            reply_id=ask.reply_id, confirm_results=[ConfirmResult(edited, True)]
        ),
        ctx,
    )
    assert ran == ["/tmp/safer"]


# -- all tools denied --------------------------------------------------------------------------


class WatchActing(MiddlewareBase):
    def __init__(self) -> None:
        self.events: list = []

    def active_points(self):  # type: ignore[no-untyped-def]
        return {ExtensionPoint.ON_ACTING}

    def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        return next(input).pipe(ops.do_action(on_next=self.events.append))


class StopOnAllDenied(MiddlewareBase):
    def active_points(self):  # type: ignore[no-untyped-def]
        return {ExtensionPoint.ON_ACTING}

    def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        def answer(event):  # type: ignore[no-untyped-def]
            if isinstance(event, AllToolsDeniedEvent):
                stop = RequestStopEvent("All tools denied by user", GenerateReason.ALL_TOOLS_DENIED)
                return reactivex.of(event, stop)
            return reactivex.of(event)

        return next(input).pipe(ops.flat_map(answer))


def _deny(agent, ctx, events):  # type: ignore[no-untyped-def]
    (ask,) = of_type(events, RequireUserConfirmEvent)
    resume = UserConfirmResultEvent(
        reply_id=ask.reply_id,
        confirm_results=[ConfirmResult(c, False, "not allowed") for c in ask.tool_calls],
    )
    return stream_events(agent, resume, ctx)


def test_denying_all_sends_all_tools_denied_through_the_on_acting_chain() -> None:
    ran: list = []
    watch = WatchActing()
    model = ScriptedModel([[CALL], "ok, I will not"])
    agent, ctx, events = _paused(model, ran, middlewares=[watch])
    after = _deny(agent, ctx, events)
    denied = [e for e in watch.events if isinstance(e, AllToolsDeniedEvent)]
    assert len(denied) == 1
    assert [c.id for c in denied[0].denied_tool_calls] == ["c1"]
    assert of_type(after, AllToolsDeniedEvent)
    assert ran == []


def test_by_default_the_loop_continues_after_all_tools_denied() -> None:
    ran: list = []
    model = ScriptedModel([[CALL], "ok, I will not"])
    agent, ctx, events = _paused(model, ran)
    after = _deny(agent, ctx, events)
    assert len(model.calls) == 2
    assert result_msg(after).text == "ok, I will not"
    assert result_msg(after).generate_reason is GenerateReason.MODEL_STOP
    (denial,) = tool_results(model.calls[1].messages)
    assert denial.id == "c1"
    assert denial.state is ToolResultState.DENIED
    assert_no_orphan_tool_calls(ctx.agent_state.context)


def test_a_middleware_can_stop_on_all_tools_denied() -> None:
    ran: list = []
    model = ScriptedModel([[CALL], "never"])
    agent, ctx, events = _paused(model, ran, middlewares=[StopOnAllDenied()])
    after = _deny(agent, ctx, events)
    assert result_msg(after).generate_reason is GenerateReason.ALL_TOOLS_DENIED
    assert len(model.calls) == 1
    assert_no_orphan_tool_calls(ctx.agent_state.context)


def test_deny_permission_never_runs_the_tool_and_the_loop_continues() -> None:
    ran: list = []
    model = ScriptedModel([[CALL], "fine"])
    _, ctx, events = _paused(model, ran, permission="deny")
    assert ran == []
    assert result_msg(events).text == "fine"
    (result,) = tool_results(model.calls[1].messages)
    assert result.state is ToolResultState.DENIED
    assert_no_orphan_tool_calls(ctx.agent_state.context)


# -- external execution ------------------------------------------------------------------------


def test_external_tool_pauses_with_require_external_execution() -> None:
    ran: list = []
    model = ScriptedModel([[CALL], "never yet"])
    _, _, events = _paused(model, ran, permission="allow", external=True)
    (req,) = of_type(events, RequireExternalExecutionEvent)
    assert [c.id for c in req.tool_calls] == ["c1"]
    assert ran == []
    assert result_msg(events).generate_reason is GenerateReason.TOOL_SUSPENDED
    assert isinstance(events[-1], AgentEndEvent)


def test_external_results_resume_the_reply() -> None:
    ran: list = []
    model = ScriptedModel([[CALL], "thanks"])
    agent, ctx, events = _paused(model, ran, permission="allow", external=True)
    (req,) = of_type(events, RequireExternalExecutionEvent)
    resume = ExternalExecutionResultEvent(
        reply_id=req.reply_id,
        tool_results=[
            ToolResultBlock("c1", "delete_file", "removed remotely", state=ToolResultState.SUCCESS)
        ],
    )
    after = stream_events(agent, resume, ctx)
    assert result_msg(after).text == "thanks"
    (result,) = tool_results(model.calls[1].messages)
    assert result.output == "removed remotely"
    assert ran == []
    assert_no_orphan_tool_calls(ctx.agent_state.context)
