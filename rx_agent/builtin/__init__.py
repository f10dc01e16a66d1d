"""Built-in middlewares (AgentScope's shipped ones) and the task-list tools.

``OtelTracingMiddleware`` lives in :mod:`rx_agent.tracing` (it is the one built-in
that talks to an outside library).
"""

from .budget import DEFAULT_BUDGET_HINT, BudgetUsage, ReplyBudgetControlMiddleware
from .final_answer import FinalAnswerFilterMiddleware
from .tasks import TaskReminderMiddleware, TodoItem, TodoListError, TodoTools

__all__ = [
    "DEFAULT_BUDGET_HINT",
    "BudgetUsage",
    "FinalAnswerFilterMiddleware",
    "ReplyBudgetControlMiddleware",
    "TaskReminderMiddleware",
    "TodoItem",
    "TodoListError",
    "TodoTools",
]
