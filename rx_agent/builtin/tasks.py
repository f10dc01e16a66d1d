"""The task list: ``TodoTools`` (the ``todo_write`` tool) and ``TaskReminderMiddleware``.

The list lives in the session's :class:`~rx_agent.AgentState` (``state.data["tasks"]``,
a list of plain dicts) so it is saved and restored with the session like the rest of
the state. The middleware keeps the model aware of it: a system-prompt section
explains the tool, and before every reasoning step the current list is shown to the
model as a ``<system-reminder>`` message. That reminder goes into the model input
only; it is never written to the conversation, so it does not pile up round after
round.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from reactivex import Observable

from ..agent._extensions import provide_task_list
from ..context import AgentState, RuntimeContext
from ..errors import RxAgentError
from ..event import AgentEvent
from ..message import Msg, Role, TextBlock
from ..middleware import Agent, ExtensionPoint, Handler, MiddlewareBase, ReasoningInput
from ..tool import Toolkit, tool

__all__ = [
    "TASKS_KEY",
    "TaskReminderMiddleware",
    "TodoItem",
    "TodoListError",
    "TodoStatus",
    "TodoTools",
    "read_tasks",
    "render_tasks",
]

TASKS_KEY = "tasks"
"""Key of the task list in ``AgentState.data``."""

TodoStatus = Literal["pending", "in_progress", "completed"]

REMINDER_METADATA_KEY = "rx_agent.reminder"
"""``Msg.metadata`` key marking the reminder message (value ``"tasks"``)."""


class TodoListError(RxAgentError, ValueError):
    """``todo_write`` was given a list that breaks a rule (the model sees the text)."""


class TodoItem(BaseModel):
    """One task: what to do and where it stands."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    content: str
    """What the task is, in one short imperative sentence."""
    status: TodoStatus = "pending"
    """pending, in_progress (at most one task at a time) or completed."""

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("task content must not be blank")
        return value


_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}

TOOL_GUIDE = """\
## Task list
You have a `todo_write` tool for planning and tracking multi-step work.
- For a task that takes several steps, write the plan first: call `todo_write` \
with the whole list of tasks, each with a `content` and a `status` \
(`pending`, `in_progress` or `completed`).
- Every call replaces the whole list, so always send every task, not only the \
changed ones.
- Keep exactly one task `in_progress` while you work on it and mark it \
`completed` as soon as it is done; never have more than one `in_progress`.
- Skip the list for a simple question you can answer in one step.
The current list is shown to you in a <system-reminder> before each step."""


def read_tasks(state: AgentState | None) -> list[TodoItem]:
    """The task list stored in ``state`` (entries that no longer validate are skipped)."""
    if state is None:
        return []
    raw = state.data.get(TASKS_KEY)
    if not isinstance(raw, list):
        return []
    items: list[TodoItem] = []
    for entry in raw:
        # A stored session may have been edited or written by an older version;
        # one bad entry must not hide the rest of the plan.
        try:
            items.append(TodoItem.model_validate(entry))
        except ValidationError:
            continue
    return items


def render_tasks(items: Sequence[TodoItem]) -> str:
    """The list as the model sees it, one numbered line per task."""
    if not items:
        return "The task list is empty."
    lines = [f"{i}. {_MARK[t.status]} {t.content} ({t.status})" for i, t in enumerate(items, 1)]
    return "\n".join(lines)


def _summary(items: Sequence[TodoItem]) -> str:
    counts = {status: sum(1 for t in items if t.status == status) for status in _MARK}
    return (
        f"{len(items)} task(s): {counts['completed']} completed, "
        f"{counts['in_progress']} in progress, {counts['pending']} pending"
    )


class TodoTools:
    """Tools for the task list; register with ``toolkit.register_tool(TodoTools())``.

    ``enable_task_list=True`` on the agent registers it together with
    :class:`TaskReminderMiddleware`.
    """

    @tool
    async def todo_write(self, todos: list[TodoItem], ctx: RuntimeContext) -> str:
        """Replace the whole task list with `todos` (send every task, not only changes).

        Args:
            todos: The complete, ordered task list. Each task has a non-blank
                `content` and a `status` of `pending`, `in_progress` or `completed`;
                at most one task may be `in_progress`.
        """
        # async: the update runs on the agent's loop, never racing a reasoning step
        # that reads the list, and no worker thread is needed for a dict write.
        state = ctx.agent_state if ctx is not None else None
        if state is None:
            raise TodoListError("todo_write needs an agent session (no AgentState bound)")
        items = [t if isinstance(t, TodoItem) else TodoItem.model_validate(t) for t in todos]
        active = [t.content for t in items if t.status == "in_progress"]
        if len(active) > 1:
            raise TodoListError(
                f"at most one task may be in_progress, got {len(active)}: "
                + "; ".join(repr(c) for c in active)
                + ". Keep one in_progress and set the others to pending or completed."
            )
        state.data[TASKS_KEY] = [t.model_dump() for t in items]
        if not items:
            return "Task list cleared."
        return f"Task list updated ({_summary(items)}).\n{render_tasks(items)}"


class TaskReminderMiddleware(MiddlewareBase):
    """Keeps the model aware of the task list kept by :class:`TodoTools`.

    Points: ``ON_SYSTEM_PROMPT`` (appends a section explaining ``todo_write``) and
    ``ON_REASONING`` (appends the current list, as a ``<system-reminder>`` user
    message, to ``ReasoningInput.messages``). The reminder is model input only: it is
    not stored in the session context.

    Stateless: the list is read from ``ctx.agent_state`` at every step, so one
    instance serves any number of agents and concurrent calls.
    """

    def __init__(self, guide: str = TOOL_GUIDE) -> None:
        self.guide = guide

    def active_points(self) -> Collection[ExtensionPoint]:
        return frozenset({ExtensionPoint.ON_SYSTEM_PROMPT, ExtensionPoint.ON_REASONING})

    def on_system_prompt(
        self, agent: Agent, ctx: RuntimeContext, current_prompt: str
    ) -> Observable[str] | str:
        if not self.guide:
            return current_prompt
        return f"{current_prompt}\n\n{self.guide}" if current_prompt else self.guide

    def on_reasoning(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ReasoningInput,
        next: Handler[ReasoningInput],
    ) -> Observable[AgentEvent]:
        reminder = self.reminder(read_tasks(ctx.agent_state))
        return next(input.with_(messages=(*input.messages, reminder)))

    def reminder(self, items: Sequence[TodoItem]) -> Msg:
        """The reminder message for ``items`` (override to change the wording)."""
        if items:
            body = (
                "Current task list (update it with todo_write as you make progress):\n"
                + render_tasks(items)
            )
        else:
            body = (
                "The task list is empty. If the request needs several steps, plan them "
                "with todo_write before you start."
            )
        metadata: dict[str, Any] = {REMINDER_METADATA_KEY: "tasks"}
        return Msg(
            role=Role.USER,
            content=[TextBlock(text=f"<system-reminder>\n{body}\n</system-reminder>")],
            metadata=metadata,
        )


def _task_list_for(toolkit: Toolkit) -> MiddlewareBase:
    """What ``enable_task_list(True)`` adds: the ``todo_write`` tool and the reminder."""
    if "todo_write" not in toolkit:
        toolkit.register_tool(TodoTools())
    return TaskReminderMiddleware()


provide_task_list(_task_list_for)
