"""Stepping a ``TestScheduler`` one piece of work at a time.

``VirtualTimeScheduler.advance_to`` returns at once when asked for the current time,
so work due *now* would never run; the harness and the verifier step with these.
"""

from __future__ import annotations

import asyncio
from typing import Any

from reactivex.testing import TestScheduler

__all__ = ["MAX_STEPS", "next_due", "run_next", "run_until", "settle_loop"]

MAX_STEPS = 100_000
"""Scheduled actions one run may execute before it is taken for an endless stream."""


def next_due(scheduler: TestScheduler) -> float | None:
    """Virtual seconds of the first work still scheduled (cancelled work is dropped)."""
    queue: Any = scheduler._queue
    with scheduler._lock:
        while len(queue) and queue.peek().is_cancelled():
            queue.dequeue()
        if not len(queue):
            return None
        return float(scheduler.to_seconds(queue.peek().duetime))


def run_next(scheduler: TestScheduler) -> bool:
    """Run the first scheduled work, moving the clock to it; ``False`` when none is left."""
    due = next_due(scheduler)
    if due is None:
        return False
    if due > scheduler.clock:
        scheduler.advance_to(due)  # runs everything due at that instant
        return True
    queue: Any = scheduler._queue
    with scheduler._lock:
        item = queue.dequeue()
    if not item.is_cancelled():
        item.invoke()
    return True


def run_until(scheduler: TestScheduler, until: float, *, inclusive: bool = True) -> int:
    """Run the work due up to ``until`` (also that due exactly then when ``inclusive``),
    then set the clock to ``until``; the number of steps taken."""
    steps = 0
    while True:
        due = next_due(scheduler)
        if due is None or due > until or (due == until and not inclusive):
            break
        run_next(scheduler)
        steps += 1
        if steps > MAX_STEPS:
            raise RuntimeError(
                f"more than {MAX_STEPS} scheduled actions before {until} s of virtual time: "
                "the stream schedules work without end"
            )
    if until > scheduler.clock:
        scheduler.sleep(until - scheduler.clock)
    return steps


async def settle_loop(limit: int = 10_000) -> None:
    """Let the running loop run every callback that is ready (and those they make
    ready), so work a hook handed to asyncio is done before virtual time moves on."""
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)  # CPython's ready queue: stop when it is empty
    for _ in range(limit if ready is not None else 3):
        await asyncio.sleep(0)
        if ready is not None and not ready:
            return
