"""The Java guide's ``RateLimitMiddleware``: a minimum interval between model calls,
shared by every call of every agent that uses the instance.

The wait is a ``reactivex.timer`` on an ``AsyncIOScheduler`` bound to the agent's
event loop (hooks run on that loop's thread), so waiting holds no thread and the
model call starts on the loop. Without a scheduler, RxPY's ``timer`` would run on a
``TimeoutScheduler`` thread: the runtime copes with that hop, but it costs a thread
per wait.

Run: python examples/rate_limit.py
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

import reactivex
from reactivex import Observable
from reactivex import operators as ops
from reactivex.scheduler.eventloop import AsyncIOScheduler

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
from rx_agent.middleware import Agent


# --8<-- [start:middleware]
class RateLimitMiddleware(MiddlewareBase):
    """At most one model call per ``min_interval`` seconds (shared state, on purpose)."""

    def __init__(self, min_interval: float) -> None:
        self.min_interval = min_interval
        self._lock = threading.Lock()
        self._next_slot = 0.0  # monotonic time at which the next call may start

    def active_points(self) -> Collection[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL}

    def on_model_call(
        self, agent: Agent, ctx: RuntimeContext, input: ModelCallInput,
        next: Callable[[ModelCallInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        # Reserve a slot now, so concurrent calls queue up instead of all waiting the
        # same interval and then firing together.
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_slot)
            self._next_slot = start + self.min_interval
        wait = start - now
        if wait <= 0:
            return next(input)
        try:
            scheduler = AsyncIOScheduler(asyncio.get_running_loop())
        except RuntimeError:  # not on a loop thread: fall back to a timer thread
            scheduler = None
        delay = reactivex.timer(wait, scheduler=scheduler).pipe(ops.ignore_elements())
        return reactivex.concat(delay, next(input))
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
