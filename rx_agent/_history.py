"""A session's messages, and snapshots of them that cost nothing to take.

Every ReAct round hands the model the whole context. A tuple copy of it touches every
message object (a reference count each): at 20,000 messages that is about 0.2 ms a
round, the only part of a call that still grew with the session. :class:`History` is
the list ``AgentState.context`` holds while a call runs, and :class:`HistoryView` a
read-only snapshot of its first ``n`` messages (after an optional system message) that
copies nothing.

A snapshot stays exact: appending (what a call does) never reaches the messages a view
covers, and every other change of the list (``h[i] = m``, ``del``, ``insert``, ``pop``,
slice assignment, ``sort``, ...) first gives the views still alive a tuple of what they
cover. So a view a middleware or a model keeps (``ScriptedModel.calls``) shows what
that round saw, whatever the session did after.

A History also carries a *lineage*: a token that every change but an append replaces.
While a list holds the token a store's snapshot recorded with ``n`` messages, its first
``n`` messages are still the very objects stored, so a save finds what it must write
without comparing the session (``rx_agent.session._delta``).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, SupportsIndex, overload

if TYPE_CHECKING:
    from .message import Msg

__all__ = ["History", "HistoryView", "snapshot"]

_PRUNE = 16  # views registered before the dead ones are dropped from the list


class History(list["Msg"]):
    """``AgentState.context`` while a call runs: a list that keeps its views exact.

    Appends and extends are the list's own (C speed, no check); a change anywhere else
    first freezes the views taken of it."""

    __slots__ = ("_lineage", "_views")

    def __init__(self, items: Iterable[Msg] = ()) -> None:
        super().__init__(items)
        self._views: list[weakref.ref[HistoryView]] = []
        self._lineage = object()

    @property
    def lineage(self) -> object:
        """The token of this list's run of appends (replaced by any other change)."""
        return self._lineage

    def handover(self) -> History:
        """A copy that continues this list's lineage; this list starts a new one (two
        lists holding one token could append different messages after it)."""
        heir = History(self)
        heir._lineage, self._lineage = self._lineage, object()
        return heir

    def _watch(self, view: HistoryView) -> None:
        views = self._views
        if len(views) >= _PRUNE:
            views[:] = [ref for ref in views if ref() is not None]
        views.append(weakref.ref(view))

    def _changed(self) -> None:
        """Before a change other than an append: a new lineage, and the views frozen."""
        self._lineage = object()
        if self._views:
            self._freeze()

    def _freeze(self) -> None:
        """Give every live view of this list a tuple of what it covers."""
        views, self._views = self._views, []
        whole: tuple[Msg, ...] | None = None
        for ref in views:
            view = ref()
            if view is None or view._items is not self:
                continue
            if whole is None:
                whole = tuple(list.__iter__(self))
            view._items = whole if view._n == len(whole) else whole[:view._n]

    # Every mutator but append / extend / += (which leave a view's prefix alone).

    def __setitem__(self, index: Any, value: Any) -> None:
        self._changed()
        super().__setitem__(index, value)

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        self._changed()
        super().__delitem__(index)

    def __imul__(self, times: SupportsIndex) -> History:
        self._changed()
        super().__imul__(times)
        return self

    def insert(self, index: SupportsIndex, value: Msg) -> None:
        self._changed()
        super().insert(index, value)

    def pop(self, index: SupportsIndex = -1) -> Msg:
        self._changed()
        return super().pop(index)

    def remove(self, value: Msg) -> None:
        self._changed()
        super().remove(value)

    def clear(self) -> None:
        self._changed()
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._changed()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self._changed()
        super().reverse()

    # A copy or a pickle is a plain History of the same messages, without the views.

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return History, (list(self),)

    def __copy__(self) -> History:
        return History(self)


class HistoryView(Sequence["Msg"]):
    """The messages a round shows the model: ``head`` (the system message, or none),
    then the first ``n`` messages of a :class:`History`, as they were when taken.

    A read-only sequence: indexing, ``len``, iteration, ``in`` as a tuple's; a slice,
    ``+`` and ``==`` answer with (or compare as) tuples."""

    __slots__ = ("__weakref__", "_head", "_items", "_n")

    def __init__(self, head: Msg | None, items: History) -> None:
        self._head = head
        self._items: History | tuple[Msg, ...] = items
        self._n = len(items)
        items._watch(self)

    def __len__(self) -> int:
        return self._n + (self._head is not None)

    def __iter__(self) -> Iterator[Msg]:
        items = self._items
        body: Iterator[Msg] = (iter(items) if type(items) is tuple
                               else itertools.islice(items, self._n))
        return body if self._head is None else itertools.chain((self._head,), body)

    @overload
    def __getitem__(self, index: SupportsIndex) -> Msg: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Msg, ...]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Msg | tuple[Msg, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        i = index.__index__()
        size = len(self)
        if i < 0:
            i += size
        if not 0 <= i < size:
            raise IndexError("message index out of range")
        if self._head is not None:
            if i == 0:
                return self._head
            i -= 1
        return self._items[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, list, HistoryView)):
            return len(self) == len(other) and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Sequence[Msg]) -> tuple[Msg, ...]:
        return (*self, *other)

    def __radd__(self, other: Sequence[Msg]) -> tuple[Msg, ...]:
        return (*other, *self)

    def __repr__(self) -> str:
        return f"HistoryView({len(self)} messages)"

    def __reduce__(self) -> Any:
        return tuple, (tuple(self),)


def snapshot(head: Msg | None, context: list[Msg]) -> Sequence[Msg]:
    """The messages a round shows the model: a view of ``context`` when it is a
    :class:`History`, else a tuple copy."""
    if type(context) is History:
        return HistoryView(head, context)
    return tuple(context) if head is None else (head, *context)
