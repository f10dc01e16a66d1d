"""``LongTermMemoryMiddleware``: what an agent remembers about a user across sessions.

AgentScope Python ships two long-term memories: ``AgenticMemoryMiddleware`` (the
agent records and deletes facts itself, with tools) and ``Mem0Middleware`` (facts are
extracted from each exchange by a model). Here one middleware does both, chosen by
``mode``:

* ``"tool"``: ``remember(fact)``, ``forget(fact_id)`` and ``recall(query)`` tools;
* ``"extract"``: after each reply, a model call lists new facts from the exchange
  (its output never reaches the reply's stream);
* ``"both"``.

In every mode, before each reasoning step the user's facts relevant to their latest
message (topped up with their latest facts) are appended to the model input as a
``<long-term-memory>`` message; like the task-list reminder it is never stored in the
session. Facts are keyed by ``RuntimeContext.user_id``; a call without a user id
neither reads nor writes memory (an anonymous caller must never see another's facts).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Sequence
from typing import Any, Literal

import reactivex.operators as ops
from reactivex import Observable
from reactivex import abc as rxabc

from .._rx import await_observable, from_coroutine
from ..context import RuntimeContext
from ..event import AgentEvent
from ..message import GenerateReason, Msg, Role, TextBlock
from ..middleware import (
    Agent,
    AgentFinishOutcome,
    ExtensionPoint,
    Handler,
    MiddlewareBase,
    ReasoningInput,
)
from ..middleware.types import check_model_like
from ..model.base import TextChunk
from ..options import GenerateOptions
from ..tool import Tool
from ._knowledge import check_top_k
from ._memory import LongTermMemory, MemoryFact
from ._memory_sqlite import SqliteLongTermMemory
from ._per_reply import inject_per_reply
from .rag import latest_user_text

__all__ = [
    "DEFAULT_EXTRACT_PROMPT",
    "MEMORY_METADATA_KEY",
    "LongTermMemory",
    "LongTermMemoryMiddleware",
    "MemoryFact",
    "SqliteLongTermMemory",
    "parse_facts",
]

log = logging.getLogger("rx_agent.memory")

MEMORY_METADATA_KEY = "rx_agent.memory"
"""``Msg.metadata`` key of the injected ``<long-term-memory>`` message (its fact ids)."""

DEFAULT_EXTRACT_PROMPT = """\
You maintain the long-term memory of an assistant about one user. Read the exchange \
below and list the facts about the user worth remembering in later conversations: \
personal details they shared, lasting preferences, ongoing goals and decisions. Skip \
small talk, one-off requests, the assistant's own statements and anything already \
known. Write each fact as one short, self-contained sentence about "the user".
Answer with JSON only, in the form {"facts": ["..."]}; use an empty list when there \
is nothing new."""

_TRANSCRIPT_CHARS = 4000
_NO_EXTRACTION = frozenset({GenerateReason.PERMISSION_ASKING, GenerateReason.TOOL_SUSPENDED,
                            GenerateReason.INTERRUPTED})
_FENCE = re.compile(r"^```[\w-]*\s*|\s*```$")


def parse_facts(text: str) -> list[str]:
    """The facts of an extraction answer: ``{"facts": [...]}`` or a JSON list
    (a Markdown code fence around it is fine); ``ValueError`` for anything else."""
    body = _FENCE.sub("", text.strip()).strip()
    start = min((i for i in (body.find("{"), body.find("[")) if i != -1), default=-1)
    if start == -1:
        raise ValueError(f"no JSON in the extraction answer: {text[:200]!r}")
    try:
        data, _ = json.JSONDecoder().raw_decode(body[start:])
    except ValueError as exc:
        raise ValueError(f"the extraction answer is not valid JSON: {exc}") from None
    facts = data.get("facts") if isinstance(data, dict) else data
    if not isinstance(facts, list) or not all(isinstance(f, str) for f in facts):
        raise ValueError('the extraction answer must be {"facts": [strings]}, got '
                         f"{text[:200]!r}")
    return [f.strip() for f in facts if f.strip()]


class LongTermMemoryMiddleware(MiddlewareBase):
    """Long-term memory per user, across sessions.

    Args:
        memory: where facts are kept (:class:`~rx_agent.SqliteLongTermMemory`, or any
            :class:`~rx_agent.LongTermMemory`).
        mode: ``"tool"`` (the model records facts with ``remember`` and deletes them
            with ``forget``), ``"extract"`` (a model call after each reply records new
            facts) or ``"both"``.
        extract_model: the model that extracts facts (default: the agent's model).
            Its call is made directly, not through the agent's ``on_model_call``
            chain, and its output is not part of the reply.
        extract_prompt: the extraction instructions (known facts are appended).
        top_k: at most this many facts are shown to the model per reply.
        max_facts: at most this many facts are recorded per extraction.

    Points: ``ON_REASONING`` (the facts in the model input), plus ``ON_AGENT_FINISH``
    when extracting. Stateless: a reply's facts are cached in its ``RuntimeContext``,
    so one instance serves any number of agents, users and concurrent calls.
    """

    def __init__(
        self,
        memory: LongTermMemory,
        mode: Literal["tool", "extract", "both"] = "tool",
        *,
        extract_model: Any = None,
        extract_prompt: str = DEFAULT_EXTRACT_PROMPT,
        top_k: int = 5,
        max_facts: int = 10,
    ) -> None:
        for method in ("add", "search", "recent", "delete"):
            if not callable(getattr(memory, method, None)):
                raise TypeError(
                    f"memory must implement the LongTermMemory protocol (async add, search, "
                    f"recent, delete); {type(memory).__name__} has no {method}()"
                )
        if mode not in ("tool", "extract", "both"):
            raise ValueError(f"mode must be 'tool', 'extract' or 'both', got {mode!r}")
        if extract_model is not None:
            check_model_like("extract_model", extract_model)
        if not isinstance(extract_prompt, str) or not extract_prompt.strip():
            raise ValueError("extract_prompt must be a non-blank str")
        self.memory = memory
        self.mode = mode
        self.extract_model = extract_model
        self.extract_prompt = extract_prompt
        self.top_k = check_top_k(top_k)
        self.max_facts = check_top_k(max_facts, "max_facts")
        self._key = f"rx_agent.memory.{id(self):x}"
        self._tools = (Tool(self._remember, name="remember"), Tool(self._forget, name="forget"),
                       Tool(self._recall, name="recall"))

    def __repr__(self) -> str:
        return f"LongTermMemoryMiddleware({self.memory!r}, mode={self.mode!r})"

    @property
    def extracts(self) -> bool:
        return self.mode in ("extract", "both")

    def active_points(self) -> Collection[ExtensionPoint]:
        points = {ExtensionPoint.ON_REASONING}
        if self.extracts:
            points.add(ExtensionPoint.ON_AGENT_FINISH)
        return frozenset(points)

    def list_tools(self) -> Sequence[Tool]:
        if self.mode == "extract":
            return ()
        return self._tools

    # -- retrieval ---------------------------------------------------------------------------

    async def relevant(self, user_id: str, query: str) -> list[MemoryFact]:
        """The facts shown to the model for ``query``: the best matches, topped up
        with the user's latest facts, at most ``top_k``."""
        found = await self.memory.search(user_id, query, self.top_k) if query.strip() else []
        if len(found) < self.top_k:
            seen = {f.id for f in found}
            for fact in await self.memory.recent(user_id, self.top_k):
                if fact.id not in seen and len(found) < self.top_k:
                    found.append(fact)
        return found

    def on_reasoning(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: ReasoningInput,
        next: Handler[ReasoningInput],
    ) -> Observable[AgentEvent]:
        user = ctx.user_id
        if not user:
            return next(input)
        query = latest_user_text(ctx.agent_state, input.messages)
        return inject_per_reply(ctx, self._key, query, lambda: self.relevant(user, query),
                                self.memory_message, input, next, type(self).__name__)

    def memory_message(self, facts: Sequence[MemoryFact]) -> Msg:
        """The model-input message for ``facts`` (override to change the wording)."""
        lines = "\n".join(f"- [{f.id}] {f.text}" for f in facts)
        body = ("What you remember about this user from earlier conversations (ids in "
                f"brackets):\n{lines}\nUse it when it is relevant.")
        if self.mode != "extract":
            body += (" Record new lasting facts with `remember`; remove wrong or "
                     "outdated ones with `forget`.")
        return Msg(
            role=Role.USER,
            content=[TextBlock(text=f"<long-term-memory>\n{body}\n</long-term-memory>")],
            metadata={MEMORY_METADATA_KEY: [f.id for f in facts]},
        )

    # -- tools -------------------------------------------------------------------------------

    def _user(self, ctx: RuntimeContext | None) -> str:
        user = ctx.user_id if ctx is not None else None
        if not user:
            raise RuntimeError("long-term memory is kept per user, and this call has no "
                               "user id (RuntimeContext(user_id=...))")
        return user

    async def _remember(self, fact: str, ctx: RuntimeContext) -> str:
        """Record a lasting fact about the user for later conversations.

        Args:
            fact: One short, self-contained sentence about the user, such as
                "The user's name is Ada." or "The user prefers metric units."
        """
        stored = await self.memory.add(self._user(ctx), fact, {"via": "tool"})
        ctx.put(self._key, None)  # the next round shows the memory as it now is
        return f"Remembered [{stored.id}]: {stored.text}"

    async def _forget(self, fact_id: str, ctx: RuntimeContext) -> str:
        """Delete a remembered fact that is wrong, outdated or the user wants forgotten.

        Args:
            fact_id: The fact's id, as shown in brackets in the long-term memory.
        """
        if not await self.memory.delete(self._user(ctx), fact_id.strip().strip("[]")):
            raise ValueError(f"there is no remembered fact with id {fact_id!r} for this user")
        ctx.put(self._key, None)
        return f"Forgot [{fact_id}]."

    async def _recall(self, query: str, ctx: RuntimeContext) -> str:
        """Search everything remembered about the user.

        Args:
            query: A few words about what to look for.
        """
        facts = await self.memory.search(self._user(ctx), query, 20)
        if not facts:
            return f"Nothing remembered about {query!r}."
        return "\n".join(f"- [{f.id}] {f.text}" for f in facts)

    # -- extraction --------------------------------------------------------------------------

    def on_agent_finish(
        self, agent: Agent, ctx: RuntimeContext, outcome: AgentFinishOutcome
    ) -> Observable[Any] | None:
        user = ctx.user_id
        result = outcome.result
        if (not user or result is None or outcome.reason in _NO_EXTRACTION
                or not result.text.strip()):
            return None
        said = latest_user_text(ctx.agent_state)
        if not said:
            return None
        model = self.extract_model if self.extract_model is not None else agent.model

        async def body(observer: rxabc.ObserverBase[Any]) -> None:
            try:
                await self.extract(model, user, said, result.text, ctx)
            except Exception as exc:
                # The reply is done and delivered; a failed extraction costs this
                # exchange's facts, not the reply.
                log.warning("long-term memory extraction failed for user %r: %s", user, exc)

        return from_coroutine(body)

    async def extract(self, model: Any, user_id: str, user_text: str, answer: str,
                      ctx: RuntimeContext | None = None) -> list[MemoryFact]:
        """Ask ``model`` for the facts of one exchange and record them; the new facts."""
        known = await self.memory.recent(user_id, 50)
        prompt = self.extract_prompt
        if known:
            prompt += "\n\nAlready known:\n" + "\n".join(f"- {f.text}" for f in known)
        transcript = (f"User: {user_text[-_TRANSCRIPT_CHARS:]}\n\n"
                      f"Assistant: {answer[:_TRANSCRIPT_CHARS]}")
        messages = [Msg(role=Role.SYSTEM, content=prompt), Msg(role=Role.USER, content=transcript)]
        chunks = await await_observable(
            model.stream(messages, (), GenerateOptions()).pipe(ops.to_list()), [])
        text = "".join(c.text for c in chunks if isinstance(c, TextChunk))
        known_ids = {f.id for f in known}
        added = []
        for fact in parse_facts(text)[: self.max_facts]:
            try:
                stored = await self.memory.add(user_id, fact, {"via": "extraction"})
            except ValueError as exc:  # one unusable fact (too long) costs only itself
                log.warning("long-term memory skipped an extracted fact: %s", exc)
                continue
            if stored.id not in known_ids:
                known_ids.add(stored.id)
                added.append(stored)
        if added and ctx is not None:
            ctx.put(self._key, None)
        return added
