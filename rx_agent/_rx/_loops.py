"""Which thread runs an event loop: :class:`LoopAffinity`, :func:`affinity`."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from typing import Any

from ._direct import running_loop

__all__ = ["LoopAffinity", "affinity"]

_thread_id = threading.get_ident


class LoopAffinity:
    """An event loop and the thread that runs it.

    The one place that decides whether a callback may run now (this is the loop's
    thread) or must hop onto the loop (``call_soon_threadsafe``); see
    docs/internals.md, "Threading". Hot paths compare ``threading.get_ident()`` with
    :attr:`thread` inline and call :meth:`hop` only when they are elsewhere.
    """

    __slots__ = ("loop", "thread")

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: int) -> None:
        self.loop = loop
        self.thread = thread  # -1: not known yet (every call hops)

    def here(self) -> bool:
        """Whether this is the loop's thread."""
        return _thread_id() == self.thread

    def run(self, fn: Callable[..., Any], *args: Any) -> None:
        """``fn(*args)`` now on the loop's thread, else as soon as the loop can."""
        if _thread_id() == self.thread:
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def hop(self, fn: Callable[..., Any], *args: Any) -> None:
        """``fn(*args)`` on the loop, later, whatever thread this is."""
        if _thread_id() == self.thread:  # a workflow engine's loop has no threadsafe form
            self.loop.call_soon(fn, *args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)


# The thread of each loop seen running (a loop never moves to another thread while
# it runs; a closed loop's entry goes with the loop).
_affinities: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopAffinity] = (
    weakref.WeakKeyDictionary()
)


def affinity(loop: asyncio.AbstractEventLoop | None = None) -> LoopAffinity:
    """The :class:`LoopAffinity` of ``loop`` (default: the loop running in this thread).

    A loop first seen from another thread gets its thread once it is seen running."""
    if loop is None:
        loop = asyncio.get_running_loop()
    found = _affinities.get(loop)
    if found is not None and found.thread != -1:
        return found
    here = running_loop() is loop
    if found is None:
        found = _affinities[loop] = LoopAffinity(loop, _thread_id() if here else -1)
    elif here:
        found.thread = _thread_id()
    return found
