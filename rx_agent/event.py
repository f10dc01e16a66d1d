"""The events an agent streams, one class per Java ``AgentEvent`` type.

Every event is a pydantic model with ``id``, ``created_at``, ``source``, ``metadata``
and a ``type`` discriminator, so ``parse_event(e.model_dump_json())`` rebuilds it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from ._event_base import AgentEvent
from ._event_hitl import (
    AllToolsDeniedEvent,
    ExternalExecutionResultEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
)
from .message import (
    ChatUsage,
    DataBlock,
    GenerateReason,
    Msg,
    ToolResultState,
)
from .permissions import ConfirmResult, PermissionRule

__all__ = [
    "AgentEndEvent",
    "AgentEvent",
    "AgentResultEvent",
    "AgentStartEvent",
    "AllToolsDeniedEvent",
    "AnyEvent",
    "ConfirmResult",
    "ContextCompressedEvent",
    "CustomEvent",
    "DataBlockDeltaEvent",
    "DataBlockEndEvent",
    "DataBlockStartEvent",
    "ExceedMaxItersEvent",
    "ExternalExecutionResultEvent",
    "HintBlockEvent",
    "ModelCallEndEvent",
    "ModelCallStartEvent",
    "NestedEvent",
    "PermissionRule",
    "RequestContinueEvent",
    "RequestStopEvent",
    "RequireExternalExecutionEvent",
    "RequireUserConfirmEvent",
    "SessionRecoveredEvent",
    "TextBlockDeltaEvent",
    "TextBlockEndEvent",
    "TextBlockStartEvent",
    "ThinkingBlockDeltaEvent",
    "ThinkingBlockEndEvent",
    "ThinkingBlockStartEvent",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolResultDataDeltaEvent",
    "ToolResultEndEvent",
    "ToolResultStartEvent",
    "ToolResultTextDeltaEvent",
    "UserConfirmResultEvent",
    "parse_event",
]

# -- lifecycle -------------------------------------------------------------------


class AgentStartEvent(AgentEvent):
    type: Literal["agent_start"] = "agent_start"
    session_id: str | None = None
    reply_id: str
    name: str
    user_id: str | None = None


class AgentEndEvent(AgentEvent):
    type: Literal["agent_end"] = "agent_end"
    reply_id: str


class AgentResultEvent(AgentEvent):
    type: Literal["agent_result"] = "agent_result"
    result: Msg


class ModelCallStartEvent(AgentEvent):
    type: Literal["model_call_start"] = "model_call_start"
    reply_id: str
    model_name: str | None = None


class ModelCallEndEvent(AgentEvent):
    type: Literal["model_call_end"] = "model_call_end"
    reply_id: str
    usage: ChatUsage | None = None
    finish_reason: str | None = None


# -- content blocks ----------------------------------------------------------------


class TextBlockStartEvent(AgentEvent):
    type: Literal["text_block_start"] = "text_block_start"
    reply_id: str
    block_id: str


class TextBlockDeltaEvent(AgentEvent):
    type: Literal["text_block_delta"] = "text_block_delta"
    reply_id: str
    block_id: str
    delta: str


class TextBlockEndEvent(AgentEvent):
    type: Literal["text_block_end"] = "text_block_end"
    reply_id: str
    block_id: str


class ThinkingBlockStartEvent(AgentEvent):
    type: Literal["thinking_block_start"] = "thinking_block_start"
    reply_id: str
    block_id: str


class ThinkingBlockDeltaEvent(AgentEvent):
    type: Literal["thinking_block_delta"] = "thinking_block_delta"
    reply_id: str
    block_id: str
    delta: str


class ThinkingBlockEndEvent(AgentEvent):
    type: Literal["thinking_block_end"] = "thinking_block_end"
    reply_id: str
    block_id: str


class DataBlockStartEvent(AgentEvent):
    type: Literal["data_block_start"] = "data_block_start"
    reply_id: str
    block_id: str
    media_type: str = "application/octet-stream"


class DataBlockDeltaEvent(AgentEvent):
    type: Literal["data_block_delta"] = "data_block_delta"
    reply_id: str
    block_id: str
    delta: str = Field(description="A base64 chunk of the block's bytes.")
    @property
    def data(self) -> str:  # ``delta``, by AgentScope Python's name
        return self.delta


class DataBlockEndEvent(AgentEvent):
    type: Literal["data_block_end"] = "data_block_end"
    reply_id: str
    block_id: str


class HintBlockEvent(AgentEvent):
    type: Literal["hint_block"] = "hint_block"
    hint: str
    reply_id: str | None = None


# -- tool calls and results --------------------------------------------------------


class ToolCallStartEvent(AgentEvent):
    type: Literal["tool_call_start"] = "tool_call_start"
    reply_id: str
    tool_call_id: str
    tool_call_name: str


class ToolCallDeltaEvent(AgentEvent):
    type: Literal["tool_call_delta"] = "tool_call_delta"
    reply_id: str
    tool_call_id: str
    tool_call_name: str
    delta: str = Field(description="A fragment of the call's JSON arguments.")


class ToolCallEndEvent(AgentEvent):
    type: Literal["tool_call_end"] = "tool_call_end"
    reply_id: str
    tool_call_id: str
    tool_call_name: str


class ToolResultStartEvent(AgentEvent):
    type: Literal["tool_result_start"] = "tool_result_start"
    reply_id: str
    tool_call_id: str
    tool_call_name: str


class ToolResultTextDeltaEvent(AgentEvent):
    type: Literal["tool_result_text_delta"] = "tool_result_text_delta"
    reply_id: str
    tool_call_id: str
    tool_call_name: str
    delta: str


class ToolResultDataDeltaEvent(AgentEvent):
    type: Literal["tool_result_data_delta"] = "tool_result_data_delta"
    reply_id: str
    tool_call_id: str
    tool_call_name: str
    delta: DataBlock


class ToolResultEndEvent(AgentEvent):
    type: Literal["tool_result_end"] = "tool_result_end"
    reply_id: str
    tool_call_id: str
    tool_call_name: str
    state: ToolResultState = ToolResultState.SUCCESS


# -- control -----------------------------------------------------------------------


class ExceedMaxItersEvent(AgentEvent):
    type: Literal["exceed_max_iters"] = "exceed_max_iters"
    max_iters: int
    current_iter: int


class RequestStopEvent(AgentEvent):
    """Asks the loop to stop once the current step's stream is drained."""

    type: Literal["request_stop"] = "request_stop"
    reason: str = ""
    generate_reason: GenerateReason = GenerateReason.MIDDLEWARE_STOP_REQUESTED

    if TYPE_CHECKING:

        def __init__(
            self,
            reason: str = ...,
            generate_reason: GenerateReason = ...,
            *,
            id: str = ...,
            created_at: float = ...,
            source: str | None = ...,
            metadata: dict[str, Any] = ...,
        ) -> None: ...


class RequestContinueEvent(AgentEvent):
    """Asks the loop to run another round instead of finishing (AgentScope Python's
    ``ContinueOnce``). Heard from ``on_reasoning``/``on_model_call`` output on a round
    that answers without tool calls; ``hint`` goes to the model as a user message;
    ``extra_iters`` raises the round limit (the total stays <= 2 x ``max_iters``)."""

    type: Literal["request_continue"] = "request_continue"
    hint: str | None = None
    extra_iters: int = Field(default=0, ge=0)

    if TYPE_CHECKING:

        def __init__(
            self,
            hint: str | None = ...,
            extra_iters: int = ...,
            *,
            id: str = ...,
            created_at: float = ...,
            source: str | None = ...,
            metadata: dict[str, Any] = ...,
        ) -> None: ...


class CustomEvent(AgentEvent):
    """An application-defined event; ``value`` must be JSON-serialisable to round-trip."""

    type: Literal["custom"] = "custom"
    name: str
    value: Any = None
    __keyword_hints__ = {"data": "value", "payload": "value"}

    if TYPE_CHECKING:

        def __init__(
            self,
            name: str,
            value: Any = ...,
            *,
            id: str = ...,
            created_at: float = ...,
            source: str | None = ...,
            metadata: dict[str, Any] = ...,
        ) -> None: ...


class SessionRecoveredEvent(AgentEvent):
    """The session was repaired when this call loaded it: a worker that served it stopped
    mid-acting (killed, crashed), so ``tool_call_ids`` got synthesized INTERRUPTED
    results. Streamed right after ``AgentStartEvent``; middleware is not replayed."""

    type: Literal["session_recovered"] = "session_recovered"
    session_id: str
    tool_call_ids: list[str] = Field(default_factory=list)

    if TYPE_CHECKING:

        def __init__(
            self,
            session_id: str,
            tool_call_ids: list[str] = ...,
            *,
            id: str = ...,
            created_at: float = ...,
            source: str | None = ...,
            metadata: dict[str, Any] = ...,
        ) -> None: ...


# -- context and nesting -------------------------------------------------------------


class ContextCompressedEvent(AgentEvent):
    """``on_compress_context`` replaced the session context at the top of round
    ``iteration`` (a :class:`~rx_agent.CompactionMiddleware` summary, say); the new
    context is what later rounds see and what the state saves. Token figures are the
    compressing middleware's estimates, when it gives them."""

    type: Literal["context_compressed"] = "context_compressed"
    iteration: int
    messages_before: int
    messages_after: int
    tokens_before: int | None = None
    tokens_after: int | None = None


class NestedEvent(AgentEvent):
    """An event of an inner stream carried in this agent's stream: a sub-agent run as
    a tool (``scope="sub_agent"``, between the tool call's result start and end) or a
    middleware's own model call (``scope="compaction"``). The reply's text, thinking
    and tool-call consumers never mistake it for the outer agent's own; ``event`` is
    the original (nested again for a sub-agent of a sub-agent)."""

    type: Literal["nested"] = "nested"
    scope: str
    event: AnyEvent
    agent: str | None = Field(default=None, description="Name of the inner agent.")
    tool_call_id: str | None = Field(default=None,
                                     description="The outer tool call that runs it.")

    if TYPE_CHECKING:

        def __init__(
            self,
            scope: str,
            event: AgentEvent,
            agent: str | None = ...,
            tool_call_id: str | None = ...,
            *,
            id: str = ...,
            created_at: float = ...,
            source: str | None = ...,
            metadata: dict[str, Any] = ...,
        ) -> None: ...

    def innermost(self) -> AgentEvent:
        """The original event under every level of nesting."""
        event: AgentEvent = self.event
        while isinstance(event, NestedEvent):
            event = event.event
        return event


AnyEvent = Annotated[
    AgentStartEvent
    | AgentEndEvent
    | AgentResultEvent
    | ModelCallStartEvent
    | ModelCallEndEvent
    | TextBlockStartEvent
    | TextBlockDeltaEvent
    | TextBlockEndEvent
    | ThinkingBlockStartEvent
    | ThinkingBlockDeltaEvent
    | ThinkingBlockEndEvent
    | DataBlockStartEvent
    | DataBlockDeltaEvent
    | DataBlockEndEvent
    | HintBlockEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
    | ToolResultStartEvent
    | ToolResultTextDeltaEvent
    | ToolResultDataDeltaEvent
    | ToolResultEndEvent
    | ExceedMaxItersEvent
    | RequestStopEvent
    | RequestContinueEvent
    | AllToolsDeniedEvent
    | RequireUserConfirmEvent
    | UserConfirmResultEvent
    | RequireExternalExecutionEvent
    | ExternalExecutionResultEvent
    | SessionRecoveredEvent
    | ContextCompressedEvent
    | NestedEvent
    | CustomEvent,
    Field(discriminator="type"),
]
"""The union of every concrete event, discriminated by ``type``."""

NestedEvent.model_rebuild()  # its ``event`` field is the union above


@functools.cache
def _adapter() -> TypeAdapter[AgentEvent]:
    # Built on first use: the union's schema is the costliest part of importing events.
    return TypeAdapter(AnyEvent)


def parse_event(data: str | bytes | bytearray | dict[str, Any]) -> AgentEvent:
    """Rebuild the right :class:`AgentEvent` subclass from JSON text, bytes or a dict."""
    if isinstance(data, dict):
        return _adapter().validate_python(data)
    if isinstance(data, (str, bytes, bytearray)):
        return _adapter().validate_json(data)
    raise TypeError(f"parse_event() takes JSON text, bytes or a dict, not {type(data).__name__}")
