"""The Java guide's ``FullObservabilityMiddleware``: one middleware that watches the
agent, each reasoning step, each model call and the system prompt.

Run: python examples/full_observability.py
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from reactivex import Observable
from reactivex import operators as ops

from rx_agent import (
    AgentEvent,
    AgentInput,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    ReActAgent,
    ReasoningInput,
    RuntimeContext,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent.middleware import Agent


# --8<-- [start:middleware]
class FullObservabilityMiddleware(MiddlewareBase):
    """Observes agent / reasoning / model_call / system_prompt at the same time."""

    def active_points(self) -> Collection[ExtensionPoint]:
        return {
            ExtensionPoint.ON_AGENT,
            ExtensionPoint.ON_REASONING,
            ExtensionPoint.ON_MODEL_CALL,
            ExtensionPoint.ON_SYSTEM_PROMPT,
        }

    def on_agent(
        self, agent: Agent, ctx: RuntimeContext, input: AgentInput,
        next: Callable[[AgentInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        print(f"[agent] start for {agent.name}")
        return next(input).pipe(
            ops.do_action(on_completed=lambda: print(f"[agent] end for {agent.name}"))
        )

    def on_reasoning(
        self, agent: Agent, ctx: RuntimeContext, input: ReasoningInput,
        next: Callable[[ReasoningInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        print("[reasoning] start")
        return next(input).pipe(ops.do_action(on_completed=lambda: print("[reasoning] end")))

    def on_model_call(
        self, agent: Agent, ctx: RuntimeContext, input: ModelCallInput,
        next: Callable[[ModelCallInput], Observable[AgentEvent]],
    ) -> Observable[AgentEvent]:
        print(f"[model_call] {type(input.model).__name__}")
        return next(input).pipe(ops.do_action(on_completed=lambda: print("[model_call] done")))

    def on_system_prompt(
        self, agent: Agent, ctx: RuntimeContext, current_prompt: str
    ) -> Observable[str] | str:
        print(f"[system_prompt] length={len(current_prompt)}")
        return current_prompt
# --8<-- [end:middleware]


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny, 24 C in {city}"


def main() -> None:
    model = ScriptedModel([
        [ToolUseBlock(id="w1", name="get_weather", input={"city": "Paris"})],
        "It is sunny and 24 C in Paris.",
    ])
    agent = (
        ReActAgent.builder()
        .name("assistant")
        .sys_prompt("You are a helpful assistant.")
        .model(model)
        .toolkit(Toolkit([get_weather]))
        .middleware(FullObservabilityMiddleware())
        .build()
    )
    reply = agent.call_sync("What's the weather in Paris?")
    print(f"answer: {reply.text}")


if __name__ == "__main__":
    main()
