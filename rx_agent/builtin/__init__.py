"""Built-in middlewares (AgentScope's shipped ones), their components and the
task-list tools: every one is importable from here.

Each lives in its own public module (``rx_agent.builtin.rag`` ...), which keeps its
constants and helpers. ``OtelTracingMiddleware`` lives in :mod:`rx_agent.tracing` (it
is the one built-in that talks to an outside library) and is listed here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _publish
from .budget import DEFAULT_BUDGET_HINT, BudgetUsage, ReplyBudgetControlMiddleware
from .final_answer import FinalAnswerFilterMiddleware
from .tasks import TaskReminderMiddleware, TodoItem, TodoListError, TodoTools

if TYPE_CHECKING:
    from ..tracing import OtelTracingMiddleware
    from .compaction import CompactionMiddleware
    from .memory import LongTermMemory, LongTermMemoryMiddleware, MemoryFact, SqliteLongTermMemory
    from .rag import Document, Knowledge, Passage, RAGMiddleware, SqliteKnowledge, VectorKnowledge
    from .router import ChatModelCandidate, ModelRouterMiddleware, RoutingClassifier
    from .tts import TTSMiddleware

# Built-ins with more to import (SQLite, a vector index, the classifier, OpenTelemetry)
# load on first access (rx_agent/_publish.py); tests/core/test_publish.py keeps this
# table, the TYPE_CHECKING block and __all__ in step.
_LAZY = {
    "CompactionMiddleware": ".compaction",
    "LongTermMemory": ".memory",
    "LongTermMemoryMiddleware": ".memory",
    "MemoryFact": ".memory",
    "SqliteLongTermMemory": ".memory",
    "Document": ".rag",
    "Knowledge": ".rag",
    "Passage": ".rag",
    "RAGMiddleware": ".rag",
    "SqliteKnowledge": ".rag",
    "VectorKnowledge": ".rag",
    "ChatModelCandidate": ".router",
    "ModelRouterMiddleware": ".router",
    "RoutingClassifier": ".router",
    "TTSMiddleware": ".tts",
    "OtelTracingMiddleware": "rx_agent.tracing",
}

__all__ = [
    "DEFAULT_BUDGET_HINT",
    "BudgetUsage",
    "ChatModelCandidate",
    "CompactionMiddleware",
    "Document",
    "FinalAnswerFilterMiddleware",
    "Knowledge",
    "LongTermMemory",
    "LongTermMemoryMiddleware",
    "MemoryFact",
    "ModelRouterMiddleware",
    "OtelTracingMiddleware",
    "Passage",
    "RAGMiddleware",
    "ReplyBudgetControlMiddleware",
    "RoutingClassifier",
    "SqliteKnowledge",
    "SqliteLongTermMemory",
    "TTSMiddleware",
    "TaskReminderMiddleware",
    "TodoItem",
    "TodoListError",
    "TodoTools",
    "VectorKnowledge",
]

# The built-ins' modules are public: their classes keep their module paths.
__getattr__, __dir__ = _publish.lazy_names(globals(), _LAZY, __all__, shorten=False)
