"""``CompactionMiddleware``: summarize older messages when the prompt grows too big.

At the top of every ReAct round (``on_compress_context``) the middleware estimates the
size of the prompt the round would send. Past ``trigger_tokens`` it asks a model (the
agent's, or ``summary_model``) to summarize the older messages and hands the loop a
context made of that summary and the recent messages, which the loop stores in the
session like any other change. What it keeps:

* the system prompt (it is not part of the context: every round rebuilds it);
* the latest user message and everything after it, and at least the last
  ``keep_last`` messages;
* every tool call together with its result (the cut moves back to keep a pair whole).

The summary call's events reach the stream wrapped in
:class:`~rx_agent.NestedEvent` (``scope="compaction"``), so they never show up as the
reply's text; the loop then emits :class:`~rx_agent.ContextCompressedEvent`. A summary
call that fails or answers nothing leaves the context as it was (logged), so the
reply goes on.

Token estimate (:func:`estimate_tokens`): the usage the model reported for the latest
assistant message (its input and output tokens cover the prompt up to and including
that message), plus a heuristic for what came after it, or for everything when no
usage is known (or it predates the last compaction): 4 characters per token, 4
tokens per message, tool schemas included.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Collection, Sequence
from typing import Any

import reactivex
from reactivex import Observable
from reactivex import operators as ops

from ..agent._side_call import model_events, text_of
from ..context import RuntimeContext
from ..event import AgentEvent, ContextCompressedEvent, NestedEvent
from ..message import (
    DataBlock,
    HintBlock,
    Msg,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ..middleware import Agent, CompressContextInput, ExtensionPoint, Handler, MiddlewareBase
from ..middleware.types import ModelLike, check_model_like

__all__ = [
    "COMPACTION_METADATA_KEY",
    "DEFAULT_SUMMARY_PROMPT",
    "CompactionMiddleware",
    "estimate_tokens",
]

logger = logging.getLogger("rx_agent")

COMPACTION_METADATA_KEY = "rx_agent.compaction"
"""``Msg.metadata`` key of the summary message (what it replaced, the estimates)."""

DEFAULT_SUMMARY_PROMPT = (
    "You compress the history of a conversation between a user and an AI assistant "
    "that uses tools. Write a concise summary of the transcript you are given that keeps "
    "everything needed to continue the work: the user's goals and constraints, facts and "
    "numbers found, decisions made, tool results that matter, names, paths and open "
    "questions. Write only the summary, in the language of the conversation."
)

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"

_CHARS_PER_TOKEN = 4
_TOKENS_PER_MESSAGE = 4
_DATA_TOKENS = 256  # an image or audio block: a rough, fixed share
_TRANSCRIPT_LIMIT = 2000  # characters of one tool result shown to the summarizer


def estimate_tokens(
    messages: Sequence[Msg], system: Msg | None = None, tools: Sequence[dict[str, Any]] = ()
) -> int:
    """The prompt size of ``system`` + ``messages`` + ``tools``, in tokens (see the
    module's docs for the rule)."""
    start, known = _reported(messages)
    if start == 0:
        known = _heuristic(system) if system is not None else 0
        known += math.ceil(len(json.dumps(list(tools))) / _CHARS_PER_TOKEN) if tools else 0
    return known + sum(_heuristic(m) for m in messages[start:])


def _reported(messages: Sequence[Msg]) -> tuple[int, int]:
    """(index after the latest assistant message with usable usage, its tokens), or
    (0, 0). Usage older than the latest compaction summary measured a longer prompt."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if _is_summary(m):
            return 0, 0
        usage = m.usage
        if m.role is Role.ASSISTANT and usage is not None and usage.input_tokens > 0:
            newer = [s.created_at for s in messages[:i] if _is_summary(s)]
            if newer and max(newer) > m.created_at:
                return 0, 0
            return i + 1, usage.input_tokens + usage.output_tokens
    return 0, 0


def _heuristic(m: Msg) -> int:
    chars = 0
    data = 0
    for block in m.content:
        if isinstance(block, TextBlock):
            chars += len(block.text)
        elif isinstance(block, ThinkingBlock):
            chars += len(block.thinking)
        elif isinstance(block, HintBlock):
            chars += len(block.hint)
        elif isinstance(block, ToolUseBlock):
            chars += len(block.name) + len(json.dumps(block.input))
        elif isinstance(block, ToolResultBlock):
            chars += len(block.name) + len(block.text)
            if not isinstance(block.output, str):
                data += sum(_DATA_TOKENS for b in block.output if isinstance(b, DataBlock))
        elif isinstance(block, DataBlock):
            data += _DATA_TOKENS
    return _TOKENS_PER_MESSAGE + math.ceil(chars / _CHARS_PER_TOKEN) + data


def _is_summary(m: Msg) -> bool:
    return bool(m.metadata) and COMPACTION_METADATA_KEY in m.metadata  # type: ignore[operator]


class CompactionMiddleware(MiddlewareBase):
    """Summarizes older messages once the estimated prompt passes ``trigger_tokens``.

    ``keep_last`` messages at the end stay verbatim (more when a tool call's result or
    the latest user message needs it); ``summary_model`` (default: the agent's model)
    writes the summary, instructed by ``summary_prompt``. Stateless: one instance
    may serve many agents and concurrent calls.
    """

    def __init__(
        self,
        trigger_tokens: int,
        keep_last: int = 6,
        summary_model: ModelLike | None = None,
        *,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
    ) -> None:
        for label, value, least in (("trigger_tokens", trigger_tokens, 1),
                                    ("keep_last", keep_last, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"{label} must be an int >= {least}, got {value!r}")
        if summary_model is not None:
            check_model_like("summary_model", summary_model)
        if not isinstance(summary_prompt, str) or not summary_prompt.strip():
            raise ValueError("summary_prompt must be a non-empty str")
        self.trigger_tokens = trigger_tokens
        self.keep_last = keep_last
        self.summary_model = summary_model
        self.summary_prompt = summary_prompt

    def active_points(self) -> Collection[ExtensionPoint]:
        return {ExtensionPoint.ON_COMPRESS_CONTEXT}

    def on_compress_context(
        self,
        agent: Agent,
        ctx: RuntimeContext,
        input: CompressContextInput,
        next: Handler[CompressContextInput],
    ) -> Observable[AgentEvent]:
        messages = input.messages
        before = estimate_tokens(messages, input.system, input.tools)
        if before < self.trigger_tokens:
            return next(input)
        cut = self.cut(messages)
        if cut == 0:
            return next(input)  # nothing old enough to summarize
        head, tail = messages[:cut], messages[cut:]
        model = self.summary_model or input.model
        source = agent.name

        def run(_: Any = None) -> Observable[AgentEvent]:
            seen: list[AgentEvent] = []
            failed: list[Exception] = []

            def fail(exc: Exception, _: Any) -> Observable[AgentEvent]:
                failed.append(exc)
                return reactivex.empty()

            summary = model_events(model, self._request(head), source=source).pipe(
                ops.do_action(seen.append),
                ops.map(lambda e: NestedEvent.make(source, scope="compaction", event=e)),
                ops.catch(fail),
            )

            def after(_: Any = None) -> Observable[AgentEvent]:
                text = text_of(seen).strip()
                if failed or not text:
                    why = f"the summary call failed: {failed[0]!r}" if failed else \
                        "the summary was empty"
                    logger.warning("CompactionMiddleware left the context as it was: %s", why)
                    return next(input)
                new = (self._summary_msg(text, len(head), before), *tail)
                after_tokens = estimate_tokens(new, input.system, input.tools)

                def figures(event: AgentEvent) -> AgentEvent:
                    if type(event) is ContextCompressedEvent:
                        return event.model_copy(update={"tokens_before": before,
                                                        "tokens_after": after_tokens})
                    return event

                return next(input.with_(messages=new)).pipe(ops.map(figures))

            return reactivex.concat(summary, reactivex.defer(after))

        return reactivex.defer(run)

    def cut(self, messages: Sequence[Msg]) -> int:
        """Where the kept tail starts: ``keep_last`` from the end, moved back to the
        latest user message and to keep each tool call with its result."""
        cut = max(0, len(messages) - self.keep_last)
        latest = _latest_user(messages)
        if latest is not None:
            cut = min(cut, latest)
        calls: dict[str, int] = {}
        for i, m in enumerate(messages):
            for block in m.content:
                if isinstance(block, ToolUseBlock):
                    calls[block.id] = i
        moved = True
        while moved and cut > 0:
            moved = False
            for m in messages[cut:]:
                for block in m.content:
                    if isinstance(block, ToolResultBlock):
                        at = calls.get(block.id)
                        if at is not None and at < cut:
                            cut, moved = at, True
        if cut == 1 and _is_summary(messages[0]):
            return 0  # only the previous summary is older: nothing new to summarize
        return cut

    def _request(self, head: Sequence[Msg]) -> list[Msg]:
        transcript = "\n\n".join(_render(m) for m in head)
        return [
            Msg(role=Role.SYSTEM, content=self.summary_prompt),
            Msg(role=Role.USER, content=f"The transcript to summarize:\n\n{transcript}"),
        ]

    @staticmethod
    def _summary_msg(text: str, replaced: int, before: int) -> Msg:
        return Msg(role=Role.USER, content=SUMMARY_PREFIX + text,
                   metadata={COMPACTION_METADATA_KEY: {"replaced_messages": replaced,
                                                       "tokens_before": before}})

    def __repr__(self) -> str:
        return (f"CompactionMiddleware(trigger_tokens={self.trigger_tokens}, "
                f"keep_last={self.keep_last})")


def _latest_user(messages: Sequence[Msg]) -> int | None:
    """The latest message the user wrote (not a hint, a tool result or a summary)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role is Role.USER and not _is_summary(m) and any(
            isinstance(b, TextBlock) and b.text.strip() for b in m.content
        ):
            return i
    return None


def _render(m: Msg) -> str:
    if _is_summary(m):
        return f"[earlier summary]\n{m.text.removeprefix(SUMMARY_PREFIX)}"
    parts: list[str] = []
    for block in m.content:
        if isinstance(block, TextBlock) and block.text.strip():
            parts.append(block.text)
        elif isinstance(block, HintBlock):
            parts.append(f"(hint: {block.hint})")
        elif isinstance(block, ToolUseBlock):
            parts.append(f"(calls tool {block.name} with {json.dumps(block.input)})")
        elif isinstance(block, ToolResultBlock):
            out = block.text
            if len(out) > _TRANSCRIPT_LIMIT:
                out = out[:_TRANSCRIPT_LIMIT] + " ...(truncated)"
            parts.append(f"(tool {block.name} returned {block.state.value}: {out})")
        elif isinstance(block, DataBlock):
            parts.append(f"({block.media_type} attachment)")
    who = m.name or m.role.value
    return f"[{who}] " + "\n".join(parts)
