"""A second driver of an agent's steps: it runs a call and records each step.

The runtime runs a call as steps (prepare, reason, act, batch, respond, ...);
:class:`StepRecorder` is a driver that runs those same steps, unchanged, and keeps one
:class:`StepRecord` per step it ran: the step's name, a summary of its input, and
what it returned::

    from rx_agent import ReActAgent, ScriptedModel
    from rx_agent.testing import StepRecorder

    recorder = StepRecorder()
    agent = ReActAgent(name="a", model=ScriptedModel(["hi"]))
    assert recorder.call_sync(agent, "hello").text == "hi"
    assert recorder.names == ["prepare", "reason", "respond"]
    assert recorder.steps[-1].outcome == "end: MODEL_STOP"
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from reactivex import Observable

from ..agent._calling import NoResultError, stream_driven
from ..agent._driver import Driver
from ..agent._loop import ReActLoop
from ..agent._step import End, Outcome, Step
from ..agent._steps import Interrupted
from ..agent.react import ReActAgent
from ..context import RuntimeContext
from ..event import AgentEvent, AgentResultEvent
from ..message import Msg
from ._collect import collect, final_result

__all__ = ["StepRecord", "StepRecorder"]


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step a :class:`StepRecorder` ran."""

    name: str
    """The step: ``prepare``, ``resume``, ``compress``, ``reason``,
    ``respond``, ``continue``, ``act``, ``consult``, ``batch``, ``pause``,
    ``structured``, ``summarize``, ``summarized`` or ``close``."""
    input: str
    """A short summary of what the step was given (``"round 1, 1 message, 0 tools"``)."""
    outcome: str
    """What it returned: ``"next: act, save"`` (the next step; ``save``: a checkpoint
    is due; ``new round``: the next step begins a round), ``"end: MODEL_STOP"`` (the
    reply's final message and its ``generate_reason``), ``"interrupted"`` (cut by an interrupt) or
    ``"raised ValueError"``."""


def _outcome(outcome: Outcome) -> str:
    if isinstance(outcome, End):
        reason = outcome.msg.generate_reason
        return "end" if reason is None else f"end: {reason.value}"
    marks = [outcome.next.name]
    if outcome.save:
        marks.append("save")
    if outcome.round:
        marks.append("new round")
    return "next: " + ", ".join(marks)


class StepRecorder(Driver):
    """Runs an agent's calls with their steps recorded in :attr:`steps` (every call
    run through this recorder appends to it).

    The checks between steps (interrupts, stop requests, checkpoints, the round
    limit) are the runtime's own, so a record's next step can differ from the one the
    step named: ``close`` after an interrupt, ``summarize`` at the round limit.
    """

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps: list[StepRecord] = []

    @property
    def names(self) -> list[str]:
        """The names of the steps recorded so far, in order."""
        return [record.name for record in self.steps]

    async def step(self, step: Step, loop: ReActLoop) -> Outcome:
        given = step.describe(loop)
        try:
            outcome = await super().step(step, loop)
        except Interrupted:
            self.steps.append(StepRecord(step.name, given, "interrupted"))
            raise
        except BaseException as exc:
            self.steps.append(StepRecord(step.name, given, f"raised {type(exc).__name__}"))
            raise
        self.steps.append(StepRecord(step.name, given, _outcome(outcome)))
        return outcome

    # -- running a call ----------------------------------------------------------------

    def stream(self, agent: ReActAgent, msgs: Any = None, ctx: RuntimeContext | None = None, *,
               structured_model: type[BaseModel] | None = None) -> Observable[AgentEvent]:
        """``agent.stream(msgs, ctx)`` with its steps recorded here."""
        return stream_driven(agent, self, msgs, ctx, structured_model)

    async def acall(self, agent: ReActAgent, msgs: Any = None, ctx: RuntimeContext | None = None, *,
                    structured_model: type[BaseModel] | None = None) -> Msg:
        """``await agent.acall(msgs, ctx)`` with its steps recorded here."""
        future: asyncio.Future[Msg] = asyncio.get_running_loop().create_future()
        result: list[Msg] = []

        def on_next(event: AgentEvent) -> None:
            if isinstance(event, AgentResultEvent):
                result[:] = [event.result]

        def on_error(exc: Exception) -> None:
            if not future.done():
                future.set_exception(exc)

        def on_completed() -> None:
            if future.done():
                return
            if result:
                future.set_result(result[0])
            else:
                future.set_exception(NoResultError(
                    f"agent {agent.name!r} completed without an AgentResultEvent"))

        subscription = self.stream(agent, msgs, ctx, structured_model=structured_model) \
            .subscribe(on_next, on_error, on_completed)
        try:
            return await future
        finally:
            subscription.dispose()

    def call_sync(self, agent: ReActAgent, msgs: Any = None, ctx: RuntimeContext | None = None, *,
                  structured_model: type[BaseModel] | None = None, timeout: float = 10.0) -> Msg:
        """``agent.call_sync(msgs, ctx)`` with its steps recorded here (not inside a
        running event loop)."""
        return final_result(collect(
            self.stream(agent, msgs, ctx, structured_model=structured_model), timeout))
