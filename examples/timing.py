"""The Java guide's ``TimingMiddleware``: the wall-clock time of each model call.

Run: python examples/timing.py
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from reactivex import Observable
from reactivex import operators as ops

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.middleware import Agent


# --8<-- [start:middleware]
class TimingMiddleware(MiddlewareBase):
    def active_points(self) -> Collection[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL}

    def on_model_call(
        self, agent: Agent, ctx: RuntimeContext, input: ModelCallInput,
        next: Callable[[ModelCallInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        start = time.perf_counter()

        def report() -> None:  # Reactor's doFinally: completion, error or dispose
            ms = (time.perf_counter() - start) * 1000
            print(f"[timing] {agent.name}: {ms:.0f}ms")

        return next(input).pipe(ops.finally_action(report))
# --8<-- [end:middleware]


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return f"{term}: a reactive stream library"


def main() -> None:
    # 0.02 s before each streamed chunk, so the calls take measurable time.
    model = ScriptedModel(
        [[ToolUseBlock(id="l1", name="lookup", input={"term": "RxPY"})],
         ["RxPY is ", "a reactive ", "stream library."]],
        delay=0.02,
    )
    agent = ReActAgent(name="assistant", model=model, toolkit=Toolkit([lookup]),
                       middlewares=[TimingMiddleware()])
    print(f"answer: {agent.call_sync('What is RxPY?').text}")


if __name__ == "__main__":
    main()
