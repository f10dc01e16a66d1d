"""Messages, content blocks, usage and the reasons a reply ends.

Everything here is a pydantic model that round-trips through JSON. Blocks carry a
``type`` discriminator so a ``Msg``'s content rebuilds into the right classes.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import Field, field_validator

from ._record import StoredRecord, new_id, now

__all__ = [
    "ChatUsage",
    "ContentBlock",
    "DataBlock",
    "GenerateReason",
    "HintBlock",
    "Msg",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolResultState",
    "ToolUseBlock",
]


class Role(enum.StrEnum):
    """Who wrote a message."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class GenerateReason(enum.StrEnum):
    """Why a reply (or one model turn) ended. Members mirror AgentScope Java."""

    MODEL_STOP = "MODEL_STOP"
    TOOL_CALLS = "TOOL_CALLS"
    STRUCTURED_OUTPUT = "STRUCTURED_OUTPUT"
    TOOL_SUSPENDED = "TOOL_SUSPENDED"
    REASONING_STOP_REQUESTED = "REASONING_STOP_REQUESTED"
    ACTING_STOP_REQUESTED = "ACTING_STOP_REQUESTED"
    PERMISSION_ASKING = "PERMISSION_ASKING"
    MIDDLEWARE_STOP_REQUESTED = "MIDDLEWARE_STOP_REQUESTED"
    ALL_TOOLS_DENIED = "ALL_TOOLS_DENIED"
    INTERRUPTED = "INTERRUPTED"
    MAX_ITERATIONS = "MAX_ITERATIONS"
    TOOL_RETURN_DIRECT = "TOOL_RETURN_DIRECT"


class ToolResultState(enum.StrEnum):
    """How one tool call ended."""

    SUCCESS = "SUCCESS"
    ERROR = "ERROR"
    DENIED = "DENIED"
    SUSPENDED = "SUSPENDED"
    INTERRUPTED = "INTERRUPTED"


class ChatUsage(StoredRecord):
    """Token usage of one model call (or a sum of several)."""

    __positional__ = ("input_tokens", "output_tokens")
    __keyword_hints__ = {"prompt_tokens": "input_tokens", "completion_tokens": "output_tokens"}

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    time: float | None = Field(default=None, description="Seconds the call took.")

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: ChatUsage) -> ChatUsage:
        def opt(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return ChatUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=opt(self.cached_tokens, other.cached_tokens),
            reasoning_tokens=opt(self.reasoning_tokens, other.reasoning_tokens),
            time=None
            if self.time is None and other.time is None
            else (self.time or 0.0) + (other.time or 0.0),
        )

    if TYPE_CHECKING:

        def __init__(
            self,
            input_tokens: int = ...,
            output_tokens: int = ...,
            *,
            cached_tokens: int | None = ...,
            reasoning_tokens: int | None = ...,
            time: float | None = ...,
        ) -> None: ...


class TextBlock(StoredRecord):
    """Visible text."""

    __positional__ = ("text",)
    type: Literal["text"] = "text"
    text: str

    if TYPE_CHECKING:

        def __init__(self, text: str, *, type: Literal["text"] = ...) -> None: ...


class ThinkingBlock(StoredRecord):
    """Model reasoning ("thinking") text, not part of the visible answer."""

    __positional__ = ("thinking",)
    type: Literal["thinking"] = "thinking"
    thinking: str

    if TYPE_CHECKING:

        def __init__(self, thinking: str, *, type: Literal["thinking"] = ...) -> None: ...


class HintBlock(StoredRecord):
    """A runtime hint for the model (reminders, budget notices)."""

    __positional__ = ("hint",)
    type: Literal["hint"] = "hint"
    hint: str

    if TYPE_CHECKING:

        def __init__(self, hint: str, *, type: Literal["hint"] = ...) -> None: ...


class DataBlock(StoredRecord):
    """Binary or remote media: base64 ``data`` or a ``url``, with its media type."""

    __positional__ = ("media_type", "data", "url")
    __keyword_hints__ = {"mime_type": "media_type", "source": "data"}
    type: Literal["data"] = "data"
    media_type: str = "application/octet-stream"
    data: str | None = Field(default=None, description="Base64-encoded bytes.")
    url: str | None = None

    if TYPE_CHECKING:

        def __init__(
            self,
            media_type: str = ...,
            data: str | None = ...,
            url: str | None = ...,
            *,
            type: Literal["data"] = ...,
        ) -> None: ...


class ToolUseBlock(StoredRecord):
    """A tool call made by the model."""

    __positional__ = ("id", "name", "input")
    __keyword_hints__ = {"arguments": "input", "args": "input"}
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    # The raw argument text when it was not a JSON object; the call then fails
    # with a clear error instead of running with guessed arguments.
    raw_input: str | None = None

    if TYPE_CHECKING:

        def __init__(
            self,
            id: str,
            name: str,
            input: dict[str, Any] = ...,
            *,
            raw_input: str | None = ...,
            type: Literal["tool_use"] = ...,
        ) -> None: ...


class ToolResultBlock(StoredRecord):
    """The result of one tool call, matched to it by ``id``."""

    __positional__ = ("id", "name", "output", "state")
    __keyword_hints__ = {"content": "output", "result": "output", "status": "state"}
    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str
    output: str | list[ContentBlock] = ""
    state: ToolResultState = ToolResultState.SUCCESS

    @property
    def text(self) -> str:
        """The output as text (text blocks joined when the output is a list)."""
        if isinstance(self.output, str):
            return self.output
        return "".join(b.text for b in self.output if isinstance(b, TextBlock))

    if TYPE_CHECKING:

        def __init__(
            self,
            id: str,
            name: str,
            output: str | list[ContentBlock] = ...,
            state: ToolResultState = ...,
            *,
            type: Literal["tool_result"] = ...,
        ) -> None: ...


ContentBlock = Annotated[
    TextBlock | ThinkingBlock | HintBlock | DataBlock | ToolUseBlock | ToolResultBlock,
    Field(discriminator="type"),
]
ToolResultBlock.model_rebuild()


class Msg(StoredRecord):
    """One message of a conversation.

    ``content`` accepts a ``str`` (stored as one :class:`TextBlock`) or a list of blocks.
    """

    __positional__ = ("role", "content", "name", "metadata")
    # Read-only views of ``content`` and the reply's reason under another name.
    __keyword_hints__ = {"tool_calls": "content", "tool_results": "content", "text": "content",
                         "thinking": "content", "reason": "generate_reason"}

    role: Role
    content: list[ContentBlock] = Field(default_factory=list)
    name: str | None = None
    metadata: dict[str, Any] | None = None
    id: str = Field(default_factory=new_id)
    created_at: float = Field(default_factory=now)
    generate_reason: GenerateReason | None = None
    usage: ChatUsage | None = None

    if TYPE_CHECKING:

        def __init__(
            self,
            role: Role | str,
            content: str | list[ContentBlock] | None = ...,
            name: str | None = ...,
            metadata: dict[str, Any] | None = ...,
            *,
            id: str = ...,
            created_at: float = ...,
            generate_reason: GenerateReason | None = ...,
            usage: ChatUsage | None = ...,
        ) -> None: ...

    @field_validator("content", mode="before")
    @classmethod
    def _text_to_blocks(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [TextBlock(text=value)] if value else []
        if value is None:
            return []
        return value

    @classmethod
    def make(
        cls,
        role: Role,
        content: list[ContentBlock],
        name: str | None = None,
        *,
        generate_reason: GenerateReason | None = None,
        usage: ChatUsage | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Self:
        """Build a message from already-valid parts without validation (runtime use)."""
        return cls._fast(
            {
                "role": role,
                "content": content,
                "name": name,
                "metadata": metadata,
                "id": new_id(),
                "created_at": now(),
                "generate_reason": generate_reason,
                "usage": usage,
            }
        )

    @property
    def text(self) -> str:
        """The concatenated text of the message's :class:`TextBlock` s."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def structured(self) -> Any:
        """The validated instance of a structured-output reply
        (``call(..., structured_model=M)``), else ``None``. Not serialized: after a JSON
        round trip the data is in ``metadata["structured_output"]``."""
        private = self.__pydantic_private__
        return private.get("structured") if private else None

    def set_structured(self, value: Any) -> None:
        """Attach a structured-output instance (the runtime does, for the final message)."""
        object.__setattr__(self, "__pydantic_private__", {"structured": value})

    @property
    def thinking(self) -> str:
        return "".join(b.thinking for b in self.content if isinstance(b, ThinkingBlock))

    @property
    def tool_calls(self) -> list[ToolUseBlock]:
        """The message's tool calls, in order."""
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if isinstance(b, ToolResultBlock)]

    @property
    def has_visible_text(self) -> bool:
        return any(isinstance(b, TextBlock) and b.text.strip() for b in self.content)

    def __repr__(self) -> str:
        reason = f", generate_reason={self.generate_reason.value}" if self.generate_reason else ""
        return f"Msg(role={self.role.value!r}, content={self.content!r}{reason})"
