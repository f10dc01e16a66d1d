"""``StepRecorder``: a second driver that runs an agent's call with the runtime's own
steps, unchanged, and records each one (issue #25, item 1)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from reactivex import operators as ops

from rx_agent import (
    ConfirmResult,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    ReActAgent,
    RequireUserConfirmEvent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    UserConfirmResultEvent,
)
from rx_agent.event import RequestContinueEvent, RequestStopEvent
from rx_agent.testing import StepRecord, StepRecorder, collect, event_types


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _agent(*script: Any, **kwargs: Any) -> ReActAgent:
    kwargs.setdefault("toolkit", Toolkit([add]))
    return ReActAgent(name="a", model=ScriptedModel(list(script)), **kwargs)


def _add(id_: str = "c1") -> list[Any]:
    return [ToolUseBlock(id=id_, name="add", input={"a": 1, "b": 2})]


def _shape(events: list[Any]) -> list[tuple[str, Any]]:
    """Events without ids and timestamps."""
    keep = ("delta", "tool_call_name", "state", "generate_reason", "max_iters")
    return [(type(e).__name__, tuple(getattr(e, k, None) for k in keep)) for e in events]


def test_a_text_reply_is_prepare_reason_respond() -> None:
    recorder = StepRecorder()
    msg = recorder.call_sync(_agent("hi", toolkit=None), "hello")
    assert msg.text == "hi"
    assert recorder.steps == [
        StepRecord("prepare", "1 message", "next: reason, new round"),
        StepRecord("reason", "round 1, 1 message, 0 tools", "next: respond"),
        StepRecord("respond", "visible text", "end: MODEL_STOP"),
    ]


def test_a_tool_round_goes_through_act_and_batch_with_its_checkpoints() -> None:
    recorder = StepRecorder()
    assert recorder.call_sync(_agent(_add(), "three"), "add").text == "three"
    assert recorder.names == ["prepare", "reason", "act", "batch", "reason",
                              "respond"]
    by_name = {r.name: r for r in recorder.steps[:4]}
    # The calls are saved before they run; the results after the batch.
    assert by_name["reason"].outcome == "next: act, save"
    assert by_name["act"] == StepRecord("act", "1 call: add", "next: batch")
    assert by_name["batch"] == StepRecord("batch", "1 call: add",
                                          "next: reason, save, new round")
    assert recorder.steps[4].input == "round 2, 3 messages, 1 tool"


def test_the_recorded_call_streams_what_the_default_driver_streams() -> None:
    # The same steps run: the events and the stored context are the same.
    def run(stream: Any) -> tuple[list[Any], list[Any]]:
        ctx = RuntimeContext(session_id="s")
        events = collect(stream(ctx))
        assert ctx.agent_state is not None
        return events, [(m.role, m.text, m.generate_reason) for m in ctx.agent_state.context]

    script = [_add("c1"), _add("c2"), "done"]
    plain = _agent(*script, max_iters=2)
    recorded = _agent(*script, max_iters=2)
    recorder = StepRecorder()
    expected_events, expected_context = run(lambda ctx: plain.stream("go", ctx))
    events, context = run(lambda ctx: recorder.stream(recorded, "go", ctx))
    assert _shape(events) == _shape(expected_events)
    assert context == expected_context
    assert "ExceedMaxItersEvent" in event_types(events)
    assert recorder.names[-2:] == ["summarize", "summarized"]
    # The limit is the driver's: the last batch named a new round, summarize ran.
    assert recorder.steps[-3].outcome == "next: reason, save, new round"
    assert recorder.steps[-1].outcome == "end: MAX_ITERATIONS"


def test_an_interrupt_cuts_the_running_step_and_closes_the_reply() -> None:
    agent_box: list[ReActAgent] = []

    def stop_here() -> str:
        """Interrupts the reply it runs in."""
        agent_box[0].interrupt(RuntimeContext(session_id="s"))
        return "stopped"

    agent = _agent([ToolUseBlock(id="c1", name="stop_here", input={})], "never",
                   toolkit=Toolkit([stop_here]))
    agent_box.append(agent)
    recorder = StepRecorder()
    msg = recorder.call_sync(agent, "go", RuntimeContext(session_id="s"))
    assert msg.generate_reason is GenerateReason.INTERRUPTED
    assert recorder.names == ["prepare", "reason", "act", "batch", "close"]
    assert recorder.steps[-2].outcome == "interrupted"
    assert recorder.steps[-1] == StepRecord("close", "interrupted", "end: INTERRUPTED")


class _Emit(MiddlewareBase):
    """Adds ``event`` after the first round's reasoning stream."""

    def __init__(self, event: Any) -> None:
        self.event = event
        self.rounds = 0

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_REASONING}

    def on_reasoning(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        import reactivex

        self.rounds += 1
        if self.rounds > 1:
            return next(input)
        return next(input).pipe(ops.concat(reactivex.of(self.event)))


def test_a_continue_request_and_a_stop_request_are_steps_of_their_own() -> None:
    recorder = StepRecorder()
    agent = _agent("draft", "final", toolkit=None,
                   middlewares=[_Emit(RequestContinueEvent(hint="check", extra_iters=1))])
    assert recorder.call_sync(agent, "go").text == "final"
    assert recorder.names == ["prepare", "reason", "respond", "continue", "reason",
                              "respond"]
    assert recorder.steps[3] == StepRecord("continue", "+1 round", "next: reason, new round")

    recorder = StepRecorder()
    agent = _agent("draft", toolkit=None, middlewares=[_Emit(RequestStopEvent(reason="enough"))])
    recorder.call_sync(agent, "go")
    assert recorder.names == ["prepare", "reason", "close"]
    assert recorder.steps[-1].input == "stopped"


def test_a_permission_handler_is_consulted_in_a_step_per_call_and_a_pause_resumes() -> None:
    def ask(tool_call: ToolUseBlock, ctx: Any) -> bool | None:
        return True if tool_call.id == "c1" else None  # c2: for a human

    toolkit = Toolkit()
    toolkit.register_tool(add, permission="ask")
    agent = _agent([*_add("c1"), *_add("c2")], "done", toolkit=toolkit,
                   permission_handler=ask)
    ctx = RuntimeContext(session_id="s")
    recorder = StepRecorder()
    events = collect(recorder.stream(agent, "go", ctx))
    assert recorder.names == ["prepare", "reason", "act", "consult", "act", "consult",
                              "act"]
    assert recorder.steps[-1].outcome == "end: PERMISSION_ASKING"
    [pause] = [e for e in events if isinstance(e, RequireUserConfirmEvent)]

    resumed = StepRecorder()
    answer = UserConfirmResultEvent(reply_id=pause.reply_id,
                                    confirm_results=[ConfirmResult(pause.tool_calls[0], True)])
    assert resumed.call_sync(agent, answer, ctx).text == "done"
    assert resumed.names == ["prepare", "resume", "act", "consult", "act", "batch",
                             "reason", "respond"]
    assert resumed.steps[0].input == "2 messages, resume with UserConfirmResultEvent"
    assert resumed.steps[1].input == "UserConfirmResultEvent"


class Sum(BaseModel):
    total: int


def test_a_structured_call_ends_in_the_structured_step() -> None:
    recorder = StepRecorder()
    answer = [ToolUseBlock(id="r1", name="generate_response", input={"total": 3})]
    msg = recorder.call_sync(_agent(answer, toolkit=None), "sum", structured_model=Sum)
    assert msg.structured == Sum(total=3)
    assert recorder.names == ["prepare", "reason", "act", "batch", "structured"]
    assert recorder.steps[-1].outcome == "end: STRUCTURED_OUTPUT"


def test_a_failing_step_is_recorded_with_its_error() -> None:
    recorder = StepRecorder()
    with pytest.raises(ValueError, match="boom"):
        recorder.call_sync(_agent(ValueError("boom"), toolkit=None, max_retries=1), "go")
    assert recorder.steps[-1] == StepRecord("reason", "round 1, 1 message, 0 tools",
                                            "raised ValueError")


async def test_acall_runs_on_the_running_loop() -> None:
    recorder = StepRecorder()
    msg = await recorder.acall(_agent("hi", toolkit=None), "hello")
    assert msg.text == "hi"
    assert recorder.names == ["prepare", "reason", "respond"]
