"""The Java guide's ``RequestContextMiddleware``: read the call's RuntimeContext in a
hook and pass a value on to later hooks and tools.

Run: python examples/request_context.py
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from reactivex import Observable

from rx_agent import (
    AgentEvent,
    AgentInput,
    MiddlewareBase,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.middleware import Agent


# --8<-- [start:middleware]
class RequestContextMiddleware(MiddlewareBase):
    """Log user / request id and propagate a trace id for downstream tools."""

    def on_agent(
        self, agent: Agent, ctx: RuntimeContext, input: AgentInput,
        next: Callable[[AgentInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        print(f"[req] user={ctx.user_id} session={ctx.session_id} "
              f"reqId={ctx.get('request_id')}")
        ctx.put("trace_id", uuid.uuid4().hex)  # visible to later hooks / tools
        return next(input)
# --8<-- [end:middleware]


SEEN: list[str] = []


# --8<-- [start:tool]
@tool
def audit_log(action: str, ctx: RuntimeContext) -> str:
    """Record an action in the audit log.

    Args:
        action: What happened.
    """
    # ``ctx`` is injected by the runtime (and hidden from the model's schema).
    SEEN.append(ctx.get("trace_id"))
    return f"logged {action!r} for {ctx.user_id} (trace {ctx.get('trace_id')[:8]}...)"
# --8<-- [end:tool]


def main() -> None:
    model = ScriptedModel([
        [ToolUseBlock(id="a1", name="audit_log", input={"action": "export report"})],
        "Done, the export is logged.",
    ])
    agent = ReActAgent(name="assistant", model=model, toolkit=Toolkit([audit_log]),
                       middlewares=[RequestContextMiddleware()])
    ctx = RuntimeContext(session_id="s-42", user_id="alice",
                         attributes={"request_id": "req-7f3a"})

    reply = agent.call_sync("Export the report.", ctx)

    print(f"answer: {reply.text}")
    print(f"tool saw one trace id: {len(SEEN) == 1 and len(SEEN[0]) == 32}")
    # The agent works on a copy of ctx: the caller's object only gets agent_state back.
    print(f"caller ctx has trace_id: {ctx.get('trace_id') is not None}")


if __name__ == "__main__":
    main()
