"""Redacting secrets from streamed text: ``redact``.

Per text or thinking block, the text not yet emitted is scanned together with each new
delta. Everything before the earliest point where a match could still change (see
``_patterns``) is final: it is emitted at once, secrets replaced. So a secret split over
several deltas is caught, and the hold-back is at most the longest possible match.
Streaming and redacting the whole text at once give the same output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..event import (
    AgentEvent,
    ModelCallEndEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ToolResultEndEvent,
    ToolResultTextDeltaEvent,
)
from ._base import Handlers, Operator, Relay, relay_op, with_delta
from ._patterns import Rule, rules

__all__ = ["Redactor", "redact"]

_DELTAS = {TextBlockDeltaEvent: "t", ThinkingBlockDeltaEvent: "k", ToolResultTextDeltaEvent: "r"}
_ENDS = {TextBlockEndEvent: "t", ThinkingBlockEndEvent: "k", ToolResultEndEvent: "r"}


def _key(tag: str, event: Any) -> tuple[str, str, str]:
    """A block's text is scanned as one: a model block by its id, a tool result by
    its call."""
    return (tag, event.reply_id, event.tool_call_id if tag == "r" else event.block_id)


class Redactor:
    """The scanning part of :func:`redact`, shared by every subscription."""

    __slots__ = ("behind", "replacement", "rules")

    def __init__(self, patterns: Any, replacement: str) -> None:
        if not isinstance(replacement, str):
            raise TypeError(f"redact(): replacement must be a str, not "
                            f"{type(replacement).__name__}")
        self.rules: tuple[Rule, ...] = rules(patterns)
        self.replacement = replacement
        self.behind = max(r.behind for r in self.rules)

    def scan(self, context: str, text: str, final: bool) -> tuple[str, int]:
        """Redact ``text`` (``context`` is what came before it, for lookbehinds).

        Returns the output and how many characters of ``text`` it covers; the rest
        must be held until more text (or the block's end, ``final``) arrives."""
        whole = context + text if context else text
        base = len(context)
        size = len(whole)
        cut = size
        if not final:
            for rule in self.rules:
                cut = min(cut, size - rule.held(whole))
        pos = base
        out: list[str] = []
        rules = self.rules
        found: list[re.Match[str] | None] = [None] * len(rules)
        done = [False] * len(rules)
        while True:
            best: re.Match[str] | None = None
            for i, rule in enumerate(rules):
                if done[i]:
                    continue
                match = found[i]
                if match is None or match.start() < pos:
                    match = rule.regex.search(whole, pos)
                    while match is not None and rule.check is not None \
                            and not rule.check(match.group()):
                        match = rule.regex.search(whole, match.start() + 1)
                    if match is None:
                        done[i] = True
                        continue
                    found[i] = match
                # Leftmost first; at the same start, the longest.
                if best is None or match.start() < best.start() or (
                        match.start() == best.start() and match.end() > best.end()):
                    best = match
            if best is None or best.start() >= cut:
                break
            out.append(whole[pos:best.start()])
            out.append(self.replacement)
            pos = best.end()
        end = max(pos, cut)
        out.append(whole[pos:end])
        return "".join(out), end - base

    def redact_text(self, text: str) -> str:
        """The whole text redacted at once (what the streamed output adds up to)."""
        return self.scan("", text, True)[0]


class _Block:
    __slots__ = ("context", "last", "pending")

    def __init__(self, last: AgentEvent) -> None:
        self.last = last
        self.pending = ""
        self.context = ""


def redact(
    patterns: Iterable[str | re.Pattern[str]] | str | re.Pattern[str] | None = None,
    replacement: str = "[REDACTED]",
) -> Operator[AgentEvent, AgentEvent]:
    """Replace secrets in text, thinking and tool-result text deltas with ``replacement``.

    ``patterns`` are regular expressions (``str`` or compiled); ``None`` means the
    defaults: e-mail addresses, API keys (OpenAI/Anthropic ``sk-``, AWS ``AKIA``,
    GitHub ``ghp_``..., Slack ``xox.-``, Google ``AIza``) and card numbers (13-19
    digits, optionally grouped, passing Luhn's check). A secret split over several
    deltas is still caught: text that could be the start of a match is held back
    until it is decided, at most the longest possible match, and only the trailing
    run of characters a match can contain (plain prose streams with a lag of about
    one word). The held text is released at the block's (or tool result's) end. Start and end events
    pass at once, so block ids stay valid. On error the held text is dropped, never
    emitted unredacted.

    A pattern must not match empty text, use anchors (``^ $ \\A \\Z``), or match
    text of any length made of any characters (``.*``): each would make streaming
    impossible, and raises ``ValueError``.
    """
    redactor = Redactor(patterns, replacement)
    keep = max(redactor.behind, 1)

    def start(relay: Relay) -> Handlers:
        forward = relay.forward
        blocks: dict[tuple[str, str, str], _Block] = {}

        def fail(exc: Exception) -> None:
            blocks.clear()
            relay.fail(exc)

        def flush(block: _Block) -> None:
            if block.pending:
                out, _ = redactor.scan(block.context, block.pending, True)
                if out:
                    forward(with_delta(block.last, out))

        def on_next(event: AgentEvent) -> None:
            if relay.stopped:
                return
            kind = type(event)
            tag = _DELTAS.get(kind)
            if tag is not None:
                key = _key(tag, event)
                block = blocks.get(key)
                if block is None:
                    block = blocks[key] = _Block(event)
                block.last = event
                text = block.pending + event.delta  # type: ignore[attr-defined]
                try:
                    out, used = redactor.scan(block.context, text, False)
                except Exception as exc:  # a pattern's check raised
                    fail(exc)
                    return
                if used:
                    block.context = (block.context + text[:used])[-keep:]
                    block.pending = text[used:]
                else:
                    block.pending = text
                if out:
                    forward(with_delta(event, out))
                return
            tag = _ENDS.get(kind)
            try:
                if tag is not None:
                    block = blocks.pop(_key(tag, event), None)
                    if block is not None:
                        flush(block)
                elif blocks and kind is ModelCallEndEvent:
                    for key in [k for k in blocks if k[1] == event.reply_id]:  # type: ignore[attr-defined]
                        flush(blocks.pop(key))
            except Exception as exc:
                fail(exc)
                return
            forward(event)

        def on_error(exc: Exception) -> None:
            blocks.clear()
            relay.on_error(exc)

        def on_completed() -> None:
            if relay.stopped:
                return
            try:
                while blocks:
                    flush(blocks.pop(next(iter(blocks))))
            except Exception as exc:
                fail(exc)
                return
            relay.on_completed()

        return on_next, on_error, on_completed

    return relay_op("redact()", start)
