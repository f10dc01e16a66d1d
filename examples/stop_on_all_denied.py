"""Stop the agent when the user denies every tool call of a step (the Java guide's
``StopOnAllDeniedMiddleware``), offline on the scripted model.

Run: python examples/stop_on_all_denied.py
"""

from __future__ import annotations

from typing import Any

from reactivex import Observable
from reactivex import operators as ops

from rx_agent import (
    ActingInput,
    AgentEvent,
    AgentResultEvent,
    AllToolsDeniedEvent,
    ConfirmResult,
    ExtensionPoint,
    GenerateReason,
    MiddlewareBase,
    ReActAgent,
    RequestStopEvent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    UserConfirmResultEvent,
)
from rx_agent import operators as aops


# --8<-- [start:middleware]
class StopOnAllDeniedMiddleware(MiddlewareBase):
    """Answers ``AllToolsDeniedEvent`` with a stop request (reason ALL_TOOLS_DENIED)."""

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_ACTING}

    def on_acting(self, agent: Any, ctx: RuntimeContext, input: ActingInput,
                  next: Any) -> Observable[AgentEvent]:
        # Right after the AllToolsDeniedEvent, in order (Reactor: flatMap over Flux.just).
        return next(input).pipe(aops.inject_after(AllToolsDeniedEvent, lambda _: RequestStopEvent(
            "All tools denied by user", GenerateReason.ALL_TOOLS_DENIED)))
# --8<-- [end:middleware]


def drop_table(table: str) -> str:
    """Drop a database table."""
    return f"dropped {table}"


def main() -> None:
    toolkit = Toolkit()
    toolkit.register_tool(drop_table, permission="ask")
    model = ScriptedModel([
        [ToolUseBlock(id="call-1", name="drop_table", input={"table": "users"})],
        "This answer is never reached: the middleware stops the agent first.",
    ])
    agent = (
        ReActAgent.builder()
        .name("guarded")
        .sys_prompt("You manage a database.")
        .model(model)
        .toolkit(toolkit)
        .middleware(StopOnAllDeniedMiddleware())
        .build()
    )
    ctx = RuntimeContext(session_id="demo")
    paused = agent.call_sync("Clean up the users table", ctx)
    print(f"paused: {paused.generate_reason}, waiting on {[c.name for c in paused.tool_calls]}")

    answer = UserConfirmResultEvent(
        reply_id=paused.metadata["reply_id"] if paused.metadata else "",
        confirm_results=[ConfirmResult(paused.tool_calls[0], False, reason="Not in production")],
    )
    for event in agent.stream(answer, ctx).pipe(ops.to_list()).run():
        if isinstance(event, (AllToolsDeniedEvent, RequestStopEvent)):
            print(f"event: {type(event).__name__}")
        elif isinstance(event, AgentResultEvent):
            print(f"stopped: {event.result.generate_reason}")


if __name__ == "__main__":
    main()
