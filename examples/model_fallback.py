"""The Java guide's ``ModelFallbackMiddleware``: when the primary model fails, call
``next`` again with a backup model (``aops.fallback_to``; the plain RxPY form is on the
Examples page of the docs). Then the built-in way to do the same.

The agent's own retries run *below* ``on_model_call``: the error a middleware sees
from ``next(input)`` comes after ``max_retries`` attempts on the primary (3 by
default), and it is the last attempt's error. With a ``ScriptedModel`` every attempt
uses up one scripted response, so a script with one failure and the default retries
ends in "no response for call #2", which hides the real error. Set ``max_retries``
to what the middleware should see.

Run: python examples/model_fallback.py
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from reactivex import Observable

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
from rx_agent import operators as aops
from rx_agent.middleware import Agent
from rx_agent.model import ModelServerError

BACKUP_ANSWER = "Answer from the backup model."


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
        # Reached only once the built-in retries on input.model are spent.
        def report(model: ChatModel, error: Exception) -> None:
            print(f"  primary failed: {type(error).__name__}: {error}; switching to fallback")

        return aops.fallback_to(self.fallback, listener=report)(next, input)
# --8<-- [end:middleware]


def with_middleware(label: str, failures: int, max_retries: int) -> None:
    """The primary fails ``failures`` times; the agent tries it ``max_retries`` times."""
    print(f"{label}: {failures} scripted failure(s), max_retries({max_retries})")
    primary = ScriptedModel([ModelServerError("503 Service Unavailable")] * failures,
                            name="primary")
    backup = ScriptedModel([BACKUP_ANSWER], name="backup")
    agent = (
        ReActAgent.builder()
        .name("assistant")
        .model(primary)
        .max_retries(max_retries)       # attempts on the primary before next() fails
        .retry_backoff(0.01, 0.01)      # keep the demo fast
        .middleware(ModelFallbackMiddleware(backup))
        .build()
    )
    answer = agent.call_sync("Hello?").text
    print(f"  attempts on the primary: {len(primary.calls)}; answer: {answer}")


def main() -> None:
    # --8<-- [start:retries]
    # max_retries(1): no retry, the middleware sees the first error at once.
    with_middleware("fail over at once", failures=1, max_retries=1)
    # Three attempts, three scripted failures: the middleware sees the third 503.
    with_middleware("retry, then fail over", failures=3, max_retries=3)
    # The trap: three attempts but one scripted failure. The 2nd attempt finds the
    # script exhausted (not retryable), and that is the error the middleware sees.
    with_middleware("the real error hidden", failures=1, max_retries=3)
    # --8<-- [end:retries]

    # --8<-- [start:builtin]
    # The built-in way: no middleware; the switch happens below on_model_call, after
    # the primary's attempts, and the fallback gets attempts of its own.
    primary = ScriptedModel([ModelServerError("503 Service Unavailable")], name="primary")
    backup = ScriptedModel([BACKUP_ANSWER], name="backup")

    def on_failover(model: ChatModel, error: BaseException) -> None:
        # The model that failed and its last attempt's error; the return value is
        # ignored and an exception raised here is logged, never propagated.
        print(f"failover from {model.name}: {type(error).__name__}: {error}")

    agent = (
        ReActAgent.builder()
        .name("assistant")
        .model(primary)
        .max_retries(1)
        .fallback_model(backup)
        .failover_listener(on_failover)
        .build()
    )
    # --8<-- [end:builtin]
    print(f"builder: {agent.call_sync('Hello?').text}")


if __name__ == "__main__":
    main()
