"""TodoTools + TaskReminderMiddleware: the task list, its rules and the reminder."""

from __future__ import annotations

from typing import Any

import pytest

from rx_agent import (
    AgentState,
    ExtensionPoint,
    Msg,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    TaskReminderMiddleware,
    TodoTools,
    Toolkit,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
)
from rx_agent.builtin.tasks import TodoItem, TodoListError, read_tasks, render_tasks

from .conftest import call, make_agent


def write(call_id: str, *items: tuple[str, str]) -> ToolUseBlock:
    todos = [{"content": c, "status": s} for c, s in items]
    return ToolUseBlock(call_id, "todo_write", {"todos": todos})


def task_agent(model: ScriptedModel, **kwargs: Any) -> ReActAgent:
    return make_agent(model, toolkit=Toolkit(), enable_task_list=True, **kwargs)


def reminders(messages: tuple[Msg, ...]) -> list[str]:
    return [m.text for m in messages if m.text.startswith("<system-reminder>")]


def results(state: AgentState) -> list[ToolResultBlock]:
    return [b for m in state.context for b in m.tool_results]


async def test_enable_task_list_adds_the_tool_and_the_middleware() -> None:
    agent = task_agent(ScriptedModel(["ok"]))
    assert "todo_write" in agent.toolkit
    assert [type(m) for m in agent.middlewares] == [TaskReminderMiddleware]
    assert set(agent.middlewares[0].active_points() or ()) == {
        ExtensionPoint.ON_SYSTEM_PROMPT, ExtensionPoint.ON_REASONING,
    }


async def test_schema_hides_the_context_and_describes_the_items() -> None:
    toolkit = Toolkit()
    toolkit.register_tool(TodoTools())
    (schema,) = toolkit.schemas()
    assert schema["name"] == "todo_write"
    params = schema["parameters"]
    assert list(params["properties"]) == ["todos"]
    item = params["$defs"]["TodoItem"]
    assert item["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]
    assert item["required"] == ["content"]


async def test_todo_write_replaces_the_whole_list_in_agent_state() -> None:
    model = ScriptedModel([
        [write("c1", ("Research", "in_progress"), ("Draft", "pending"))],
        [write("c2", ("Draft", "in_progress"))],
        "done",
    ])
    agent = task_agent(model)
    ctx = RuntimeContext(session_id="plan")

    await call(agent, "write a report", ctx)

    assert ctx.agent_state is not None
    assert ctx.agent_state.data["tasks"] == [{"content": "Draft", "status": "in_progress"}]
    first, second = results(ctx.agent_state)
    assert first.state is second.state is ToolResultState.SUCCESS
    assert "2 task(s)" in first.text and "1 in progress" in first.text
    # JSON-able, so it persists with the state.
    restored = AgentState.model_validate_json(ctx.agent_state.model_dump_json())
    assert restored.data["tasks"] == ctx.agent_state.data["tasks"]


@pytest.mark.parametrize(
    ("todos", "message"),
    [
        ([{"content": "   ", "status": "pending"}], "must not be blank"),
        ([{"content": "x", "status": "doing"}], "'pending', 'in_progress' or 'completed'"),
        ([{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}],
         "at most one task may be in_progress, got 2"),
        ([{"content": "a", "priority": "high"}], "priority"),
    ],
    ids=["blank", "bad-status", "two-in-progress", "unknown-field"],
)
async def test_invalid_lists_are_error_results_and_keep_the_old_list(
    todos: list[dict[str, Any]], message: str
) -> None:
    model = ScriptedModel([
        [write("c1", ("Keep me", "pending"))],
        [ToolUseBlock("c2", "todo_write", {"todos": todos})],
        "ok",
    ])
    agent = task_agent(model)
    ctx = RuntimeContext(session_id="bad")

    await call(agent, "go", ctx)

    assert ctx.agent_state is not None
    bad = results(ctx.agent_state)[-1]
    assert bad.state is ToolResultState.ERROR
    assert message in bad.text
    assert ctx.agent_state.data["tasks"] == [{"content": "Keep me", "status": "pending"}]


async def test_system_prompt_explains_the_tool() -> None:
    model = ScriptedModel(["ok"])
    await call(task_agent(model, sys_prompt="You are a planner."))
    system = model.calls[0].messages[0]
    assert system.role.value == "system"
    assert system.text.startswith("You are a planner.\n\n## Task list")
    assert "todo_write" in system.text
    assert "in_progress" in system.text


async def test_system_prompt_section_alone_when_no_base_prompt() -> None:
    model = ScriptedModel(["ok"])
    await call(task_agent(model))
    assert model.calls[0].messages[0].text.startswith("## Task list")


async def test_each_step_sees_the_current_list_as_a_reminder() -> None:
    model = ScriptedModel([
        [write("c1", ("Research", "in_progress"), ("Draft", "pending"))],
        [write("c2", ("Research", "completed"), ("Draft", "in_progress"))],
        "done",
    ])
    agent = task_agent(model)
    ctx = RuntimeContext(session_id="reminders")

    await call(agent, "go", ctx)

    first, second, third = (reminders(c.messages) for c in model.calls)
    assert len(first) == len(second) == len(third) == 1
    assert "task list is empty" in first[0]
    assert "1. [~] Research (in_progress)" in second[0]
    assert "2. [ ] Draft (pending)" in second[0]
    assert "1. [x] Research (completed)" in third[0]
    assert "2. [~] Draft (in_progress)" in third[0]
    # The reminder is the last message the model sees and is never stored.
    for c in model.calls:
        assert "<system-reminder>" in c.messages[-1].text
        assert c.messages[-1].role.value == "user"
    assert ctx.agent_state is not None
    assert not any(m.text.startswith("<system-reminder>") for m in ctx.agent_state.context)


async def test_the_list_survives_into_the_next_call_of_the_session() -> None:
    model = ScriptedModel([[write("c1", ("Ship it", "in_progress"))], "planned", "continuing"])
    agent = task_agent(model)
    await call(agent, "plan", RuntimeContext(session_id="s"))
    await call(agent, "continue", RuntimeContext(session_id="s"))
    assert "1. [~] Ship it (in_progress)" in reminders(model.calls[2].messages)[0]
    # Another session has its own (empty) list.
    other = ScriptedModel(["fresh"])
    agent2 = task_agent(other)
    await call(agent2, "hi", RuntimeContext(session_id="other"))
    assert "task list is empty" in reminders(other.calls[0].messages)[0]


async def test_todo_write_outside_an_agent_needs_a_state() -> None:
    tools = TodoTools()
    with pytest.raises(TodoListError, match="needs an agent session"):
        await tools.todo_write([TodoItem(content="x")], RuntimeContext())
    ctx = RuntimeContext()
    ctx.agent_state = AgentState(session_id="direct")
    out = await tools.todo_write([TodoItem(content="x", status="completed")], ctx)
    assert out.startswith("Task list updated (1 task(s): 1 completed")
    assert await tools.todo_write([], ctx) == "Task list cleared."
    assert ctx.agent_state.data["tasks"] == []


def test_read_tasks_skips_entries_that_no_longer_validate() -> None:
    state = AgentState(session_id="s", data={"tasks": [
        {"content": "ok", "status": "pending"}, {"content": "", "status": "pending"}, "junk",
    ]})
    assert [t.content for t in read_tasks(state)] == ["ok"]
    assert read_tasks(AgentState(session_id="s", data={"tasks": "nope"})) == []
    assert read_tasks(None) == []


def test_render_tasks() -> None:
    assert render_tasks([]) == "The task list is empty."
    assert render_tasks([TodoItem(content="a", status="completed"), TodoItem(content="b")]) == (
        "1. [x] a (completed)\n2. [ ] b (pending)"
    )


def test_content_is_stripped() -> None:
    assert TodoItem(content="  tidy  ").content == "tidy"


async def test_a_custom_guide_and_subclassed_reminder() -> None:
    class Terse(TaskReminderMiddleware):
        def reminder(self, items: Any) -> Msg:
            text = f"<system-reminder>{len(items)} tasks</system-reminder>"
            return Msg(role="user", content=text)

    model = ScriptedModel(["ok"])
    toolkit = Toolkit()
    toolkit.register_tool(TodoTools())
    agent = make_agent(model, toolkit=toolkit, middlewares=[Terse(guide="Use todo_write.")],
                       sys_prompt="Base.")
    await call(agent)
    assert model.calls[0].messages[0].text == "Base.\n\nUse todo_write."
    assert model.calls[0].messages[-1].text == "<system-reminder>0 tasks</system-reminder>"
