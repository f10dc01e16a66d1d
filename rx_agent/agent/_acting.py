"""Acting: deciding permissions, pausing and resuming for a human, running a batch.

A round's tool calls go through the steps here: :class:`Act` decides permissions
(rules deny some, DENIED results; ask about some: the reply pauses and
:attr:`AgentState.pending` keeps the batch; a permission handler answers others, one
:class:`Consult` step each), hands external calls to the caller (:class:`Pause`), and
runs the rest as one :class:`~._batch.Batch` step through the ``on_acting`` chain,
whose core is :meth:`Acting.core`. :class:`Resume` continues a paused batch. Results
enter the context in call order, so an interrupt keeps what finished and answers the
rest exactly once. Each step is handed what follows it (the round's continuation),
so acting knows nothing of rounds.
"""

from __future__ import annotations

from typing import Literal, Protocol

from reactivex import Observable

from .._record import new_id
from ..context import AgentState, PendingToolCalls
from ..event import (
    AgentEvent,
    ExternalExecutionResultEvent,
    RequestStopEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
)
from ..message import GenerateReason, Msg, Role, ToolResultState, ToolUseBlock
from ..middleware.base import ExtensionPoint
from ..middleware.inputs import ActingInput
from ..middleware.types import Handler
from ..permissions import Permission, decide
from ..tool.toolkit import Tool
from ._batch import Batch, BatchCore
from ._hitl import ResumeEvent, apply_edits
from ._permission_handler import consult
from ._results import denied_result, emit_result_events, record_result
from ._step import Continue, End, Outcome, Step, count
from ._steps import CallScope

__all__ = ["Act", "Acting", "Consult", "Pause", "Resume"]


class Acting:
    """The acting side of one call: the ``on_acting`` chain and what its steps share."""

    __slots__ = ("chain", "scope")

    def __init__(self, scope: CallScope) -> None:
        self.scope = scope
        plan = scope.config.plan
        # None where no layer wraps the core (no bound method kept per call).
        self.chain: Handler[ActingInput] | None = plan.wrap(
            ExtensionPoint.ON_ACTING, scope.agent, scope.ctx, self.core,
        ) if ExtensionPoint.ON_ACTING in plan.layered else None

    def abandon_pending(self, state: AgentState) -> None:
        """A new message arrived instead of an answer: close the paused calls."""
        state.pending = None
        self.scope.close_unanswered(
            state, ToolResultState.INTERRUPTED,
            "Not executed: the user sent a new message instead of answering.")

    def who(self) -> str:
        plan = self.scope.config.plan
        return ", ".join(f"{label}.on_acting()"
                         for label in plan.labels(ExtensionPoint.ON_ACTING)) or "on_acting"

    def pause(
        self,
        state: AgentState,
        kind: Literal["confirm", "external"],
        waiting: list[ToolUseBlock],
        batch: list[ToolUseBlock],
        denied: dict[str, str],
    ) -> Msg:
        """The reply pauses: the batch is kept in ``state.pending`` for the caller."""
        scope = self.scope
        reply_id = new_id()
        # Denials the user already gave (a mixed batch paused again) are kept as results.
        for call in batch:
            if call.id in denied:
                self.write_denied(state, call, denied[call.id], reply_id)
        batch = [c for c in batch if c.id not in denied]
        state.pending = PendingToolCalls(reply_id=reply_id, kind=kind,
                                         tool_calls=list(waiting), batch=list(batch))
        if kind == "confirm":
            reason = GenerateReason.PERMISSION_ASKING
            scope.emit(RequireUserConfirmEvent.make(scope.source, reply_id=reply_id,
                                                    tool_calls=list(waiting)))
            scope.emit(RequestStopEvent.make(
                scope.source, reason="Waiting for the user to confirm tool calls.",
                generate_reason=reason))
        else:
            reason = GenerateReason.TOOL_SUSPENDED
            scope.emit(RequireExternalExecutionEvent.make(scope.source, reply_id=reply_id,
                                                          tool_calls=list(waiting)))
        # Not stored: the context must go on with the results of these calls.
        return Msg(role=Role.ASSISTANT, content=list(waiting), name=scope.config.name,
                   generate_reason=reason, metadata={"reply_id": reply_id})

    def write_denied(
        self, state: AgentState, call: ToolUseBlock, reason: str, reply_id: str
    ) -> None:
        block = denied_result(call, reason)
        emit_result_events(self.scope.emit, self.scope.source, reply_id, block)
        record_result(state, block)

    def core(self, ain: ActingInput) -> Observable[AgentEvent]:
        """The core of ``on_acting``: the calls it is handed, run by the batch step the
        scope is running."""
        step = self.scope.step
        return BatchCore(step if type(step) is Batch else None, ain, self.who)


class _Loop(Protocol):
    """What the acting steps use of the call's loop (``ReActLoop``)."""

    scope: CallScope
    state: AgentState

    @property
    def acting(self) -> Acting: ...


def _names(calls: list[ToolUseBlock] | tuple[ToolUseBlock, ...]) -> str:
    return f"{count(len(calls), 'call')}: {', '.join(c.name for c in calls)}"


class Resume(Step):
    """Continue the paused batch with the caller's answer: external results are
    recorded; confirmations go on as an :class:`Act` step with the user's decisions."""

    __slots__ = ("event", "then")
    name = "resume"
    checked = False  # what the caller brought is recorded, interrupted or not

    def __init__(self, event: ResumeEvent, then: Continue) -> None:
        self.event = event
        self.then = then  # after the batch: the round's continuation

    def run(self, loop: _Loop) -> Outcome:
        scope = loop.scope
        state = loop.state
        event = self.event
        pending = state.pending
        assert pending is not None
        state.pending = None
        if isinstance(event, ExternalExecutionResultEvent):
            scope.emit(ExternalExecutionResultEvent.make(
                scope.source, reply_id=event.reply_id, tool_results=list(event.tool_results)))
            by_id = {r.id: r for r in event.tool_results}
            for call in pending.tool_calls:
                record_result(state, by_id[call.id])
            return self.then
        scope.emit(UserConfirmResultEvent.make(
            scope.source, reply_id=event.reply_id, confirm_results=list(event.confirm_results)))
        denied: dict[str, str] = {}
        edited: dict[str, ToolUseBlock] = {}
        for decision in event.confirm_results:
            if decision.rules:
                state.permission_rules.extend(decision.rules)
            call = decision.tool_call
            if decision.confirmed:
                edited[call.id] = call
            else:
                denied[call.id] = decision.reason or "Denied by the user."
        if edited:
            apply_edits(state, edited)
        calls = [edited.get(c.id, c) for c in pending.batch]
        return Continue(Act(calls, self.then, confirmed=set(edited), denied=denied))

    def describe(self, loop: _Loop) -> str:
        return type(self.event).__name__


class Act(Step):
    """Decide each call's permission; then pause for a confirmation, run the batch, or
    hand external calls to the caller."""

    __slots__ = ("ask", "at", "calls", "confirmed", "denied", "external", "reply_id",
                 "then", "to_run")
    name = "act"

    def __init__(self, calls: list[ToolUseBlock], then: Continue,
                 confirmed: set[str] | None = None, denied: dict[str, str] | None = None) -> None:
        self.calls = calls
        self.then = then  # after the batch: the round's continuation
        self.confirmed = confirmed or set()
        self.denied = denied or {}
        # One reply id for every result of this batch, however it is decided.
        self.reply_id = new_id()
        self.to_run: list[ToolUseBlock] = []
        self.ask: list[ToolUseBlock] = []
        self.external: list[ToolUseBlock] = []
        self.at = 0  # the next call to decide (a consult step comes back here)

    def run(self, loop: _Loop) -> Outcome:
        scope = loop.scope
        state = loop.state
        config = scope.config
        toolkit = scope.toolkit
        calls, confirmed, denied = self.calls, self.confirmed, self.denied
        while self.at < len(calls):
            call = calls[self.at]
            self.at += 1
            tool = toolkit.get(call.name)
            if call.id in denied:
                self.to_run.append(call)  # the core writes the user's denial
                continue
            if call.id not in confirmed and tool is not scope.response_tool:
                rules = [*state.permission_rules, *config.permission_rules,
                         *(tool.rules if tool is not None else ())]
                decision, reason = decide(
                    call, rules, tool.permission if tool is not None else Permission.ALLOW)
                if decision is Permission.DENY:
                    loop.acting.write_denied(state, call, reason or "permission denied by rules",
                                             self.reply_id)
                    continue
                if decision is Permission.ASK:
                    if config.permission_handler is not None:
                        return Continue(Consult(self, call, tool))
                    self.ask.append(call)  # for a human: the batch pauses
                    continue
            self.place(call, tool)
        return self.decided(loop.acting, state)

    def place(self, call: ToolUseBlock, tool: Tool | None) -> None:
        if tool is not None and tool.external:
            self.external.append(call)
        else:
            self.to_run.append(call)

    def decided(self, acting: Acting, state: AgentState) -> Outcome:
        """Every call is decided: what comes next."""
        to_run, external = self.to_run, self.external
        if self.ask:
            waiting = {c.id for c in self.ask}
            rest = {c.id for c in to_run} | {c.id for c in external}
            batch = [c for c in self.calls if c.id in waiting or c.id in rest]
            return End(acting.pause(state, "confirm", self.ask, batch, self.denied))
        # External calls pause the reply once the batch has run (unless it ended).
        then = Continue(Pause(external)) if external else self.then
        if to_run:
            return Continue(Batch(acting.scope, tuple(to_run), self.reply_id, self.denied,
                                  acting.who, acting.chain, then))
        return then

    def describe(self, loop: _Loop) -> str:
        return _names(self.calls) if self.at == 0 else f"after {self.calls[self.at - 1].name!r}"


class Consult(Step):
    """Ask the permission handler about one call; its verdict goes back to the act."""

    __slots__ = ("act", "call", "tool")
    name = "consult"

    def __init__(self, act: Act, call: ToolUseBlock, tool: Tool | None) -> None:
        self.act = act
        self.call = call
        self.tool = tool

    async def run(self, loop: _Loop) -> Outcome:
        scope = loop.scope
        handler = scope.config.permission_handler
        assert handler is not None
        act, call = self.act, self.call
        verdict = await consult(handler, call, scope.ctx, loop.state)
        if verdict is None:  # for a human: the batch pauses
            act.ask.append(call)
        elif isinstance(verdict, str):  # denied: the core writes the reason
            act.denied[call.id] = verdict
            act.to_run.append(call)
        else:  # allowed, with the arguments it approved
            act.place(verdict, self.tool)
        return Continue(act)

    def describe(self, loop: _Loop) -> str:
        return f"{self.call.name!r}"


class Pause(Step):
    """Hand the external calls to the caller: the reply pauses."""

    __slots__ = ("calls",)
    name = "pause"

    def __init__(self, calls: list[ToolUseBlock]) -> None:
        self.calls = calls

    def run(self, loop: _Loop) -> Outcome:
        return End(loop.acting.pause(loop.state, "external", self.calls, self.calls, {}))

    def describe(self, loop: _Loop) -> str:
        return f"external {_names(self.calls)}"
