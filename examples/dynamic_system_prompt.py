"""The Java guide's ``DynamicContextMiddleware``: add runtime context to the system
prompt (``on_system_prompt``, once per call; every round reuses the result).

Run: python examples/dynamic_system_prompt.py
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import UTC, datetime

import reactivex
from reactivex import Observable

from rx_agent import ExtensionPoint, MiddlewareBase, ReActAgent, RuntimeContext, ScriptedModel
from rx_agent.middleware import Agent


# --8<-- [start:middleware]
class DynamicContextMiddleware(MiddlewareBase):
    def __init__(self, context_fn: Callable[[], str]) -> None:
        self.context_fn = context_fn

    def active_points(self) -> Collection[ExtensionPoint]:
        return {ExtensionPoint.ON_SYSTEM_PROMPT}

    def on_system_prompt(
        self, agent: Agent, ctx: RuntimeContext, current_prompt: str
    ) -> Observable[str] | str:
        # A plain str works too; an Observable is the port of Java's Mono<String>.
        return reactivex.just(f"{current_prompt}\n\n## Current Context\n{self.context_fn()}")


# Wire-up:
# .middlewares([DynamicContextMiddleware(lambda: f"Time: {datetime.now(UTC)}")])
# --8<-- [end:middleware]


def utc_now() -> str:
    return f"Time: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"


def main() -> None:
    model = ScriptedModel(["Good afternoon!"])
    agent = (
        ReActAgent.builder()
        .name("assistant")
        .sys_prompt("You are a helpful assistant.")
        .model(model)
        .middlewares([
            DynamicContextMiddleware(utc_now),
            DynamicContextMiddleware(lambda: "User locale: en-GB"),
        ])
        .build()
    )
    print(f"answer: {agent.call_sync('Greet me.').text}")
    print("system prompt the model saw:")
    print(model.calls[0].messages[0].text)


if __name__ == "__main__":
    main()
