"""The Java guide's ``RateLimitMiddleware``: a minimum interval between model calls,
shared by every call of every agent that uses the instance.

``aops.rate_limit`` reserves each call's slot when it arrives (concurrent calls queue
one interval apart) and waits on the agent's event loop (hooks run on that loop's
thread), so waiting holds no thread and the model call starts on the loop. The same
middleware in plain RxPY is on the Examples page of the docs.

Run: python examples/rate_limit.py
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from reactivex import Observable

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    GenerateOptions,
    MiddlewareBase,
    ModelCallInput,
    Msg,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
)
from rx_agent import operators as aops
from rx_agent.middleware import Agent


# --8<-- [start:middleware]
class RateLimitMiddleware(MiddlewareBase):
    """At most one model call per ``min_interval`` seconds (shared state, on purpose)."""

    def __init__(self, min_interval: float) -> None:
        # One operator instance keeps the schedule for every call that uses it.
        self.limit = aops.rate_limit(min_interval)

    def active_points(self) -> Collection[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL}

    def on_model_call(
        self, agent: Agent, ctx: RuntimeContext, input: ModelCallInput,
        next: Callable[[ModelCallInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        return next(input).pipe(self.limit)
# --8<-- [end:middleware]


class StampedModel(ScriptedModel):
    """Prints when each call reaches the model."""

    def __init__(self, responses: list[str], t0: float) -> None:
        super().__init__(responses)
        self.t0 = t0

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[Any]:
        print(f"[model] call {len(self.calls) + 1} at +{time.monotonic() - self.t0:.2f}s")
        return super().stream(messages, tools, options)


async def main() -> None:
    t0 = time.monotonic()
    limiter = RateLimitMiddleware(min_interval=0.2)
    model = StampedModel([f"answer {i}" for i in range(3)], t0)
    agent = ReActAgent(name="assistant", model=model, middlewares=[limiter])
    # Three concurrent replies on three sessions: the limiter spaces their model calls.
    replies = await asyncio.gather(*(
        agent.acall(f"question {i}", RuntimeContext(session_id=f"s{i}")) for i in range(3)
    ))
    print(f"replies: {sorted(r.text for r in replies)}")
    print(f"total: {time.monotonic() - t0:.1f}s (>= 0.4s: three calls, 0.2s apart)")


if __name__ == "__main__":
    asyncio.run(main())
