"""One result per tool call, decided by what leaves a chain of hooks.

``on_acting`` and a tool's own middlewares may rewrite, drop, hold back or invent the
result events of a call. A :class:`Ledger` sits where the outermost hook's stream
leaves (:meth:`Ledger.out`) and keeps the rule that what leaves is what counts:

* the caller gets each call's result once, in order: one start (a start that
  continues an open result is dropped, a delta or an end with no start gets one), the
  deltas, one end;
* what cannot be matched to the model's calls is refused: a result for a call the
  chain was not given, one naming another tool, a second result for an answered call;
* the core's own events are recorded as they are made (:meth:`Ledger.core`), so a
  result that left unchanged is stored exactly as the tool returned it, a changed one
  is rebuilt from the events that left, and one the chain stopped forwarding is
  completed from the core's (:meth:`Ledger.drained`, :meth:`Ledger.settle`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._text import scrub
from ..event import (
    AgentEvent,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)
from ..message import (
    ContentBlock,
    DataBlock,
    TextBlock,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
)

__all__ = ["DONE", "NONE", "OPEN", "Entry", "Ledger", "result_events"]

NONE, OPEN, DONE = 0, 1, 2  # what the caller has of a call's result
_START, _TEXT, _DATA, _END = 1, 2, 3, 4
_KINDS: dict[type, int] = {
    ToolResultStartEvent: _START,
    ToolResultTextDeltaEvent: _TEXT,
    ToolResultDataDeltaEvent: _DATA,
    ToolResultEndEvent: _END,
}


def result_events(block: ToolResultBlock, source: str | None, reply_id: str,
                  start: bool = True) -> list[AgentEvent]:
    """The events of a result that did not stream: start (unless ``start`` is
    false), a text delta per text, a data delta per data block, the end."""
    common = {"reply_id": reply_id, "tool_call_id": block.id, "tool_call_name": block.name}
    out: list[AgentEvent] = []
    if start:
        out.append(ToolResultStartEvent.make(source, **common))
    output = block.output
    if isinstance(output, str):
        if output:
            out.append(ToolResultTextDeltaEvent.make(source, delta=output, **common))
    else:
        for item in output:
            if isinstance(item, TextBlock) and item.text:
                out.append(ToolResultTextDeltaEvent.make(source, delta=item.text, **common))
            elif isinstance(item, DataBlock):
                out.append(ToolResultDataDeltaEvent.make(source, delta=item, **common))
    out.append(ToolResultEndEvent.make(source, state=block.state, **common))
    return out


class Entry:
    """One call: what the caller got of its result, and what the core made."""

    __slots__ = ("call", "drained", "parts", "phase", "pristine", "real", "result", "seen",
                 "state", "stop")

    def __init__(self, call: ToolUseBlock) -> None:
        self.call = call
        self.phase = NONE
        self.parts: list[str | DataBlock] = []  # delivered text (progress notes aside), data
        self.state = ToolResultState.SUCCESS
        self.real: list[AgentEvent] = []  # the core's result events, in order
        self.seen = 0  # how many of them the caller got, while ``pristine``
        self.pristine = True  # everything delivered so far was the core's own
        self.drained = False  # the core's end reached the caller past the chain
        self.result: ToolResultBlock | None = None  # the core's result
        self.stop: Callable[[], None] | None = None  # cancels the core's run of this call


class Ledger:
    """The results of the calls one chain handles (see the module docstring).

    ``who`` names the chain's hooks in errors (called only when one is raised);
    ``error`` is the class of those errors."""

    __slots__ = ("emit", "entries", "error", "reply_id", "source", "who")

    def __init__(
        self,
        calls: Sequence[ToolUseBlock],
        emit: Callable[[AgentEvent], None],
        source: str | None,
        reply_id: str,
        who: Callable[[], str],
        error: type[Exception] = ValueError,
    ) -> None:
        self.entries = {c.id: Entry(c) for c in calls}
        self.emit = emit
        self.source = source
        self.reply_id = reply_id
        self.who = who
        self.error = error

    # -- the core's events ----------------------------------------------------------

    def core(self, event: AgentEvent) -> None:
        """Record an event the core emitted, before it enters the chain."""
        if type(event) in _KINDS:
            entry = self.entries.get(event.tool_call_id)  # type: ignore[attr-defined]
            if entry is not None:
                if type(event) is ToolResultStartEvent and entry.phase == NONE:
                    entry.real = []  # a new attempt (a retry): nothing of it delivered yet
                    entry.seen = 0
                entry.real.append(event)

    def direct(self, event: AgentEvent) -> None:
        """An event of a core no chain listens to (no ``on_acting`` layer): recorded
        and delivered in one call, the common case without a dispatch per event."""
        kind = _KINDS.get(type(event))
        if kind is None:
            self.emit(event)
            return
        entry = self.entries.get(event.tool_call_id)  # type: ignore[attr-defined]
        if entry is None:  # a tool's event naming another call: not ours to judge
            self.emit(event)
            return
        real = entry.real
        if kind == _START and entry.phase == NONE:
            real = entry.real = []
            entry.seen = 0
        real.append(event)
        if entry.phase == DONE:
            return
        if not entry.pristine or entry.seen != len(real) - 1:
            self.drained(event)  # something was held back: catch up first
            return
        entry.seen += 1
        if kind == _START:
            if entry.phase == NONE:
                entry.phase = OPEN
                self.emit(event)
            return
        if kind == _END:
            entry.phase = DONE
            entry.state = event.state  # type: ignore[attr-defined]
            entry.drained = True
        elif kind == _DATA or not event.metadata or "progress" not in event.metadata:
            entry.parts.append(event.delta)  # type: ignore[attr-defined]
        self.emit(event)

    def drained(self, event: AgentEvent) -> None:
        """An event the core emitted after the chain stopped listening: the caller
        gets it directly, after whatever the chain held back of the same result."""
        kind = _KINDS.get(type(event))
        if kind is None:
            self.emit(event)
            return
        entry = self.entries.get(event.tool_call_id)  # type: ignore[attr-defined]
        if entry is None:  # a tool's event naming another call: not ours to judge
            self.emit(event)
            return
        if entry.phase == DONE:
            return
        entry.stop = None  # the core finishes this result itself
        if entry.pristine:
            self._catch_up(entry)
        else:
            self._take(entry, kind, event)
        if entry.phase == DONE:
            entry.drained = True

    def _catch_up(self, entry: Entry) -> None:
        real = entry.real
        while entry.seen < len(real) and entry.phase != DONE:
            event = real[entry.seen]
            entry.seen += 1
            self._take(entry, _KINDS[type(event)], event)

    # -- what leaves the chain ------------------------------------------------------

    def out(self, event: AgentEvent) -> Exception | None:
        """An event that left the outermost hook: delivered, or the error that
        refuses it."""
        kind = _KINDS.get(type(event))
        if kind is None:
            self.emit(event)
            return None
        entry = self.entries.get(event.tool_call_id)  # type: ignore[attr-defined]
        if entry is None:
            return self._refuse(event, None)
        if event.tool_call_name != entry.call.name or entry.phase == DONE:  # type: ignore[attr-defined]
            return self._refuse(event, entry)
        if entry.pristine:
            real, at = entry.real, entry.seen
            if at < len(real) and real[at] is event:
                entry.seen = at + 1
                if entry.phase == OPEN and kind != _START:  # the common case, inline
                    if kind == _END:
                        entry.phase = DONE
                        entry.state = event.state  # type: ignore[attr-defined]
                    elif kind == _DATA or not event.metadata or \
                            "progress" not in event.metadata:
                        entry.parts.append(event.delta)  # type: ignore[attr-defined]
                    self.emit(event)
                    return None
            else:
                entry.pristine = False
        self._take(entry, kind, event)
        if kind == _END and entry.stop is not None and not entry.pristine:
            # Answered by the chain itself (a fallback): stop the core's run of the call
            # unless the core has ended it already (its result is being returned).
            stop, entry.stop = entry.stop, None
            real = entry.real
            if not real or type(real[-1]) is not ToolResultEndEvent:
                stop()
        return None

    def _take(self, entry: Entry, kind: int, event: Any) -> None:
        """Give the caller one event of ``entry``'s result."""
        if kind == _START:
            if entry.phase == NONE:
                entry.phase = OPEN
                self.emit(event)
            return  # a start that continues the open result
        if entry.phase == NONE:
            entry.phase = OPEN
            self.emit(ToolResultStartEvent.make(
                event.source, reply_id=event.reply_id, tool_call_id=event.tool_call_id,
                tool_call_name=event.tool_call_name))
        if kind == _END:
            entry.phase = DONE
            entry.state = event.state
        elif kind == _DATA:
            entry.parts.append(event.delta)
        elif not (event.metadata and "progress" in event.metadata):
            entry.parts.append(event.delta)  # progress notes are not part of the result
        self.emit(event)

    def _refuse(self, event: Any, entry: Entry | None) -> Exception:
        call_id, name = event.tool_call_id, event.tool_call_name
        if entry is None:
            ids = ", ".join(self.entries) or "none"
            why = (f"a result for tool call {call_id!r} ({name}), which is not one of the "
                   f"calls it was given ({ids}): it could not be matched to the model's call")
        elif name != entry.call.name:
            why = (f"a result for tool call {call_id!r} naming tool {name!r}; the call is to "
                   f"{entry.call.name!r}")
        else:
            why = (f"a second result for tool call {call_id!r} ({name}) after its "
                   f"ToolResultEndEvent: each call gets exactly one result (a retry must "
                   "hold back the attempt it replaces)")
        return self.error(f"{self.who()} emitted {why}")

    # -- the end --------------------------------------------------------------------

    def answered(self, call_id: str) -> bool:
        """Whether the caller has the whole result of ``call_id`` already."""
        entry = self.entries.get(call_id)
        return entry is not None and entry.phase == DONE

    def settle(self, entry: Entry, missing_state: ToolResultState,
               missing_text: str) -> ToolResultBlock:
        """The call's result, once nothing runs for it any more; the caller gets what
        it still lacks of it. Without a result from the chain or the core it is
        ``missing_text`` in ``missing_state``."""
        result = entry.result
        if entry.phase == DONE:
            if result is not None and (entry.drained or (
                    entry.pristine and entry.seen == len(entry.real))):
                return result  # the tool's own, exactly
            return self._rebuilt(entry)
        if result is None:
            result = ToolResultBlock(id=entry.call.id, name=entry.call.name,
                                     output=missing_text, state=missing_state)
        elif entry.pristine:  # the chain held back the rest of the core's result
            self._catch_up(entry)
            if entry.phase == DONE:
                return result
        for event in result_events(result, self.source, self.reply_id,
                                   start=entry.phase == NONE):
            if entry.phase == OPEN and type(event) is not ToolResultEndEvent and \
                    entry.result is not None:
                continue  # text the chain let through already stands for it
            self.emit(event)
        entry.phase = DONE
        return result

    def _rebuilt(self, entry: Entry) -> ToolResultBlock:
        """The result as the events that left the chain tell it."""
        parts = entry.parts
        output: str | list[ContentBlock]
        if all(type(p) is str for p in parts):
            text = "".join(parts)  # type: ignore[arg-type]
            output = text if text.isascii() else scrub(text)
        else:
            output = []
            run: list[str] = []
            for part in parts:
                if type(part) is str:
                    run.append(part)
                    continue
                if run:
                    output.append(TextBlock(text=scrub("".join(run))))
                    run = []
                output.append(part)  # type: ignore[arg-type]
            if run:
                output.append(TextBlock(text=scrub("".join(run))))
        return ToolResultBlock(id=entry.call.id, name=entry.call.name, output=output,
                               state=entry.state)
