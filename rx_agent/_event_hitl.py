"""The human-in-the-loop events: a pause for confirmation or for external tools, the
answers that resume it, and the notice that every tool of a batch was denied.

Part of :mod:`rx_agent.event` (import them from there); kept apart to keep that
module readable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ._event_base import AgentEvent
from .message import ToolResultBlock, ToolUseBlock
from .permissions import ConfirmResult

__all__ = [
    "AllToolsDeniedEvent",
    "ExternalExecutionResultEvent",
    "RequireExternalExecutionEvent",
    "RequireUserConfirmEvent",
    "UserConfirmResultEvent",
]


class AllToolsDeniedEvent(AgentEvent):
    type: Literal["all_tools_denied"] = "all_tools_denied"
    denied_tool_calls: list[ToolUseBlock]

    if TYPE_CHECKING:

        def __init__(
            self,
            denied_tool_calls: list[ToolUseBlock],
            *,
            id: str = ...,
            created_at: float = ...,
            source: str | None = ...,
            metadata: dict[str, Any] = ...,
        ) -> None: ...


class RequireUserConfirmEvent(AgentEvent):
    type: Literal["require_user_confirm"] = "require_user_confirm"
    reply_id: str
    tool_calls: list[ToolUseBlock]


class UserConfirmResultEvent(AgentEvent):
    type: Literal["user_confirm_result"] = "user_confirm_result"
    reply_id: str
    confirm_results: list[ConfirmResult]

    if TYPE_CHECKING:

        def __init__(
            self,
            reply_id: str,
            confirm_results: list[ConfirmResult],
            *,
            id: str = ...,
            created_at: float = ...,
            source: str | None = ...,
            metadata: dict[str, Any] = ...,
        ) -> None: ...


class RequireExternalExecutionEvent(AgentEvent):
    type: Literal["require_external_execution"] = "require_external_execution"
    reply_id: str
    tool_calls: list[ToolUseBlock]


class ExternalExecutionResultEvent(AgentEvent):
    type: Literal["external_execution_result"] = "external_execution_result"
    reply_id: str
    tool_results: list[ToolResultBlock]

    if TYPE_CHECKING:

        def __init__(
            self,
            reply_id: str,
            tool_results: list[ToolResultBlock],
            *,
            id: str = ...,
            created_at: float = ...,
            source: str | None = ...,
            metadata: dict[str, Any] = ...,
        ) -> None: ...
