"""The Java guide's ``ModelFallbackMiddleware``: when the primary model fails, call
``next`` again with a backup model. Then the built-in way to do the same.

Run: python examples/model_fallback.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection

from reactivex import Observable
from reactivex import operators as ops

from rx_agent import (
    AgentEvent,
    ChatModel,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
)
from rx_agent.middleware import Agent
from rx_agent.model import ModelServerError


# --8<-- [start:middleware]
class ModelFallbackMiddleware(MiddlewareBase):
    def __init__(self, fallback: ChatModel) -> None:
        self.fallback = fallback

    def active_points(self) -> Collection[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL}

    def on_model_call(
        self, agent: Agent, ctx: RuntimeContext, input: ModelCallInput,
        next: Callable[[ModelCallInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        def switch(error: Exception, _: Observable[AgentEvent]) -> Observable[AgentEvent]:
            print(f"Primary model failed: {error}, switching to fallback", file=sys.stderr)
            return next(input.with_(model=self.fallback))

        return next(input).pipe(ops.catch(switch))
# --8<-- [end:middleware]


def main() -> None:
    primary = ScriptedModel([ModelServerError("503 Service Unavailable")], name="primary")
    backup = ScriptedModel(["Answer from the backup model."], name="backup")
    agent = (
        ReActAgent.builder()
        .name("assistant")
        .model(primary)
        .max_retries(1)  # fail over at once (no retries on the primary first)
        .middleware(ModelFallbackMiddleware(backup))
        .build()
    )
    print(f"middleware: {agent.call_sync('Hello?').text}")

    # --8<-- [start:builtin]
    # The built-in way: no middleware; the switch happens below on_model_call.
    primary2 = ScriptedModel([ModelServerError("503 Service Unavailable")], name="primary")
    backup2 = ScriptedModel(["Answer from the backup model."], name="backup")
    agent2 = (
        ReActAgent.builder()
        .name("assistant")
        .model(primary2)
        .max_retries(1)
        .fallback_model(backup2)
        .failover_listener(lambda model, error: print(f"failover from {model.name}: {error}"))
        .build()
    )
    # --8<-- [end:builtin]
    print(f"builder: {agent2.call_sync('Hello?').text}")


if __name__ == "__main__":
    main()
