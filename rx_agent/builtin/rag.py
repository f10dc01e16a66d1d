"""``RAGMiddleware``: answers grounded in a knowledge base (AgentScope Python's RAG).

Two modes:

* ``"inject"`` (point ``ON_REASONING``): before each reasoning step the passages
  retrieved for the user's latest message are appended to the model input as a
  ``<knowledge>`` message, with their sources. They are model input only: the
  session context never stores them. Retrieval runs once per reply (its result is
  kept in the call's :class:`~rx_agent.RuntimeContext`), not once per round.
* ``"tool"`` (no hook point): the agent gets a ``retrieve_knowledge(query, top_k)``
  tool and the model decides when to search.

The knowledge base is any :class:`~rx_agent.Knowledge`; two ship:
:class:`~rx_agent.SqliteKnowledge` (offline full-text search) and
:class:`~rx_agent.VectorKnowledge` (embeddings, numpy).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

from reactivex import Observable

from ..context import AgentState, RuntimeContext
from ..event import AgentEvent
from ..message import Msg, Role, TextBlock
from ..middleware import Agent, ExtensionPoint, Handler, MiddlewareBase, ReasoningInput
from ..tool import Tool
from ._knowledge import (
    Document,
    Knowledge,
    Passage,
    check_filters,
    check_top_k,
    render_passages,
)
from ._knowledge_sqlite import SqliteKnowledge
from ._knowledge_vector import VectorKnowledge
from ._per_reply import inject_per_reply

__all__ = [
    "RAG_METADATA_KEY",
    "Document",
    "Knowledge",
    "Passage",
    "RAGMiddleware",
    "SqliteKnowledge",
    "VectorKnowledge",
    "latest_user_text",
]

RAG_METADATA_KEY = "rx_agent.rag"
"""``Msg.metadata`` key of the injected ``<knowledge>`` message (its passages' sources)."""

FiltersLike = Mapping[str, Any] | Callable[[RuntimeContext], Mapping[str, Any] | None] | None

_TOOL_DESCRIPTION = (
    "Search the knowledge base and return the most relevant passages, each with its "
    "source. Use it before answering questions the knowledge base may cover, and cite "
    "the sources you use."
)

_INJECT_HEADER = (
    "Passages retrieved from the knowledge base for the user's latest message. Use "
    "them when they are relevant, cite their sources, and say so when they do not "
    "answer the question."
)


def latest_user_text(state: AgentState | None, messages: Sequence[Msg] = ()) -> str:
    """The text of the last user message of the session (else of ``messages``) that
    has any: what the user last asked."""
    for source in (state.context if state is not None else (), messages):
        for msg in reversed(source):
            if msg.role is Role.USER and not _injected(msg) and msg.text.strip():
                return msg.text
    return ""


def _injected(msg: Msg) -> bool:
    # Reminders and passages that middlewares add to the model input carry an
    # ``rx_agent.*`` metadata key; they are not what the user asked.
    return any(key.startswith("rx_agent.") for key in msg.metadata or ())


class RAGMiddleware(MiddlewareBase):
    """Retrieval-augmented generation over a :class:`~rx_agent.Knowledge` base.

    Args:
        knowledge: what to search.
        mode: ``"inject"`` adds the passages found for the user's latest message to
            the model input before reasoning; ``"tool"`` gives the model a
            ``retrieve_knowledge`` tool instead.
        top_k: passages per search (the tool's default; the model may ask for up to
            ``max_top_k``).
        filters: metadata filters for every search: a mapping
            (``{"lang": "en"}``), or a function of the call's ``RuntimeContext``
            returning one (per-user or per-tenant access).
        min_score: passages scoring below it are dropped (scores depend on the
            knowledge base: BM25 for ``SqliteKnowledge``, cosine for ``VectorKnowledge``).
        tool_name: the tool's name in ``"tool"`` mode.

    Stateless: a reply's passages live in its ``RuntimeContext``, so one instance
    serves any number of agents and concurrent calls.
    """

    def __init__(
        self,
        knowledge: Knowledge,
        mode: Literal["inject", "tool"] = "inject",
        *,
        top_k: int = 5,
        max_top_k: int = 20,
        filters: FiltersLike = None,
        min_score: float | None = None,
        tool_name: str = "retrieve_knowledge",
    ) -> None:
        for method in ("search", "add"):
            if not callable(getattr(knowledge, method, None)):
                raise TypeError(
                    f"knowledge must implement the Knowledge protocol (async search() and "
                    f"add()); {type(knowledge).__name__} has no {method}()"
                )
        if mode not in ("inject", "tool"):
            raise ValueError(f"mode must be 'inject' or 'tool', got {mode!r}")
        self.top_k = check_top_k(top_k)
        self.max_top_k = check_top_k(max_top_k, "max_top_k")
        if self.max_top_k < self.top_k:
            raise ValueError(f"max_top_k ({max_top_k}) must be >= top_k ({top_k})")
        if filters is not None and not callable(filters):
            check_filters(filters)  # a bad static filter fails here, not at the first reply
        if min_score is not None and (isinstance(min_score, bool)
                                      or not isinstance(min_score, (int, float))):
            raise TypeError(f"min_score must be a number or None, got {min_score!r}")
        self.knowledge = knowledge
        self.mode = mode
        self.filters = filters
        self.min_score = min_score
        self.tool_name = tool_name
        self._tool = Tool(self._retrieve, name=tool_name, description=_TOOL_DESCRIPTION)
        # One key per instance: two RAG middlewares on one agent keep their own passages.
        self._key = f"rx_agent.rag.{id(self):x}"

    def __repr__(self) -> str:
        return f"RAGMiddleware({self.knowledge!r}, mode={self.mode!r}, top_k={self.top_k})"

    def active_points(self) -> Collection[ExtensionPoint]:
        if self.mode == "inject":
            return frozenset({ExtensionPoint.ON_REASONING})
        return frozenset()  # tool mode only brings a tool

    def list_tools(self) -> Sequence[Tool]:
        return (self._tool,) if self.mode == "tool" else ()

    # -- retrieval -------------------------------------------------------------------------

    def filters_for(self, ctx: RuntimeContext | None) -> Mapping[str, Any] | None:
        """The metadata filters of a search made in the call ``ctx``."""
        if callable(self.filters):
            if ctx is None:
                raise RuntimeError("RAGMiddleware filters depend on the call, but the "
                                   "search has no RuntimeContext")
            return self.filters(ctx)
        return self.filters

    async def retrieve(self, query: str, ctx: RuntimeContext | None = None,
                       top_k: int | None = None) -> list[Passage]:
        """Search the knowledge base as the middleware does (filters, ``min_score``)."""
        found = await self.knowledge.search(query, top_k or self.top_k, self.filters_for(ctx))
        if self.min_score is not None:
            found = [p for p in found if p.score >= self.min_score]
        return found

    # -- inject mode -------------------------------------------------------------------------

    def on_reasoning(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ReasoningInput,
        next: Handler[ReasoningInput],
    ) -> Observable[AgentEvent]:
        query = latest_user_text(ctx.agent_state, input.messages)
        if not query:
            return next(input)
        return inject_per_reply(ctx, self._key, query, lambda: self.retrieve(query, ctx),
                                self.knowledge_message, input, next, type(self).__name__)

    def knowledge_message(self, passages: Sequence[Passage]) -> Msg:
        """The model-input message for ``passages`` (override to change the wording)."""
        body = f"{_INJECT_HEADER}\n\n{render_passages(passages)}"
        return Msg(
            role=Role.USER,
            content=[TextBlock(text=f"<knowledge>\n{body}\n</knowledge>")],
            metadata={RAG_METADATA_KEY: [p.source for p in passages]},
        )

    # -- tool mode ---------------------------------------------------------------------------

    async def _retrieve(self, query: str, ctx: RuntimeContext, top_k: int | None = None) -> str:
        """Search the knowledge base.

        Args:
            query: what to look for, in a few specific words.
            top_k: how many passages to return (default set by the application).
        """
        if top_k is not None and not 1 <= top_k <= self.max_top_k:
            raise ValueError(f"top_k must be from 1 to {self.max_top_k}, got {top_k}")
        if not query.strip():
            raise ValueError("query must not be blank")
        passages = await self.retrieve(query, ctx, top_k)
        if not passages:
            return f"No passages found for {query!r}."
        return render_passages(passages)
