"""Chat models: the interface, the offline scripted model and typed errors; the
classifier-model interface (``rx_agent.model.classifier``)."""

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
from .classifier import (
    BinaryAnswer,
    BinaryCriteria,
    BinaryQuestion,
    ChoiceAnswer,
    ChoiceQuestion,
    ClassifierModelBase,
    ClassifierResponse,
    RefusalAnswer,
    ScoreAnswer,
    ScoreQuestion,
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
    "BinaryAnswer",
    "BinaryCriteria",
    "BinaryQuestion",
    "ChatModel",
    "ChoiceAnswer",
    "ChoiceQuestion",
    "ClassifierModelBase",
    "ClassifierResponse",
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
    "RefusalAnswer",
    "ScoreAnswer",
    "ScoreQuestion",
    "ScriptExhaustedError",
    "ScriptedModel",
    "TextChunk",
    "ThinkingChunk",
    "ToolCallChunk",
    "UsageChunk",
]
