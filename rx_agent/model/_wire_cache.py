"""What a model derives from a message, computed once per message rather than once
per call: the wire forms the HTTP adapters send, the scripted model's text length.

A conversation grows by a message or two per model call while every call hands the
model all of it. :class:`WireCache` keeps one :class:`ConversationCache` per
conversation, found by its first non-system message (the system prompt may be a new
message each call; the first one after it is the conversation's own), held weakly so
that a finished conversation's cache goes with it, and at most :data:`CONVERSATIONS`
of them, least recently used first out.

Messages are mutable pydantic models, and a middleware may edit one in place
(``msg.content.append(...)``, ``block.text = ...``, ``call.input["path"] = ...``) or
put another in its place. So an entry is only reused when the message reads as it did
when it was encoded: its role, then each block's fields, compared with a copy taken
then (containers deep-copied). The check compares references and small dicts in C;
encoding builds the wire dicts in Python, several times dearer. Two values that
compare equal count as unchanged (``1`` and ``1.0``, ``True`` and ``1``): replacing
one by the other in place keeps the old wire form.
"""

from __future__ import annotations

import copy
import json
import threading
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring as _encode_basestring
from typing import Any, Generic, TypeVar

from ..message import Msg, Role

__all__ = ["CONVERSATIONS", "ConversationCache", "RawJSON", "ToolsCache", "WireCache",
           "dumps", "encode_body", "encode_json", "fingerprint"]

T = TypeVar("T")

def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


if _c_make_encoder is not None:

    def dumps(value: Any) -> str:
        """``json.dumps(value, ensure_ascii=False)`` (the same text, circular references
        refused alike), a third of its cost: straight to the C encoder, whose
        settings ``json.dumps`` would check and look up on every call."""
        return "".join(_c_make_encoder({}, _not_json, _encode_basestring, None, ": ", ", ",
                                       False, False, True)(value, 0))

else:  # pragma: no cover - an interpreter without the C accelerator
    _ENCODER = json.JSONEncoder(ensure_ascii=False)

    def dumps(value: Any) -> str:
        """``json.dumps(value, ensure_ascii=False)``."""
        return _ENCODER.encode(value)


def encode_json(value: Any) -> bytes:
    """:func:`dumps`, as UTF-8."""
    return dumps(value).encode()


class RawJSON:
    """A request body's array already encoded, item by item (a conversation's
    messages, the tool schemas): :func:`encode_body` splices the items in."""

    __slots__ = ("items",)

    def __init__(self, items: list[bytes]) -> None:
        self.items = items

    def __repr__(self) -> str:
        return f"RawJSON(<{len(self.items)} items>)"


def encode_body(body: dict[str, Any]) -> bytes:
    """``json.dumps(body, ensure_ascii=False).encode()``, byte for byte, with each
    :class:`RawJSON` value's items spliced in rather than encoded again (a large
    array is copied twice: joined, then into the body)."""
    pieces: list[bytes] = []
    for key, value in body.items():
        pieces.append(b", " if pieces else b"{")
        pieces.append(encode_json(key))
        if type(value) is RawJSON:
            pieces.append(b": [")
            pieces.append(b", ".join(value.items))
            pieces.append(b"]")
        else:
            pieces.append(b": ")
            pieces.append(encode_json(value))
    pieces.append(b"}" if pieces else b"{}")
    return b"".join(pieces)

CONVERSATIONS = 64
"""How many conversations a :class:`WireCache` keeps (least recently used leaves)."""

# Entries of messages no longer in the conversation (compressed away, replaced) are
# dropped when they outnumber the live ones by this much.
_SLACK = 32


def fingerprint(msg: Msg) -> list[Any]:
    """What a message's wire form depends on, by reference: its blocks' field dicts,
    then its role. Cheap to build: nothing is copied."""
    fields = msg.__dict__
    found: list[Any] = [b.__dict__ for b in fields["content"]]
    found.append(fields["role"])
    return found


def _snapshot(found: list[Any]) -> list[Any]:
    """A copy of ``found`` that later edits of the message leave as it is."""
    out: list[Any] = []
    for item in found:
        if type(item) is dict:
            fields = dict(item)
            for key, value in item.items():
                if isinstance(value, dict | list):  # a call's input, a result's blocks
                    fields[key] = _copied(value)
            out.append(fields)
        else:
            out.append(item)
    return out


def _copied(value: Any) -> Any:
    """A deep copy of JSON-like values (``copy.deepcopy`` for anything else)."""
    kind = type(value)
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    if kind is list:
        return [_copied(v) for v in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    return copy.deepcopy(value)


class ConversationCache(Generic[T]):
    """One conversation's derived values, by message (see the module docstring)."""

    __slots__ = ("__weakref__", "entries", "first")

    def __init__(self, first: Msg, dead: deque[int] | None = None) -> None:
        # The key message, weakly: nothing here holds a message, so the conversation's
        # end (its messages freed) drops what was kept for it (and names its key in
        # ``dead``, for the registry to drop).
        self.first = weakref.ref(first, _Clear(self, id(first), dead))
        self.entries: dict[int, tuple[list[Any], T]] = {}

    def get(self, msg: Msg, compute: Callable[[Msg], T]) -> T:
        """``compute(msg)``, or the value computed before for the same message read
        the same way. An id of a freed message taken by a new one is harmless: the
        new message is compared field by field too."""
        found = fingerprint(msg)
        key = id(msg)
        entry = self.entries.get(key)
        if entry is not None and entry[0] == found:
            return entry[1]
        value = compute(msg)
        self.entries[key] = (_snapshot(found), value)
        return value

    def values(self, messages: Sequence[Msg], compute: Callable[[Msg], T]) -> list[T]:
        """The value of each message, in order (:meth:`get` of each, inlined: this
        loop is what a call pays per message)."""
        entries = self.entries
        get = entries.get
        out: list[T] = []
        append = out.append
        for msg in messages:
            fields = msg.__dict__
            content = fields["content"]
            # fingerprint(msg), without a comprehension for the usual one or two blocks
            size = len(content)
            if size == 1:
                found = [content[0].__dict__, fields["role"]]
            elif size == 2:
                found = [content[0].__dict__, content[1].__dict__, fields["role"]]
            else:
                found = [b.__dict__ for b in content]
                found.append(fields["role"])
            key = id(msg)
            entry = get(key)
            if entry is not None and entry[0] == found:
                append(entry[1])
                continue
            value = compute(msg)
            entries[key] = (_snapshot(found), value)
            append(value)
        if len(entries) > 2 * len(messages) + _SLACK:
            self.prune(messages)
        return out

    def prune(self, messages: Sequence[Msg]) -> None:
        """Keep only the entries of ``messages``."""
        entries = self.entries
        kept = {}
        for msg in messages:
            entry = entries.get(id(msg))
            if entry is not None:
                kept[id(msg)] = entry
        self.entries = kept


class _Clear:
    """The key message's weakref callback: empties the conversation's entries and
    names its key for the registry (a weak reference to the cache, so the callback
    makes no cycle). It may run in any thread, at any allocation, even inside the
    registry's own lock: one assignment and one append, nothing that waits."""

    __slots__ = ("cache", "dead", "key")

    def __init__(self, cache: ConversationCache[Any], key: int,
                 dead: deque[int] | None) -> None:
        self.cache = weakref.ref(cache)
        self.key = key
        self.dead = dead

    def __call__(self, _ref: object) -> None:
        cache = self.cache()
        if cache is not None:
            cache.entries = {}
        if self.dead is not None:
            self.dead.append(self.key)


def _first(messages: Sequence[Msg]) -> Msg | None:
    for msg in messages:
        if msg.role is not Role.SYSTEM:
            return msg
    return None


class WireCache(Generic[T]):
    """The :class:`ConversationCache` of each conversation a model serves, at most
    ``size`` of them. Safe to share between threads and event loops."""

    __slots__ = ("_by_first", "_dead", "_lock", "compute", "size")

    def __init__(self, compute: Callable[[Msg], T], size: int = CONVERSATIONS) -> None:
        self.compute = compute
        self.size = size
        self._by_first: OrderedDict[int, ConversationCache[T]] = OrderedDict()
        self._dead: deque[int] = deque()  # keys of conversations whose first message went
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_first)

    def conversation(self, messages: Sequence[Msg]) -> ConversationCache[T] | None:
        """The cache of the conversation ``messages`` belong to (``None`` when they
        hold no message but system ones: nothing to key it on)."""
        first = _first(messages)
        if first is None:
            return None
        key = id(first)
        with self._lock:
            by_first = self._by_first
            found = by_first.get(key)
            if found is not None and found.first() is first:
                by_first.move_to_end(key)
                return found
            dead = self._dead
            while dead:  # the finished conversations first (their callbacks named them)
                gone = dead.popleft()
                stale = by_first.get(gone)
                if stale is not None and stale.first() is None:
                    del by_first[gone]
            found = by_first[key] = ConversationCache(first, dead)
            by_first.move_to_end(key)
            while len(by_first) > self.size:
                by_first.popitem(last=False)  # then the least recently used
            return found

    def values(self, messages: Sequence[Msg]) -> list[T]:
        """``compute(m)`` of each message, from the cache where it is still valid."""
        conversation = self.conversation(messages)
        if conversation is None:
            return [self.compute(m) for m in messages]
        return conversation.values(messages, self.compute)


class ToolsCache(Generic[T]):
    """The wire form of a call's tool schemas, kept for the same schemas handed again
    (an agent hands its toolkit's one tuple every call while the toolkit is unchanged,
    ``Toolkit.schema_view``).

    A hit is the same tuple, whose schema dicts still compare equal to a copy taken
    when it was encoded. What a schema holds (its ``parameters``) is compared by
    reference: a toolkit's schemas change by replacing a tool's ``parameters``, not
    by editing them in place (the test suite checks that; ``tool/_views.py``). A
    list is never kept: it may change in place."""

    __slots__ = ("_entries", "_lock", "compute", "size")

    def __init__(self, compute: Callable[[Sequence[Any]], T], size: int = 8) -> None:
        self.compute = compute
        self.size = size
        self._entries: OrderedDict[int, tuple[Sequence[Any], list[Any], T]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, tools: Sequence[Any]) -> T:
        if not tools or type(tools) is not tuple:
            return self.compute(tools)
        key = id(tools)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is tools and _same_schemas(entry[1], tools):
            return entry[2]
        value = self.compute(tools)
        copies = [dict(t) if isinstance(t, dict) else t for t in tools]
        with self._lock:
            # The entry holds ``tools``: its id stays its own while the entry lives.
            self._entries[key] = (tools, copies, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value


def _same_schemas(copies: list[Any], tools: Sequence[Any]) -> bool:
    # One list comparison in C: each dict against its copy, values by reference first.
    return copies == list(tools)
