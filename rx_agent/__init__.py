"""rx_agent: AgentScope Java's agent runtime and middleware system, on RxPY.

Everything a user needs is importable from here; submodules are for the curious.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from . import _publish
from ._version import __version__
from .agent import (
    NoResultError,
    ReActAgent,
    ReActAgentBuilder,
    ResumeError,
    StructuredOutputError,
)
from .context import AgentState, RuntimeContext
from .errors import RxAgentError
from .event import (
    AgentEndEvent,
    AgentEvent,
    AgentResultEvent,
    AgentStartEvent,
    AllToolsDeniedEvent,
    ConfirmResult,
    ContextCompressedEvent,
    CustomEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    ExceedMaxItersEvent,
    ExternalExecutionResultEvent,
    HintBlockEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    NestedEvent,
    PermissionRule,
    RequestContinueEvent,
    RequestStopEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    SessionRecoveredEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
    UserConfirmResultEvent,
    parse_event,
)
from .message import (
    ChatUsage,
    DataBlock,
    GenerateReason,
    HintBlock,
    Msg,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
)
from .middleware import (
    ActingInput,
    AgentFinishOutcome,
    AgentInput,
    CompressContextInput,
    ExecutionPlan,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    PlanError,
    ReasoningInput,
)
from .model import ChatModel, ModelError, ScriptedModel
from .options import GenerateOptions
from .permissions import Permission
from .plugin import Plugin
from .session import (
    ConcurrentSessionModificationError,
    ConflictPolicy,
    InMemorySessionStore,
    SessionBusyError,
    SessionCorruptError,
    SessionKey,
    SessionStore,
)
from .tool import Tool, ToolArgumentError, Toolkit, tool

# The application decides where log records go. Without a handler here, Python's
# "last resort" handler would print rx_agent's warnings to stderr when the
# application configured no logging at all.
logging.getLogger("rx_agent").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from . import operators  # noqa: F401  (a submodule, not in __all__)
    from .a2a import A2AAgent, RemoteAgentError
    from .builtin.budget import ReplyBudgetControlMiddleware
    from .builtin.compaction import CompactionMiddleware
    from .builtin.final_answer import FinalAnswerFilterMiddleware
    from .builtin.memory import (
        LongTermMemory,
        LongTermMemoryMiddleware,
        MemoryFact,
        SqliteLongTermMemory,
    )
    from .builtin.rag import (
        Document,
        Knowledge,
        Passage,
        RAGMiddleware,
        SqliteKnowledge,
        VectorKnowledge,
    )
    from .builtin.router import ChatModelCandidate, ModelRouterMiddleware
    from .builtin.tasks import TaskReminderMiddleware, TodoTools
    from .builtin.tts import TTSMiddleware
    from .model.anthropic import AnthropicChatModel
    from .model.embeddings import Embeddings, OpenAIEmbeddings
    from .model.espeak import EspeakTTSModel
    from .model.openai import OpenAIChatModel
    from .model.openai_tts import OpenAITTSModel
    from .model.tts import TTSModel
    from .session import (
        JournalEntry,
        PostgresSessionStore,
        RedisSessionStore,
        SqliteSessionStore,
        session_store_from_url,
        subscribe_durable_events,
    )
    from .tool.mcp import McpToolSource
    from .tracing import OtelTracingMiddleware, TracingMiddleware

# Names whose modules pull optional dependencies (httpx, the OpenTelemetry SDK) or
# are rarely needed load on first access (rx_agent/_publish.py). Keep the table, the
# TYPE_CHECKING block above and __all__ in step (tests/core/test_publish.py checks them).
_LAZY = {
    "A2AAgent": "rx_agent.a2a",
    "RemoteAgentError": "rx_agent.a2a",
    "OpenAIChatModel": "rx_agent.model.openai",
    "OtelTracingMiddleware": "rx_agent.tracing",
    "TracingMiddleware": "rx_agent.tracing",
    "FinalAnswerFilterMiddleware": "rx_agent.builtin.final_answer",
    "TaskReminderMiddleware": "rx_agent.builtin.tasks",
    "TodoTools": "rx_agent.builtin.tasks",
    "ReplyBudgetControlMiddleware": "rx_agent.builtin.budget",
    "RAGMiddleware": "rx_agent.builtin.rag",
    "Knowledge": "rx_agent.builtin.rag",
    "Passage": "rx_agent.builtin.rag",
    "Document": "rx_agent.builtin.rag",
    "SqliteKnowledge": "rx_agent.builtin.rag",
    "VectorKnowledge": "rx_agent.builtin.rag",
    "Embeddings": "rx_agent.model.embeddings",
    "OpenAIEmbeddings": "rx_agent.model.embeddings",
    "LongTermMemoryMiddleware": "rx_agent.builtin.memory",
    "LongTermMemory": "rx_agent.builtin.memory",
    "MemoryFact": "rx_agent.builtin.memory",
    "SqliteLongTermMemory": "rx_agent.builtin.memory",
    "CompactionMiddleware": "rx_agent.builtin.compaction",
    "SqliteSessionStore": "rx_agent.session",
    "RedisSessionStore": "rx_agent.session",
    "PostgresSessionStore": "rx_agent.session",
    "session_store_from_url": "rx_agent.session",
    "subscribe_durable_events": "rx_agent.session",
    "JournalEntry": "rx_agent.session",
    "McpToolSource": "rx_agent.tool.mcp",
    "AnthropicChatModel": "rx_agent.model.anthropic",
    "ModelRouterMiddleware": "rx_agent.builtin.router",
    "ChatModelCandidate": "rx_agent.builtin.router",
    "TTSMiddleware": "rx_agent.builtin.tts",
    "TTSModel": "rx_agent.model.tts",
    "EspeakTTSModel": "rx_agent.model.espeak",
    "OpenAITTSModel": "rx_agent.model.openai_tts",
    "operators": ".operators",  # ``rx_agent.operators`` after a bare ``import rx_agent``
}
__getattr__, __dir__ = _publish.lazy_names(globals(), _LAZY)

__all__ = [
    "A2AAgent",
    "ActingInput",
    "AgentEndEvent",
    "AgentEvent",
    "AgentFinishOutcome",
    "AgentInput",
    "AgentResultEvent",
    "AgentStartEvent",
    "AgentState",
    "AllToolsDeniedEvent",
    "AnthropicChatModel",
    "ChatModel",
    "ChatModelCandidate",
    "ChatUsage",
    "CompactionMiddleware",
    "CompressContextInput",
    "ConcurrentSessionModificationError",
    "ConfirmResult",
    "ConflictPolicy",
    "ContextCompressedEvent",
    "CustomEvent",
    "DataBlock",
    "DataBlockDeltaEvent",
    "DataBlockEndEvent",
    "DataBlockStartEvent",
    "Document",
    "Embeddings",
    "EspeakTTSModel",
    "ExceedMaxItersEvent",
    "ExecutionPlan",
    "ExtensionPoint",
    "ExternalExecutionResultEvent",
    "FinalAnswerFilterMiddleware",
    "GenerateOptions",
    "GenerateReason",
    "HintBlock",
    "HintBlockEvent",
    "InMemorySessionStore",
    "JournalEntry",
    "Knowledge",
    "LongTermMemory",
    "LongTermMemoryMiddleware",
    "McpToolSource",
    "MemoryFact",
    "MiddlewareBase",
    "ModelCallEndEvent",
    "ModelCallInput",
    "ModelCallStartEvent",
    "ModelError",
    "ModelRouterMiddleware",
    "Msg",
    "NestedEvent",
    "NoResultError",
    "OpenAIChatModel",
    "OpenAIEmbeddings",
    "OpenAITTSModel",
    "OtelTracingMiddleware",
    "Passage",
    "Permission",
    "PermissionRule",
    "PlanError",
    "Plugin",
    "PostgresSessionStore",
    "RAGMiddleware",
    "ReActAgent",
    "ReActAgentBuilder",
    "ReasoningInput",
    "RedisSessionStore",
    "RemoteAgentError",
    "ReplyBudgetControlMiddleware",
    "RequestContinueEvent",
    "RequestStopEvent",
    "RequireExternalExecutionEvent",
    "RequireUserConfirmEvent",
    "ResumeError",
    "Role",
    "RuntimeContext",
    "RxAgentError",
    "ScriptedModel",
    "SessionBusyError",
    "SessionCorruptError",
    "SessionKey",
    "SessionRecoveredEvent",
    "SessionStore",
    "SqliteKnowledge",
    "SqliteLongTermMemory",
    "SqliteSessionStore",
    "StructuredOutputError",
    "TTSMiddleware",
    "TTSModel",
    "TaskReminderMiddleware",
    "TextBlock",
    "TextBlockDeltaEvent",
    "TextBlockEndEvent",
    "TextBlockStartEvent",
    "ThinkingBlock",
    "ThinkingBlockDeltaEvent",
    "ThinkingBlockEndEvent",
    "ThinkingBlockStartEvent",
    "TodoTools",
    "Tool",
    "ToolArgumentError",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolResultBlock",
    "ToolResultDataDeltaEvent",
    "ToolResultEndEvent",
    "ToolResultStartEvent",
    "ToolResultState",
    "ToolResultTextDeltaEvent",
    "ToolUseBlock",
    "Toolkit",
    "TracingMiddleware",
    "UserConfirmResultEvent",
    "VectorKnowledge",
    "__version__",
    "parse_event",
    "session_store_from_url",
    "subscribe_durable_events",
    "tool",
]

_publish.publish_all(globals(), __all__)
