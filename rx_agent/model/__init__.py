"""Chat models: the interface, the offline scripted model and typed errors."""

from .base import (
    AsyncChatModel,
    ChatModel,
    FinishChunk,
    ModelChunk,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from .errors import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelRateLimitError,
    ModelRequestError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
    ScriptExhaustedError,
)
from .scripted import ScriptedModel

__all__ = [
    "AsyncChatModel",
    "ChatModel",
    "FinishChunk",
    "ModelAuthenticationError",
    "ModelChunk",
    "ModelConnectionError",
    "ModelError",
    "ModelRateLimitError",
    "ModelRequestError",
    "ModelResponseError",
    "ModelServerError",
    "ModelTimeoutError",
    "ScriptExhaustedError",
    "ScriptedModel",
    "TextChunk",
    "ThinkingChunk",
    "ToolCallChunk",
    "UsageChunk",
]
