"""The task list: ``enable_task_list(True)`` registers the ``todo_write`` tool and
``TaskReminderMiddleware``; the model plans, works through the plan, and sees the
current list before every step.

Run: python examples/task_list.py
"""

from __future__ import annotations

from rx_agent import ReActAgent, RuntimeContext, ScriptedModel, Toolkit, ToolUseBlock, tool


@tool
def search(query: str) -> str:
    """Search the web."""
    return f"3 results for {query!r}"


def todos(*items: tuple[str, str]) -> dict[str, object]:
    return {"todos": [{"content": c, "status": s} for c, s in items]}


def main() -> None:
    model = ScriptedModel([
        [ToolUseBlock("t1", "todo_write", todos(("Search for sources", "in_progress"),
                                                ("Write the summary", "pending")))],
        [ToolUseBlock("s1", "search", {"query": "RxPY schedulers"})],
        [ToolUseBlock("t2", "todo_write", todos(("Search for sources", "completed"),
                                                ("Write the summary", "in_progress")))],
        "RxPY has schedulers for threads, asyncio and timers.",
    ])
    # --8<-- [start:agent]
    agent = (
        ReActAgent.builder()
        .name("planner")
        .sys_prompt("You plan tasks step by step.")
        .model(model)
        .toolkit(Toolkit([search]))
        .enable_task_list(True)  # adds TodoTools() and TaskReminderMiddleware()
        .build()
    )
    # --8<-- [end:agent]
    ctx = RuntimeContext(session_id="research-1")
    reply = agent.call_sync("Summarize what RxPY schedulers exist.", ctx)

    print(agent.plan)
    print()
    for i, call in enumerate(model.calls, 1):
        reminder = call.messages[-1].text.splitlines()[1:-1]
        print(f"step {i} reminder: {' | '.join(reminder)}")
    print(f"answer: {reply.text}")
    assert ctx.agent_state is not None
    print(f"stored list: {ctx.agent_state.data['tasks']}")
    in_context = any("<system-reminder>" in m.text for m in ctx.agent_state.context)
    print(f"reminders stored in the conversation: {in_context}")


if __name__ == "__main__":
    main()
