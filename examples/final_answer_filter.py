"""``FinalAnswerFilterMiddleware``: stream only the final round's text; the narration
of rounds that call tools ("let me check...") never reaches the user.

Run: python examples/final_answer_filter.py
"""

from __future__ import annotations

from reactivex import operators as ops

from rx_agent import (
    FinalAnswerFilterMiddleware,
    MiddlewareBase,
    ReActAgent,
    ScriptedModel,
    TextBlockDeltaEvent,
    Toolkit,
    ToolResultEndEvent,
    ToolUseBlock,
    tool,
)


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny, 24 C in {city}"


SCRIPT = [
    ["Let me check the weather. ", ToolUseBlock(id="w1", name="get_weather",
                                                input={"city": "Paris"})],
    ["It is sunny and 24 C in Paris."],
]


def streamed_text(middlewares: list[MiddlewareBase]) -> tuple[str, int]:
    # --8<-- [start:agent]
    agent = (
        ReActAgent.builder()
        .name("assistant")
        .model(ScriptedModel(SCRIPT))
        .toolkit(Toolkit([get_weather]))
        .middlewares(middlewares)  # e.g. [FinalAnswerFilterMiddleware()]
        .build()
    )
    # --8<-- [end:agent]
    text, tool_results = "", 0
    events = agent.stream("Weather in Paris?").pipe(ops.to_list()).run()
    for event in events:
        if isinstance(event, TextBlockDeltaEvent):
            text += event.delta
        elif isinstance(event, ToolResultEndEvent):
            tool_results += 1  # tool events still stream
    return text, tool_results


def main() -> None:
    text, results = streamed_text([])
    print(f"without filter: {text!r} (tool results: {results})")
    text, results = streamed_text([FinalAnswerFilterMiddleware()])
    print(f"with filter:    {text!r} (tool results: {results})")


if __name__ == "__main__":
    main()
