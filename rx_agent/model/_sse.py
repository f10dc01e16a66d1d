"""An incremental server-sent-events decoder (the WHATWG ``text/event-stream`` rules).

Bytes arrive in arbitrary pieces (a line, half a line, several events at once), so the
decoder keeps the unfinished tail between :meth:`SSEDecoder.feed` calls. It handles
``\\n``, ``\\r\\n`` and lone ``\\r`` line endings (a ``\\r`` at the very end of a piece
may be the first half of a ``\\r\\n``), comment lines (``:`` keep-alives), several
``data:`` lines in one event (joined with ``\\n``), and UTF-8 split across pieces.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = ["SSEDecoder", "ServerSentEvent"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event. ``event`` is ``"message"`` unless the server named it."""

    data: str
    event: str = "message"
    id: str | None = None


class SSEDecoder:
    """Feed it bytes with :meth:`feed`, call :meth:`close` at end of stream."""

    def __init__(self) -> None:
        # "replace" rather than "strict": one bad byte should surface as a JSON error
        # on that event (a clear ModelResponseError), not as a decoder crash.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._tail = ""
        self._pending_cr = False
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._first = True

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return the events it completed (possibly none)."""
        text = self._decoder.decode(chunk)
        if self._first and text:
            # A UTF-8 byte-order mark may open the stream; it is not part of a field.
            text = text.removeprefix("\ufeff")
            self._first = False
        return self._lines(text)

    def close(self) -> list[ServerSentEvent]:
        """End of stream: finish a last unterminated line and event.

        The standard drops an event that the stream did not end with a blank line.
        Servers that omit the final blank line are common enough that the event is
        dispatched instead; a payload that was really cut short then fails as bad
        JSON, which still reports the truncation.
        """
        events = self._lines(self._decoder.decode(b"", final=True))
        if self._tail:
            line, self._tail = self._tail, ""
            event = self._line(line)
            if event is not None:
                events.append(event)
        event = self._dispatch()
        if event is not None:
            events.append(event)
        return events

    def _lines(self, text: str) -> list[ServerSentEvent]:
        if not text:
            return []
        if self._pending_cr:
            # The previous piece ended with "\r": a "\n" here belongs to that line end.
            self._pending_cr = False
            if text.startswith("\n"):
                text = text[1:]
        buffer = self._tail + text
        if buffer.endswith("\r"):
            self._pending_cr = True
        # splitlines() would also split on \x0b, \x1c, \u2028 ..., which SSE does not
        # treat as line ends (and which may occur inside JSON strings), so normalise
        # the three real endings and split on "\n" only.
        parts = buffer.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._tail = parts.pop()
        events: list[ServerSentEvent] = []
        for line in parts:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment, typically a keep-alive
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        # "retry" and unknown fields are ignored: reconnection is not ours to do.
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = ServerSentEvent("\n".join(self._data), self._event or "message", self._id)
        self._data = []
        self._event = ""
        return event
