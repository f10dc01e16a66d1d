"""Long-term memory records and protocol: facts about a user, kept across sessions."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LongTermMemory", "MemoryFact", "check_fact", "check_user", "normalize_fact"]

MAX_FACT_CHARS = 2000


class MemoryFact(BaseModel):
    """One thing remembered about one user."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str
    """Short, stable id (what ``forget`` takes)."""
    user_id: str
    """Whose fact it is; a memory only ever answers a user with their own facts."""
    text: str
    """The fact, one self-contained sentence ("The user's name is Ada.")."""
    created_at: float
    """When it was recorded (epoch seconds)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Where it came from (``{"via": "tool"}`` or ``{"via": "extraction"}``), and more."""
    score: float | None = None
    """Relevance to the query in a search's answer (higher is better), else ``None``."""


@runtime_checkable
class LongTermMemory(Protocol):
    """Facts per user, across sessions (what :class:`~rx_agent.LongTermMemoryMiddleware`
    needs). Every method takes the user: an implementation must never return, change
    or delete another user's facts."""

    async def add(self, user_id: str, text: str,
                  metadata: Mapping[str, Any] | None = None) -> MemoryFact:
        """Record a fact (an equal one already recorded is returned instead)."""
        ...

    async def search(self, user_id: str, query: str, top_k: int = 5) -> list[MemoryFact]:
        """The user's facts most relevant to ``query``, best first."""
        ...

    async def recent(self, user_id: str, limit: int = 20) -> list[MemoryFact]:
        """The user's latest facts, newest first."""
        ...

    async def delete(self, user_id: str, fact_id: str) -> bool:
        """Delete one of the user's facts; ``False`` if the user has no such fact."""
        ...


def check_user(user_id: object) -> str:
    if not isinstance(user_id, str) or not user_id:
        raise ValueError(f"long-term memory needs a non-empty user id, got {user_id!r}")
    return user_id


def check_fact(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("a fact must be a non-blank str")
    text = " ".join(text.split())
    if len(text) > MAX_FACT_CHARS:
        raise ValueError(f"a fact is at most {MAX_FACT_CHARS} characters, got {len(text)}; "
                         "record one short fact at a time")
    return text


_NON_WORD = re.compile(r"[^\w]+")


def normalize_fact(text: str) -> str:
    """The form two facts are compared in (case, spacing and punctuation ignored)."""
    return _NON_WORD.sub(" ", text.lower()).strip()
