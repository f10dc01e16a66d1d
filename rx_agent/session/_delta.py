"""What a save must write: the changed tail of the context, found without rereading it.

Durable stores keep messages one per row (SQLite) or list item (Redis) and remember,
per session, a :class:`Snapshot` of what they stored: the message ids in order, the
JSON of the last few messages, and (while the state object is alive) the message
objects themselves. A save compares the new context with it:

* the stored messages are a prefix of the new context (the same objects, or
  equal ones; else the same ids): only the new messages are written (the common
  case: a round appended its messages);
* the ids differ somewhere (a middleware replaced, removed or compacted
  messages): everything from the first mismatch on is rewritten;
* a message near the end kept its id but changed in place: the last
  :data:`TAIL` messages, and back to the most recent assistant message, are
  serialised and compared with what was stored, and rewritten from the first that
  differs. This covers what the runtime itself edits in place (the latest
  assistant message's tool-call arguments after a HITL edit, ``generate_reason``
  of messages it just appended).

Editing an older message in place is invisible to that check: call
:func:`mark_changed` (``mark_changed(state, msg)``) after doing so, and the next
save by any durable store rewrites from that message on. The marks live beside
the state object in this process (they are not saved).

The prefix check itself costs nothing while the context is the
:class:`~rx_agent._history.History` a call runs on and it only appended since the
snapshot: the snapshot recorded the list's lineage token, which any other change of
the list replaces. Otherwise it is a C-speed pointer compare (while the stored objects
are alive) or an id compare. The snapshots' id lists grow in place along a lineage (a
snapshot reads the first ``n``), so a save copies none.

A save therefore costs what changed plus a small constant (at most the tail
serialised), not the session's length.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .._history import History
from ..context import AgentState
from ..message import Msg

__all__ = [
    "TAIL",
    "Delta",
    "MessageRoles",
    "Snapshot",
    "SnapshotCache",
    "compute_delta",
    "mark_changed",
    "restore_marks",
    "snapshot_of",
    "take_marks",
    "window_start",
]

TAIL = 4
"""Messages at the end of the context that every save checks for in-place edits."""


def _window_start(roles: Sequence[str] | MessageRoles, n: int) -> int:
    """First position whose content a save compares: the last TAIL of the first ``n``
    messages, and back to the most recent assistant message among them."""
    start = max(0, n - TAIL)
    for i in range(n - 1, -1, -1):  # a scan over roles only, no serialisation
        if roles[i] == "assistant":
            return min(start, i)
    return start


class MessageRoles:
    """The roles of messages, read lazily (most scans stop after a few messages)."""

    __slots__ = ("_msgs",)

    def __init__(self, msgs: Sequence[Msg]) -> None:
        self._msgs = msgs

    def __getitem__(self, i: int) -> str:
        return self._msgs[i].role

    def __len__(self) -> int:
        return len(self._msgs)


@dataclass(slots=True)
class Snapshot:
    """What a store holds for one session at ``version``."""

    version: int
    ids: list[str]
    """The stored message ids: the first :attr:`n` of this list (a later snapshot of
    the same lineage may have appended its own after them)."""
    tail_start: int
    tail: list[str]
    """The stored JSON of ``ids[tail_start:n]``."""
    objs: list[Msg] | None = field(default=None, compare=False)
    """The message objects stored (dropped when their state object dies; not kept
    when :attr:`lineage` stands for them)."""
    changed_from: int = field(default=0, compare=False)
    """The first position the write that made this snapshot rewrote (a load: 0)."""
    lineage: object | None = field(default=None, compare=False)
    """The lineage token of the :class:`~rx_agent._history.History` stored."""
    n: int = -1
    """How many messages are stored (``-1``: ``len(ids)``)."""

    def __post_init__(self) -> None:
        if self.n < 0:
            self.n = len(self.ids)


def snapshot_of(
    version: int,
    ids: list[str],
    bodies: Sequence[str | bytes],
    roles: Sequence[str] | MessageRoles,
    objs: list[Msg] | None = None,
) -> Snapshot:
    """A snapshot of stored rows: their ids and roles, and the JSON of (at least) the
    compared window at the end (``bodies`` are the last ``len(bodies)`` messages')."""
    n = len(ids)
    start = max(n - len(bodies), _window_start(roles, n))
    tail = [b.decode("utf-8") if isinstance(b, bytes) else b
            for b in bodies[len(bodies) - (n - start):]]
    lineage = objs.lineage if type(objs) is History else None
    return Snapshot(version, ids, start, tail,
                    list(objs) if objs is not None and lineage is None else None,
                    lineage=lineage)


def window_start(roles: Sequence[str] | MessageRoles, n: int) -> int:
    """Where the stored bodies a snapshot needs begin (for stores reading them)."""
    return _window_start(roles, n)


@dataclass(slots=True)
class Delta:
    start: int
    """First context position to (re)write; stored messages from here on are replaced."""
    bodies: list[str]
    """JSON of ``context[start:]``."""
    ids: list[str]
    """The ids of the messages stored after the write: the first :attr:`n`."""
    tail_start: int
    tail: list[str]
    objs: list[Msg] | None
    lineage: object | None
    n: int

    def snapshot(self, version: int) -> Snapshot:
        return Snapshot(version, self.ids, self.tail_start, self.tail, self.objs, self.start,
                        self.lineage, self.n)


_grow_lock = threading.Lock()


def _ids_after(old: Snapshot, start: int, context: list[Msg]) -> list[str]:
    """``old``'s first ``start`` ids, then the ids of ``context[start:]``: ``old``'s own
    list grown in place when ``start`` is its end and no other snapshot grew it."""
    new = [m.id for m in context[start:]]
    ids = old.ids
    if start == old.n:
        with _grow_lock:  # two saves from one snapshot: the first grows, the other copies
            if len(ids) == start:
                ids.extend(new)
                return ids
    return ids[:start] + new


def _common_prefix(old: Snapshot, context: list[Msg]) -> tuple[int, list[str] | None]:
    """How many leading messages ``old`` already holds, and the context's ids when
    they had to be read (``None``: the prefix is ``old``'s very objects)."""
    stored_n = old.n
    # The list only appended since the snapshot recorded its lineage: no compare.
    if (old.lineage is not None and type(context) is History
            and context.lineage is old.lineage and len(context) >= stored_n):
        return stored_n, None
    objs = old.objs
    # A list compare: C-speed pointer checks while the objects are the very ones
    # stored; a different object counts as unchanged only if equal (pydantic compares
    # every field, so it would serialise the same). No slice when nothing was added.
    if objs is not None and (context == objs if len(context) == len(objs) else
                             len(context) > len(objs) and context[:len(objs)] == objs):
        return len(objs), None
    ids = [m.id for m in context]
    stored = old.ids if len(old.ids) == stored_n else old.ids[:stored_n]
    common = stored_n
    if len(ids) < common or ids[:common] != stored:
        common = next((i for i, (a, b) in enumerate(zip(ids, stored, strict=False)) if a != b),
                      min(len(ids), common))
    return common, ids


def compute_delta(old: Snapshot | None, context: list[Msg], marked: frozenset[str]) -> Delta:
    """What to write to turn ``old`` (``None``: unknown, rewrite all) into ``context``."""
    # Read before the length: a change made meanwhile replaces the token, so this
    # snapshot's lineage would never match again (an append leaves the prefix alone).
    lineage = context.lineage if type(context) is History else None
    n = len(context)
    bodies: dict[int, str] = {}
    start, ids = 0, None
    if old is not None:
        common, ids = _common_prefix(old, context)
        if marked:
            known = ids if ids is not None else old.ids
            common = next((i for i in range(common) if known[i] in marked), common)
        # Positions before the stored window were not compared when stored either:
        # their in-place edits need mark_changed.
        for i in range(max(_window_start(MessageRoles(context), common), old.tail_start), common):
            body = context[i].model_dump_json()
            bodies[i] = body
            if old.tail[i - old.tail_start] != body:
                common = i
                break
        start = common
        if ids is None and start == n == old.n:
            ids = old.ids  # nothing changed: the very list (its first n are the same)
        elif ids is None:  # the stored prefix is unchanged: reuse its ids
            ids = _ids_after(old, start, context)
    if ids is None:
        ids = [m.id for m in context]
    written = [bodies.get(i) or context[i].model_dump_json() for i in range(start, n)]
    tail_start = _window_start(MessageRoles(context), n)
    tail = []
    for i in range(tail_start, n):
        known_body = written[i - start] if i >= start else bodies.get(i)
        tail.append(known_body if known_body is not None else context[i].model_dump_json())
    # The objects stored, as a list of their own (the previous one when nothing
    # changed); none when the lineage stands for them.
    objs: list[Msg] | None = None
    if lineage is None:
        kept = old.objs if old is not None else None
        objs = kept if kept is not None and start == n == len(kept) else list(context)
    return Delta(start, written, ids, tail_start, tail, objs, lineage, n)


class SnapshotCache:
    """A bounded, thread-safe LRU of per-session snapshots (one per store object).

    A snapshot's message objects are kept only while the state object they came
    from is alive, so the cache never keeps a finished conversation in memory.
    """

    def __init__(self, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"cache_size must be an int >= 0, got {size!r}")
        self._size = size
        self._items: OrderedDict[object, Snapshot] = OrderedDict()
        self._owners: dict[object, int] = {}  # key -> id() of the state its objs belong to
        # key -> the lowest position rewritten since watch(key) (see unchanged_below).
        self._low: dict[object, int] = {}
        self._lock = threading.Lock()

    def get(self, key: object) -> Snapshot | None:
        with self._lock:
            snap = self._items.get(key)
            if snap is not None:
                self._items.move_to_end(key)
            return snap

    def put(self, key: object, snap: Snapshot, owner: AgentState | None = None) -> None:
        if not self._size:
            return
        ident = id(owner) if owner is not None else 0
        if owner is None:
            snap.objs = None
        with self._lock:
            low = self._low.get(key)
            if low is not None and snap.changed_from < low:
                self._low[key] = snap.changed_from
            current = self._items.get(key)
            if current is not None and current.version > snap.version:
                return  # a concurrent save in this process already stored a newer one
            self._items[key] = snap
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                gone, _ = self._items.popitem(last=False)
                self._owners.pop(gone, None)
                self._low.pop(gone, None)
            if owner is None or snap.objs is None or self._owners.get(key) == ident:
                return
            self._owners[key] = ident
        weakref.finalize(owner, self._orphan, key, ident)

    def watch(self, key: object) -> None:
        """Start noting the lowest position the writes of ``key`` rewrite."""
        with self._lock:
            if key in self._items:
                self._low[key] = sys.maxsize

    def unchanged_below(self, key: object) -> int:
        """Stop watching ``key``: how many leading messages no write rewrote since
        :meth:`watch` (``0``: unknown, the snapshot went meanwhile)."""
        with self._lock:
            return self._low.pop(key, 0)

    def adopt(self, key: object, owner: AgentState, version: int) -> None:
        """``owner`` now holds the message objects of ``key``'s snapshot at ``version``
        (a copy of the state saved: see :mod:`rx_agent.session._cache`): they stay
        while it lives, whatever becomes of the state object they came from."""
        ident = id(owner)
        with self._lock:
            snap = self._items.get(key)
            if snap is None or snap.objs is None or snap.version != version:
                return
            if self._owners.get(key) == ident:
                return
            self._owners[key] = ident
        weakref.finalize(owner, self._orphan, key, ident)

    def _orphan(self, key: object, ident: int) -> None:
        """The state whose messages ``key``'s snapshot holds died: let them go."""
        with self._lock:
            if self._owners.get(key) != ident:
                return
            del self._owners[key]
            snap = self._items.get(key)
            if snap is not None:
                snap.objs = None

    def drop(self, key: object) -> None:
        with self._lock:
            self._items.pop(key, None)
            self._owners.pop(key, None)
            self._low.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._owners.clear()
            self._low.clear()


# -- in-place edit marks -------------------------------------------------------------------

_marks: dict[int, set[str]] = {}
_watched: set[int] = set()  # states with a finalizer that forgets their marks
_marks_lock = threading.Lock()


def _forget(ident: int) -> None:
    with _marks_lock:
        _marks.pop(ident, None)
        _watched.discard(ident)


def mark_changed(state: AgentState, *messages: Msg | str) -> None:
    """Tell durable stores that ``messages`` of ``state`` were edited in place.

    Pass the edited :class:`~rx_agent.Msg` objects (or their ids). The next save of
    ``state`` rewrites the stored context from the earliest of them on. Needed only
    for messages older than the last few (see :mod:`rx_agent.session._delta`);
    replacing, inserting or removing messages is detected without it.
    """
    if not isinstance(state, AgentState):
        raise TypeError(f"mark_changed(state, *messages) needs an AgentState, got "
                        f"{type(state).__name__}")
    ids: set[str] = set()
    for m in messages:
        if isinstance(m, Msg):
            ids.add(m.id)
        elif isinstance(m, str):
            ids.add(m)
        else:
            raise TypeError(f"mark_changed() takes Msg objects or message ids, got "
                            f"{type(m).__name__}")
    restore_marks(state, ids)


def restore_marks(state: AgentState, ids: Iterable[str]) -> None:
    ids = set(ids)
    if not ids:
        return
    ident = id(state)
    with _marks_lock:
        if ident not in _watched:
            _watched.add(ident)
            weakref.finalize(state, _forget, ident)
        _marks.setdefault(ident, set()).update(ids)


def take_marks(state: AgentState) -> frozenset[str]:
    """The ids marked on ``state`` (removed: the caller saves them or restores them)."""
    if not _marks:  # the common case costs one truthiness check
        return frozenset()
    with _marks_lock:
        entry = _marks.pop(id(state), None)
    return frozenset(entry) if entry else frozenset()
