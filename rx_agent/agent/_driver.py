"""The driver: runs a call's steps and does, between two of them, what no step does.

:meth:`Driver.run` is the one place of the boundary checks, before the first step
(an interrupt only) and after each one, in this order:

1. an interrupt (``agent.interrupt()``) ends the reply: the step that just ran (or was
   cut, :class:`~._steps.Interrupted`) closes what it left open
   (:meth:`~._step.Step.cut`), then :class:`~._machine.Close`;
2. a stop request (``RequestStopEvent`` from a middleware) ends it too;
3. a step whose outcome says ``save`` is followed by a checkpoint (durable sessions),
   and the interrupt check again (the checkpoint awaited);
4. a ``round`` outcome begins a round, unless the limit is reached:
   :class:`~._machine.Summarize` runs instead.

A second driver subclasses :class:`Driver` and reuses the steps unchanged: it may wrap
each step (:meth:`Driver.step`: the testing recorder), and run a call's two effects
elsewhere (:meth:`Driver.model_stream`, one attempt of a model call;
:meth:`Driver.execute_tool`, one tool call: a workflow engine's activities). See
``docs/internals.md``, "The step machine".
"""

from __future__ import annotations

from ..message import Msg
from ..tool._execute import execute
from ._loop import ReActLoop
from ._machine import Close, Summarize
from ._step import Continue, End, Outcome, Step, stream_model
from ._steps import CallScope, Interrupted

__all__ = ["DRIVER", "Driver"]


class Driver:
    """Runs one call's steps in this process (the default driver).

    Stateless, so one instance serves every call; a driver with state (a recorder)
    is made per call."""

    __slots__ = ()

    # The call's effects (see the module docstring): the defaults run them here.
    model_stream = staticmethod(stream_model)
    execute_tool = staticmethod(execute)

    def bind(self, scope: CallScope) -> None:
        """Before the call starts: its effects go through this driver."""
        if self.model_stream is not stream_model:  # the default: the model's own stream
            scope.model_stream = self.model_stream
        scope.execute_tool = self.execute_tool

    async def step(self, step: Step, loop: ReActLoop) -> Outcome:
        """Run one step (override to wrap each step; call this to run it)."""
        outcome = step.run(loop)
        if type(outcome) is Continue or type(outcome) is End:
            return outcome
        return await outcome

    async def run(self, loop: ReActLoop, step: Step) -> Msg:
        """Run the steps from ``step`` until one ends the reply; its final message."""
        scope = loop.scope
        # A subclass that does not wrap steps runs them directly (no frame per step).
        direct = type(self).step is Driver.step
        if scope.interrupted and step.checked:  # before the first step too
            step = Close(False, None)
        while True:
            scope.step = step
            try:
                outcome = step.run(loop) if direct else self.step(step, loop)
                if type(outcome) is not Continue:
                    if type(outcome) is not End:
                        outcome = await outcome  # a step that waits
                    if type(outcome) is End:
                        return outcome.msg
            except Interrupted:  # cut while it ran
                step = Close(False, step.cut(loop))
                continue
            finally:
                scope.step = None
            nxt = outcome.next
            # The common move (nothing to save, count or stop) costs four reads.
            if (outcome.save or outcome.round or scope.interrupted
                    or scope.stop_request is not None) and nxt.checked:
                if scope.interrupted:
                    nxt = Close(False, step.cut(loop))
                elif scope.stop_request is not None:
                    nxt = Close(True, step.answer())
                else:
                    if outcome.save and scope.checkpoint is not None:
                        await scope.checkpoint()
                        if scope.interrupted:  # while it saved
                            step = Close(False, step.cut(loop))
                            continue
                    if outcome.round:
                        if loop.iteration >= loop.limit:
                            nxt = Summarize()
                        else:
                            loop.iteration += 1
            step = nxt


DRIVER = Driver()
"""The driver of every call that was not given another."""

