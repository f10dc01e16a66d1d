"""The loop-lag watchdog: a blocking call on the event loop, named.

Everything a call does runs on one event loop, shared by every call on it: a
``time.sleep`` or a synchronous HTTP request inside an ``async`` tool or a hook stalls
them all. With a threshold set (``ReActAgent(loop_lag_threshold=...)`` or the
``RX_AGENT_LOOP_LAG`` environment variable, in seconds) a daemon thread per loop posts
a probe onto the loop every half threshold; when a probe waits longer than the
threshold, it samples the loop thread's stack at that moment and, once the loop runs
again, logs a warning on the ``rx_agent`` logger naming the tool or the middleware
hook that was running, the function and the line. Off, it costs one attribute test
per call; on, one loop callback per half threshold.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import sysconfig
import threading
import time
import weakref
from types import CodeType, FrameType

from .._rx import LoopAffinity
from ..middleware.base import ExtensionPoint
from ..tool._codes import tool_named_by

__all__ = ["ENV_VAR", "env_threshold", "watch"]

ENV_VAR = "RX_AGENT_LOOP_LAG"

_log = logging.getLogger("rx_agent")

_HOOKS = frozenset(p.value for p in ExtensionPoint)
# Where library code lives (the standard library, installed packages, rx_agent): the
# innermost frame outside them is the code to point at.
_LIBRARY = tuple(
    os.path.normcase(p) + os.sep
    for p in {*(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
              os.path.dirname(os.path.dirname(__file__))}
)


def env_threshold() -> float | None:
    """The threshold ``RX_AGENT_LOOP_LAG`` sets (``None``: unset, empty or ``0``)."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ValueError(f"{ENV_VAR} must be a number of seconds (0 turns the watchdog off), "
                         f"got {raw!r}")
    return value or None


class _Watch:
    """One loop's watchdog thread."""

    def __init__(self, where: LoopAffinity, threshold: float) -> None:
        self.where = where
        self.threshold = threshold
        self.thread = threading.Thread(target=self._run, name="rx-agent-watchdog", daemon=True)

    def _run(self) -> None:
        loop = self.where.loop
        try:
            while loop.is_running():
                threshold = self.threshold  # may be lowered by another agent
                ran = threading.Event()
                sent = time.monotonic()
                try:
                    loop.call_soon_threadsafe(ran.set)
                except RuntimeError:  # the loop closed
                    return
                if not ran.wait(threshold):
                    sample = _culprit(sys._current_frames().get(self.where.thread))
                    while not ran.wait(0.5):
                        if not loop.is_running():
                            return
                    self._report(time.monotonic() - sent, threshold, sample)
                time.sleep(threshold / 2)
        finally:
            with _lock:
                if _watched.get(loop) is self:
                    del _watched[loop]

    @staticmethod
    def _report(lag: float, threshold: float, sample: tuple[str, str]) -> None:
        who, where = sample
        _log.warning(
            "the event loop was blocked for %.2f s or more (threshold %.2f s) by %s%s: a blocking "
            "call in async code (time.sleep, a synchronous client, file I/O) stalls every "
            "call on the loop; await an async form (asyncio.sleep, an async client), or run "
            "it on a thread (a plain def tool does, or await asyncio.to_thread(...))",
            lag, threshold, who, where)


_lock = threading.Lock()
_watched: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watch] = (
    weakref.WeakKeyDictionary()
)


def watch(where: LoopAffinity, threshold: float) -> None:
    """Watch ``where``'s loop (on its thread, while it runs) with ``threshold`` seconds;
    a loop already watched keeps its thread and the lower threshold."""
    loop = where.loop
    with _lock:
        found = _watched.get(loop)
        if found is not None:
            found.threshold = min(found.threshold, threshold)
            return
        found = _watched[loop] = _Watch(where, threshold)
    found.thread.start()


def _culprit(frame: FrameType | None) -> tuple[str, str]:
    """Who was running in ``frame``'s stack: a tool, a middleware hook or, failing
    that, the innermost code outside libraries; and that code's place."""
    innermost: FrameType | None = None
    who: str | None = None
    while frame is not None:
        code = frame.f_code
        if innermost is None and not os.path.normcase(code.co_filename).startswith(_LIBRARY):
            innermost = frame
        if who is None:
            who = _named(code)
        if who is not None and innermost is not None:
            break
        frame = frame.f_back
    place = ""
    if innermost is not None:
        code = innermost.f_code
        place = f" ({code.co_qualname} at {code.co_filename}:{innermost.f_lineno})"
    if who is None:
        who = "code outside tools and hooks" if innermost is not None else "the runtime"
    return who, place


def _named(code: CodeType) -> str | None:
    tool = tool_named_by(code)
    if tool is not None:
        return f"tool {tool!r}"
    parts = code.co_qualname.split(".")
    for i, part in enumerate(parts[1:], 1):
        if part in _HOOKS and parts[i - 1] != "<locals>":
            return f"middleware {parts[i - 1]}.{part}()"
    return None
