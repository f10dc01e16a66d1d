"""``assert_well_formed``: the block and call grammar a hook's stream must keep.

What the runtime guarantees to the layers above a hook, checked on a recorded
stream: a middleware that drops, duplicates or reorders events breaks one of these.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..event import (
    AgentEvent,
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
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
)
from ._verify_steps import describe

__all__ = ["assert_well_formed"]

# event class -> (family, role); a family's blocks are keyed by block or call id.
_KINDS: dict[type, tuple[str, str]] = {
    TextBlockStartEvent: ("text block", "start"),
    TextBlockDeltaEvent: ("text block", "delta"),
    TextBlockEndEvent: ("text block", "end"),
    ThinkingBlockStartEvent: ("thinking block", "start"),
    ThinkingBlockDeltaEvent: ("thinking block", "delta"),
    ThinkingBlockEndEvent: ("thinking block", "end"),
    DataBlockStartEvent: ("data block", "start"),
    DataBlockDeltaEvent: ("data block", "delta"),
    DataBlockEndEvent: ("data block", "end"),
    ToolCallStartEvent: ("tool call", "start"),
    ToolCallDeltaEvent: ("tool call", "delta"),
    ToolCallEndEvent: ("tool call", "end"),
    ToolResultStartEvent: ("tool result", "start"),
    ToolResultTextDeltaEvent: ("tool result", "delta"),
    ToolResultDataDeltaEvent: ("tool result", "delta"),
    ToolResultEndEvent: ("tool result", "end"),
}
_IN_CALL = {"text block", "thinking block", "data block", "tool call"}


def _key(event: Any) -> str:
    return str(getattr(event, "block_id", None) or getattr(event, "tool_call_id", ""))


def assert_well_formed(events: Iterable[AgentEvent], *, complete: bool = True) -> None:
    """Fail with an ``AssertionError`` naming the first event that breaks the grammar.

    Model calls: ``ModelCallStartEvent`` ... ``ModelCallEndEvent`` with one
    ``reply_id``, not nested, their block and tool-call events inside and carrying
    that ``reply_id``. Blocks and tool calls: start, deltas, end with one id; a delta
    or end only while open; an id not reused in its call; no text or thinking block
    open when a tool call starts (the runtime closes it first). Tool results: start,
    deltas, end per call. With ``complete`` (a stream that completed), everything
    opened is closed by the end; a stream that failed may stop anywhere.
    """
    seq = list(events)
    call: str | None = None  # the reply_id of the open model call
    used: set[tuple[str, str]] = set()
    open_: dict[tuple[str, str], int] = {}  # (family, id) -> index of its start

    def fail(i: int, why: str) -> None:
        near = "\n".join(
            f"  {'->' if j == i else '  '} #{j} {describe(e)}"
            for j, e in enumerate(seq) if abs(j - i) <= 3
        )
        raise AssertionError(f"event #{i} breaks the stream's grammar: {why}\n{near}")

    for i, item in enumerate(seq):
        event: Any = item
        kind = type(event)
        if kind is ModelCallStartEvent:
            if call is not None:
                fail(i, f"a model call starts inside the open call {call!r}")
            call = event.reply_id
            used = set()
            continue
        if kind is ModelCallEndEvent:
            if call is None or event.reply_id != call:
                fail(i, "a model call ends that is not open")
            left = [k for k in open_ if k[0] in _IN_CALL]
            if left:
                fail(i, f"the call ends with {left[0][0]} {left[0][1]!r} still open")
            call = None
            continue
        found = _KINDS.get(kind)
        if found is None:
            continue
        family, role = found
        key = (family, _key(event))
        if family in _IN_CALL:
            if call is None:
                fail(i, f"a {family} event outside a model call")
            elif getattr(event, "reply_id", call) != call:
                fail(i, f"its reply_id is not that of the open model call ({call!r})")
        if role == "start":
            if key in open_ or (family in _IN_CALL and key in used):
                fail(i, f"{family} {key[1]!r} starts twice")
            if family == "tool call":
                text = [k for k in open_ if k[0] in ("text block", "thinking block")]
                if text:
                    fail(i, f"a tool call starts while {text[0][0]} {text[0][1]!r} is open")
            open_[key] = i
            used.add(key)
        elif key not in open_:
            what = "a delta" if role == "delta" else "an end"
            fail(i, f"{what} of {family} {key[1]!r}, which is not open")
        elif role == "end":
            del open_[key]
    if complete:
        if call is not None:
            fail(len(seq) - 1, f"the stream completed inside model call {call!r}")
        if open_:
            (family, name), at = next(iter(open_.items()))
            fail(at, f"{family} {name!r} is never closed")
