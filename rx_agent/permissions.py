"""Tool permissions: rules, the user's confirmations, and the decision between them.

A call is decided by the rules that match it (remembered ones from the session,
agent-level ones, then the tool's own): ``deny`` beats ``ask`` beats ``allow``;
without a matching rule the tool's default permission applies.
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ._record import Record, StoredRecord
from .message import ToolUseBlock

__all__ = ["ConfirmResult", "Permission", "PermissionLike", "PermissionRule", "decide"]


class Permission(enum.StrEnum):
    """What may happen to a tool call. A ``str`` enum: ``"allow"`` works wherever a
    ``Permission`` is expected."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


PermissionLike = Permission | Literal["allow", "ask", "deny"]
"""Where a permission is taken: the enum or its string value."""


class PermissionRule(StoredRecord):
    """A permission rule: which tool calls it matches and the decision it makes.

    ``pattern`` is a glob over the tool name (``"fs.*"``, ``"*"``); ``when`` is an
    optional predicate over the call's arguments (not serialised: rules a user
    remembers through :class:`ConfirmResult` are pattern-only). Among the rules that
    match a call, ``deny`` beats ``ask`` beats ``allow``.
    """

    __positional__ = ("pattern", "decision", "reason", "when")
    pattern: str = "*"
    decision: Permission
    reason: str | None = None
    when: Callable[[dict[str, Any]], bool] | None = Field(default=None, exclude=True)

    if TYPE_CHECKING:

        def __init__(
            self,
            pattern: str = ...,
            decision: PermissionLike = ...,
            reason: str | None = ...,
            when: Callable[[dict[str, Any]], bool] | None = ...,
        ) -> None: ...

    def matches(self, tool_name: str, arguments: dict[str, Any]) -> bool:
        if not fnmatch.fnmatchcase(tool_name, self.pattern):
            return False
        return self.when is None or bool(self.when(arguments))


class ConfirmResult(Record):
    """One user decision on a pending tool call (the call may carry edited input)."""

    __positional__ = ("tool_call", "confirmed", "reason", "rules")
    tool_call: ToolUseBlock
    confirmed: bool
    reason: str | None = None
    rules: list[PermissionRule] | None = None

    if TYPE_CHECKING:

        def __init__(
            self,
            tool_call: ToolUseBlock,
            confirmed: bool,
            reason: str | None = ...,
            rules: list[PermissionRule] | None = ...,
        ) -> None: ...


_STRICTEST_FIRST = (Permission.DENY, Permission.ASK, Permission.ALLOW)


def decide(
    call: ToolUseBlock,
    rules: Iterable[PermissionRule],
    default: PermissionLike = Permission.ALLOW,
) -> tuple[Permission, str | None]:
    """The decision for one call and the reason of the rule that made it.

    A rule whose predicate raises denies (fails closed), with the error as reason.
    """
    found: dict[Permission, str | None] = {}
    for rule in rules:
        try:
            hit = rule.matches(call.name, call.input)
        except Exception as exc:
            found.setdefault(Permission.DENY, f"permission rule failed: {exc}")
            continue
        if hit:
            found.setdefault(Permission(rule.decision), rule.reason)
    for decision in _STRICTEST_FIRST:
        if decision in found:
            return decision, found[decision]
    return Permission(default), None
