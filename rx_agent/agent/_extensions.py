"""Where the built-ins plug into the agent layer, so that it never imports them.

``enable_task_list(True)`` needs the task-list middleware and its ``todo_write`` tool,
which live in :mod:`rx_agent.builtin.tasks` (a layer above). That module registers
its factory here when it is imported; the first ``enable_task_list(True)`` loads it
by name (``rx_agent`` imports its built-ins lazily), like a plugin entry point.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..middleware.base import MiddlewareBase
from ..tool.toolkit import Toolkit

__all__ = ["enable_tasks", "provide_task_list"]

TaskListFactory = Callable[[Toolkit], MiddlewareBase]
"""Adds the task-list tools to a toolkit and returns the middleware that goes with them."""

_task_list: list[TaskListFactory] = []
_DEFAULT_PROVIDER = "rx_agent.builtin.tasks"


def provide_task_list(factory: TaskListFactory) -> None:
    _task_list[:] = [factory]


def enable_tasks(toolkit: Toolkit) -> MiddlewareBase:
    if not _task_list:
        importlib.import_module(_DEFAULT_PROVIDER)  # registers itself
    if not _task_list:  # pragma: no cover - the provider failed to register
        raise RuntimeError(
            f"enable_task_list(True): {_DEFAULT_PROVIDER} registered no task list"
        )
    return _task_list[0](toolkit)
