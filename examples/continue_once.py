"""``ContinueOnceMiddleware`` (AgentScope Python's guide): the first time the agent is
about to finish, ask it to check its answer once more and run another round.

Run: python examples/continue_once.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import reactivex
from reactivex import Observable
from reactivex import operators as ops

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    HintBlock,
    MiddlewareBase,
    ReActAgent,
    ReasoningInput,
    RuntimeContext,
    ScriptedModel,
    TextBlockDeltaEvent,
    ToolCallStartEvent,
)
from rx_agent.event import RequestContinueEvent


# --8<-- [start:middleware]
class ContinueOnceMiddleware(MiddlewareBase):
    """Before the reply's first final answer, one more round with a hint."""

    HINT = "Before you finish, check your result once more."
    _DONE = "continue_once.done"  # per call: each call works on its own context copy

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_REASONING}

    def on_reasoning(
        self,
        agent: Any,
        ctx: RuntimeContext,
        input: ReasoningInput,
        next: Callable[[ReasoningInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        if ctx.get(self._DONE):
            return next(input)
        seen = {"text": False, "tools": False}

        def watch(event: AgentEvent) -> None:
            if isinstance(event, ToolCallStartEvent):
                seen["tools"] = True
            elif isinstance(event, TextBlockDeltaEvent) and event.delta.strip():
                seen["text"] = True

        def after(_: Any) -> Observable[AgentEvent]:
            if seen["tools"] or not seen["text"]:
                return reactivex.empty()  # not the final round: the loop goes on anyway
            ctx.put(self._DONE, True)
            # extra_iters=1 frees a round, so this works on the last allowed one too
            # (the guide lowers cur_iter for the same reason).
            return reactivex.of(RequestContinueEvent(hint=self.HINT, extra_iters=1))

        return next(input).pipe(ops.do_action(watch), ops.concat(reactivex.defer(after)))
# --8<-- [end:middleware]


def main() -> None:
    model = ScriptedModel(["2 + 2 = 5.", "Checked again: 2 + 2 = 4."])
    agent = (
        ReActAgent.builder()
        .name("assistant")
        .model(model)
        .max_iters(1)
        .middlewares([ContinueOnceMiddleware()])
        .build()
    )
    answer = agent.call_sync("What is 2 + 2?")
    for n, call in enumerate(model.calls, 1):
        last = call.messages[-1]
        hints = [b.hint for b in last.content if isinstance(b, HintBlock)]
        print(f"model call {n} ends with {last.role}: {hints[0] if hints else last.text}")
    print(f"answer: {answer.text} ({answer.generate_reason})")


if __name__ == "__main__":
    main()
