"""Acting: deciding permissions, pausing and resuming for a human, running a batch.

:meth:`Acting.dispatch` takes a round's tool calls: rules deny some (DENIED results),
ask about some (the reply pauses, :attr:`AgentState.pending` keeps the batch), hand
external ones to the caller (pause), and run the rest through the ``on_acting``
chain, whose core is :meth:`Acting.core`. One :class:`~._batch.Batch` per step runs
the calls and decides each one's result from what leaves the chain; results enter the
context in call order, so an interrupt keeps what finished and answers the rest
exactly once.
"""

from __future__ import annotations

from typing import Literal

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
from ._batch import Batch, BatchCore
from ._hitl import ResumeEvent, apply_edits
from ._permission_handler import consult
from ._results import denied_result, emit_result_events, record_result
from ._steps import CallScope, Interrupted

__all__ = ["Acting"]


class Acting:
    """The acting side of one call."""

    __slots__ = ("batch", "chain", "scope")

    def __init__(self, scope: CallScope) -> None:
        self.scope = scope
        config = scope.config
        plan = config.plan
        # None where no layer wraps the core (no bound method kept per call).
        self.chain: Handler[ActingInput] | None = plan.wrap(
            ExtensionPoint.ON_ACTING, scope.agent, scope.ctx, self.core,
        ) if ExtensionPoint.ON_ACTING in plan.layered else None
        self.batch: Batch | None = None

    # -- resume and abandon --------------------------------------------------------

    async def resume(self, state: AgentState, event: ResumeEvent) -> Msg | None:
        """Continue the paused batch; a message when the reply pauses or ends again."""
        scope = self.scope
        pending = state.pending
        assert pending is not None
        state.pending = None
        if isinstance(event, ExternalExecutionResultEvent):
            scope.emit(ExternalExecutionResultEvent.make(
                scope.source, reply_id=event.reply_id, tool_results=list(event.tool_results)))
            by_id = {r.id: r for r in event.tool_results}
            for call in pending.tool_calls:
                record_result(state, by_id[call.id])
            return None
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
        return await self.dispatch(state, calls, confirmed=set(edited), denied=denied)

    def abandon_pending(self, state: AgentState) -> None:
        """A new message arrived instead of an answer: close the paused calls."""
        state.pending = None
        self.scope.close_unanswered(
            state, ToolResultState.INTERRUPTED,
            "Not executed: the user sent a new message instead of answering.")

    # -- dispatch ------------------------------------------------------------------

    async def dispatch(
        self,
        state: AgentState,
        calls: list[ToolUseBlock],
        confirmed: set[str] | None = None,
        denied: dict[str, str] | None = None,
    ) -> Msg | None:
        """Decide permissions, run what may run through ``on_acting``, and pause for
        confirmation or external execution; a message when the reply ends here."""
        scope = self.scope
        if scope.interrupted:
            return scope.close_interrupted(state)
        confirmed = confirmed or set()
        denied = denied or {}
        config = scope.config
        toolkit = scope.toolkit
        # One reply id for every result of this batch, however it is decided.
        reply_id = new_id()
        run: list[ToolUseBlock] = []
        ask: list[ToolUseBlock] = []
        external: list[ToolUseBlock] = []
        for call in calls:
            tool = toolkit.get(call.name)
            if call.id in denied:
                run.append(call)  # the core writes the user's denial
                continue
            if call.id not in confirmed and tool is not scope.response_tool:
                rules = [*state.permission_rules, *config.permission_rules,
                         *(tool.rules if tool is not None else ())]
                decision, reason = decide(
                    call, rules, tool.permission if tool is not None else Permission.ALLOW)
                if decision is Permission.DENY:
                    self._write_denied(state, call, reason or "permission denied by rules",
                                       reply_id)
                    continue
                if decision is Permission.ASK:
                    handler = config.permission_handler
                    verdict = None if handler is None else \
                        await consult(handler, call, scope.ctx, state)
                    if scope.interrupted:  # interrupt() while the handler decided
                        return scope.close_interrupted(state)
                    if verdict is None:  # for a human: the batch pauses
                        ask.append(call)
                        continue
                    if isinstance(verdict, str):  # denied: the core writes the reason
                        denied[call.id] = verdict
                        run.append(call)
                        continue
                    call = verdict  # noqa: PLW2901 (allowed, with the arguments it approved)
            if tool is not None and tool.external:
                external.append(call)
            else:
                run.append(call)
        if ask:
            waiting = {c.id for c in ask}
            rest = {c.id for c in run} | {c.id for c in external}
            batch = [c for c in calls if c.id in waiting or c.id in rest]
            return self._pause(state, "confirm", ask, batch, denied)
        if run:
            ended = await self._run_batch(state, run, reply_id, denied)
            if ended is not None:
                return ended
        if external and not scope.interrupted and scope.stop_request is None:
            return self._pause(state, "external", external, external, {})
        return None

    async def _run_batch(
        self, state: AgentState, run: list[ToolUseBlock], reply_id: str,
        denied: dict[str, str],
    ) -> Msg | None:
        scope = self.scope
        if scope.interrupted:
            return scope.close_interrupted(state)
        chain = self.chain
        calls = tuple(run)
        batch = Batch(scope, calls, reply_id, denied, self._who, chain is not None)
        self.batch = batch
        scope.cut_batch = batch.close
        try:
            ain = ActingInput(calls)
            batch.given = ain.tool_calls
            await scope.run_step(chain(ain) if chain is not None else self.core(ain),
                                 ExtensionPoint.ON_ACTING,
                                 ledger=batch.ledger if chain is not None else None)
            if batch.unsettled():  # the chain stopped listening to tools that still run
                await scope.run_step(batch.drain(), None)
        except Interrupted:
            return scope.close_interrupted(state)
        except BaseException:
            # Failed or disposed: keep what finished, in call order.
            batch.close(ToolResultState.INTERRUPTED, "Cancelled before it finished.")
            raise
        finally:
            self.batch = None
            scope.cut_batch = None
        if scope.interrupted:
            batch.close(ToolResultState.INTERRUPTED, "Interrupted before it finished.")
            return scope.close_interrupted(state)
        batch.close()  # calls the chain neither ran nor answered: "not executed"
        return None

    def _who(self) -> str:
        plan = self.scope.config.plan
        return ", ".join(f"{label}.on_acting()"
                         for label in plan.labels(ExtensionPoint.ON_ACTING)) or "on_acting"

    def _pause(
        self,
        state: AgentState,
        kind: Literal["confirm", "external"],
        waiting: list[ToolUseBlock],
        batch: list[ToolUseBlock],
        denied: dict[str, str],
    ) -> Msg:
        scope = self.scope
        reply_id = new_id()
        # Denials the user already gave (a mixed batch paused again) are kept as results.
        for call in batch:
            if call.id in denied:
                self._write_denied(state, call, denied[call.id], reply_id)
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

    def _write_denied(
        self, state: AgentState, call: ToolUseBlock, reason: str, reply_id: str
    ) -> None:
        block = denied_result(call, reason)
        emit_result_events(self.scope.emit, self.scope.source, reply_id, block)
        record_result(state, block)

    # -- the core of on_acting -----------------------------------------------------

    def core(self, ain: ActingInput) -> Observable[AgentEvent]:
        return BatchCore(self.batch, ain, self._who)
