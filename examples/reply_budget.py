"""``ReplyBudgetControlMiddleware``: once a reply has spent its weighted token budget,
the next step runs with ``tool_choice="none"`` and a hint to wrap up.

Run: python examples/reply_budget.py
"""

from __future__ import annotations

from reactivex import operators as ops

from rx_agent import (
    AgentResultEvent,
    HintBlock,
    HintBlockEvent,
    ModelCallEndEvent,
    ReActAgent,
    ReplyBudgetControlMiddleware,
    ScriptedModel,
    Toolkit,
    ToolUseBlock,
    tool,
)


@tool
def fetch_page(url: str) -> str:
    """Fetch a web page."""
    return f"content of {url}"


def main() -> None:
    # A model that would keep fetching pages; the last entry is its wrap-up answer.
    # (ScriptedModel ignores tool_choice, so the script decides when it stops.)
    pages = [[ToolUseBlock(f"f{i}", "fetch_page", {"url": f"https://example.com/{i}"})]
             for i in range(3)]
    model = ScriptedModel([*pages, "Here is what I found so far."])
    # --8<-- [start:agent]
    budget = ReplyBudgetControlMiddleware(
        token_budget=60,
        input_token_weight=1.0,
        output_token_weight=2.0,  # output tokens usually cost more
    )
    agent = ReActAgent(name="researcher", model=model, toolkit=Toolkit([fetch_page]),
                       middlewares=[budget])
    # --8<-- [end:agent]
    events = agent.stream("Research example.com").pipe(ops.to_list()).run()

    spent = 0.0
    costs = [e.usage for e in events if isinstance(e, ModelCallEndEvent) and e.usage]
    for i, (call, usage) in enumerate(zip(model.calls, costs, strict=True), 1):
        hinted = any(isinstance(b, HintBlock) for m in call.messages for b in m.content)
        cost = budget.cost(usage.input_tokens, usage.output_tokens)
        spent += cost
        print(f"model call {i}: tool_choice={call.options.tool_choice!s:<4} hint={hinted!s:<5} "
              f"cost={cost:g} (reply total {spent:g} of {budget.token_budget:g})")
    for event in events:
        if isinstance(event, HintBlockEvent):
            print(f"hint event: {event.hint[:48]}...")
        elif isinstance(event, AgentResultEvent):
            print(f"answer: {event.result.text}")


if __name__ == "__main__":
    main()
