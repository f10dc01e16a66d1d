"""Where one call is: its :class:`Phase`, and the one function every move goes
through (:meth:`Phase.to`), which refuses a move the lifecycle does not have.

The moves (``agent/_lifecycle.py`` makes them)::

    NEW → STARTED → READY → FINISHING → DONE
              ↘ REFUSED ↗        (any phase) → DISPOSED
"""

from __future__ import annotations

import enum

__all__ = ["Phase"]


class Phase(enum.Enum):
    """Where a call is. Moves forward only, through :meth:`to`; ``DISPOSED`` can follow
    any phase and nothing follows it."""

    NEW = "new"
    """Created; nobody subscribed yet."""
    STARTED = "started"
    """The ``on_agent`` chain is subscribed; the session is not bound yet."""
    READY = "ready"
    """The slot is held, the state bound and ``on_agent_state_ready`` has run."""
    REFUSED = "refused"
    """``on_agent_state_ready`` raised: the call never entered the pipeline."""
    FINISHING = "finishing"
    """The outcome is known: finish hooks, saving and release run."""
    DONE = "done"
    """The caller has its terminal signal."""
    DISPOSED = "disposed"
    """The caller disposed the subscription: no outcome is delivered."""

    def to(self, phase: Phase) -> Phase:
        """The move from this phase to ``phase``: ``phase``, or a ``RuntimeError`` for a
        move the lifecycle does not have (the runtime's bug, never the caller's)."""
        if phase in _MOVES[self._value_]:  # a str key, a tuple: no Enum.__hash__ call
            return phase
        raise RuntimeError(f"a call cannot move from phase {self.name} to {phase.name}")


_MOVES: dict[str, tuple[Phase, ...]] = {
    Phase.NEW.value: (Phase.STARTED, Phase.DISPOSED),
    Phase.STARTED.value: (Phase.READY, Phase.REFUSED, Phase.FINISHING, Phase.DISPOSED),
    Phase.READY.value: (Phase.FINISHING, Phase.DISPOSED),
    Phase.REFUSED.value: (Phase.FINISHING, Phase.DISPOSED),
    Phase.FINISHING.value: (Phase.DONE, Phase.DISPOSED),
    Phase.DONE.value: (Phase.DISPOSED,),
    Phase.DISPOSED.value: (),
}
