"""Every setting of an agent, declared once: its check and its documentation.

``ReActAgent``'s keywords, the builder's setters, the agent's read-only properties and
their Java spellings all come from :data:`SETTINGS`. The constructor's signature is
the typed view of the same list (names, types and defaults, what IDEs and type
checkers read); ``tests/agent/test_settings.py`` keeps the two equal, so a setting
added here and not there (or the other way round) fails the tests.

A check takes the value a user passed and returns the value the agent keeps (a list of
rules as a tuple, ``"fail"`` as ``ConflictPolicy.FAIL``) or raises the ``TypeError`` /
``ValueError`` that names the setting. Each value is checked once: by the builder's
setter, or by the constructor for a keyword.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..context import RuntimeContext
from ._checks import (
    check_backoff,
    check_bool,
    check_conflict_policy,
    check_failover_listener,
    check_generate_options,
    check_middlewares,
    check_model,
    check_name,
    check_plugins,
    check_positive,
    check_rules,
    check_seconds,
    check_session_store,
    check_str,
    check_toolkit,
    show,
)
from ._permission_handler import check_permission_handler

__all__ = ["BY_NAME", "SETTINGS", "Setting", "check_settings"]

Check = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Setting:
    """One agent setting: the keyword (also the builder's setter and, with ``prop``,
    the agent's property), its check and its documentation."""

    name: str
    check: Check
    doc: str
    prop: bool = True
    """Whether ``agent.<name>`` reads it back (``enable_task_list`` is not kept)."""


def _kept(check: Callable[[Any], None]) -> Check:
    """A check that only raises, as one that returns the value it accepted."""

    def run(value: Any) -> Any:
        check(value)
        return value

    return run


def _optional(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def _seconds(label: str, *, positive: bool) -> Check:
    return lambda value: check_seconds(label, value, positive=positive)


def _context(value: Any) -> Any:
    if not isinstance(value, RuntimeContext):
        raise TypeError(f"tool_execution_context must be a RuntimeContext, got {show(value)}")
    return value


def _positive(label: str) -> Check:
    return _kept(lambda value: check_positive(label, value))


SETTINGS: tuple[Setting, ...] = (
    Setting("name", _kept(check_name),
            "The agent's name: its events' source, and the session id of a call without one."),
    Setting("model", _kept(lambda m: check_model("model", m)), "The chat model."),
    Setting("sys_prompt", _kept(lambda v: check_str("sys_prompt", v)),
            "The system prompt (stripped; an empty one sends no system message)."),
    Setting("toolkit", _optional(_kept(check_toolkit)),
            "The agent's tools, with those its plugins and the task list add."),
    Setting("middlewares", lambda v: tuple(check_middlewares(v, "middlewares")),
            "Every registered middleware in plan order, silent ones included."),
    Setting("max_iters", _positive("max_iters"),
            "Reasoning rounds before the summary call (default 10)."),
    Setting("max_retries", _positive("max_retries"),
            "Total attempts per model call (default 3); ``n <= 0`` is a ``ValueError``."),
    Setting("fallback_model", _optional(_kept(lambda m: check_model("fallback_model", m))),
            "The model a call switches to when the primary fails before its first chunk."),
    Setting("failover_listener", _optional(_kept(check_failover_listener)),
            "``listener(primary_model, error)``, called when a call switches to the "
            "fallback model; its exceptions are logged and ignored."),
    Setting("tool_execution_context", _optional(_context),
            "A ``RuntimeContext`` whose attributes tools see under the per-call context."),
    Setting("enable_task_list", _kept(lambda v: check_bool("enable_task_list", v)),
            "Add the task list (``TaskReminderMiddleware`` and its ``todo_write`` tool).",
            prop=False),
    Setting("session_store", _optional(_kept(check_session_store)),
            "Where sessions are kept (default: in memory)."),
    Setting("generate_options", _optional(_kept(check_generate_options)),
            "Generation options sent with every model call."),
    Setting("retry_backoff", check_backoff,
            "Seconds before the first retry (doubling, with jitter) and the cap."),
    Setting("permission_rules", check_rules,
            "Permission rules, checked in order before a tool call runs."),
    Setting("session_wait", _seconds("session_wait", positive=False),
            "Seconds a call waits for a durable session another worker is serving "
            "(default 30), then fails with ``SessionBusyError``."),
    Setting("session_lease_ttl", _seconds("session_lease_ttl", positive=True),
            "Seconds a durable session's lease lives unless renewed (default 30; renewed "
            "at a third of it while a call runs): how soon a crashed worker's session frees."),
    Setting("conflict_policy", check_conflict_policy,
            "What a save does when a newer writer saved first (default ``FAIL``)."),
    Setting("tool_timeout", _optional(_seconds("tool_timeout", positive=True)),
            "Seconds one tool call may take when its tool sets no ``timeout`` (Java's tool "
            "execution timeout); past it the call is cancelled, the model gets an error "
            "result, and the loop goes on."),
    Setting("plugins", lambda v: tuple(check_plugins(v, "plugins")),
            "The plugins given at build time, in registration order."),
    Setting("permission_handler", _optional(_kept(check_permission_handler)),
            "``fn(call, ctx)``, asked about each \"ask\" tool call while the reply runs "
            "(Blade's ``permissionHandler``): ``True``/``False``, ``\"allow\"``/"
            "``\"deny\"``, a ``ConfirmResult``, or ``None``/``\"ask\"`` to pause for a human "
            "as without it. See docs/hitl.md."),
    Setting("loop_lag_threshold",
            _optional(_seconds("loop_lag_threshold", positive=False)),
            "Seconds the event loop may stall during a call before the agent logs a "
            "warning naming the tool or hook that blocked it (a ``time.sleep`` in an async "
            "tool, say); ``0`` turns it off. Default: the ``RX_AGENT_LOOP_LAG`` environment "
            "variable, else off."),
)

BY_NAME: Mapping[str, Setting] = {s.name: s for s in SETTINGS}


def check_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every value checked by its setting (a keyword no setting has is a bug here:
    unknown keywords never reach this far)."""
    return {name: BY_NAME[name].check(value) for name, value in values.items()}
