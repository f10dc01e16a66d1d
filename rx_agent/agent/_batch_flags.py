"""What a batch does for tools that declared side effects or how an interrupt treats
them (``@tool(side_effect=True)``, ``@tool(interrupt="finish")``).

A batch whose tools all keep the defaults has no :class:`BatchFlags` (``Batch.flags``
is ``None``) and runs as before: the flags cost a look-up of each call's tool when
the batch is made. Otherwise each call of the batch runs in a task of its own, so that

* an interrupt lets the ``"finish"`` calls that are running end and keeps their real
  results, while the ``"cancel"`` ones are cancelled as usual and no call starts
  (:meth:`hold`, asked by ``CallScope`` before it cuts the batch's step); a journal
  save in flight is never cut either;
* in a durable session a ``side_effect`` call is journaled (:mod:`._journal`): marked
  started and checkpointed before its tool is entered (:meth:`starting`), its result
  journaled and checkpointed when it returns, before its end event goes out (the
  event is held back until then) and before the batch writes it to the context;
* a side-effect call cut while it ran is answered with :data:`CUT_TEXT`, not as a
  tool that merely did not finish: its effect may have happened in part.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Protocol

from ..event import AgentEvent, ToolResultEndEvent
from ..message import ToolResultBlock, ToolUseBlock
from ..tool._run import Emit
from ..tool.toolkit import Toolkit
from ._journal import batch_message, forget, mark_finished, mark_started
from ._steps import CallScope

__all__ = ["CUT_TEXT", "BatchFlags"]

CUT_TEXT = ("Interrupted while it ran. The tool has side effects: it may have taken "
            "effect, in full or in part. Check before calling it again.")
"""The result of a side-effect call an interrupt cancelled while it ran."""


class Batch(Protocol):
    """What the flags use of their batch (``agent/_batch.py``)."""

    scope: CallScope
    calls: tuple[ToolUseBlock, ...]
    reply_id: str

    def starting(self, call: ToolUseBlock) -> bool | Awaitable[bool]: ...

    def record(self, call_id: str, block: ToolResultBlock) -> None: ...

    async def save(self) -> bool: ...


class BatchFlags:
    """The per-call flags of one batch and what its calls are doing."""

    __slots__ = ("batch", "finish", "journal", "running", "saving", "side", "started",
                 "tasks")

    def __init__(self, batch: Batch, side: set[str], finish: set[str]) -> None:
        self.batch = batch
        self.side = side  # ids of the calls of side-effect tools
        self.finish = finish  # ids of the calls an interrupt lets finish
        # A durable session journals side effects (a memory session has nothing to
        # recover after a crash).
        self.journal = bool(side) and batch.scope.checkpoint is not None
        self.running: set[str] = set()  # entered their tool, no result yet
        self.started: set[str] = set()  # side-effect calls that entered their tool
        self.saving: set[str] = set()  # a journal (or arguments) save in flight
        self.tasks: dict[str, asyncio.Task[ToolResultBlock]] = {}

    @staticmethod
    def of(batch: Batch, calls: tuple[ToolUseBlock, ...], toolkit: Toolkit
           ) -> BatchFlags | None:
        """The batch's flags, or ``None`` when every tool keeps the defaults."""
        side: set[str] | None = None
        finish: set[str] | None = None
        for call in calls:
            tool = toolkit.get(call.name)
            if tool is None:
                continue
            if tool.side_effect:
                side = side or set()
                side.add(call.id)
            if tool.interrupt == "finish":
                finish = finish or set()
                finish.add(call.id)
        if side is None and finish is None:
            return None
        return BatchFlags(batch, side or set(), finish or set())

    # -- starting ------------------------------------------------------------------------

    def starting(self, call: ToolUseBlock, due: bool) -> bool | Awaitable[bool]:
        """``Batch.starting`` for a flagged batch: ``due`` says the call's edited
        arguments must be saved first; a journaled call's start mark is too."""
        if self.journal and call.id in self.side:
            scope = self.batch.scope
            if scope.state is not None and not scope.sealed and mark_started(scope.state, call):
                due = True
        if not due:
            self._entered(call.id)
            return True
        return self._save_then_enter(call.id)

    async def _save_then_enter(self, call_id: str) -> bool:
        self.saving.add(call_id)
        try:
            go = await self.batch.save()
        finally:
            self.saving.discard(call_id)
        if go:
            self._entered(call_id)
        return go

    def _entered(self, call_id: str) -> None:
        self.running.add(call_id)
        if call_id in self.side:
            self.started.add(call_id)

    # -- running -------------------------------------------------------------------------

    async def run(self, call: ToolUseBlock, emit: Emit) -> ToolResultBlock | None:
        """Run one call in a task of its own; its result, or ``None`` when an
        interrupt cancelled it while a ``"finish"`` call went on."""
        batch = self.batch
        scope = batch.scope
        journaled = self.journal and call.id in self.side
        held = _HeldEnd(emit, call.id) if journaled else None
        out = held.emit if held is not None else emit

        async def execute() -> ToolResultBlock:
            return await scope.execute_tool(scope.toolkit, call, scope.tool_ctx, out,
                                            scope.source, batch.reply_id,
                                            scope.config.tool_timeout, scope, batch.starting)

        assert scope.loop is not None
        task = scope.loop.create_task(execute())
        self.tasks[call.id] = task
        try:
            block = await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                raise  # the batch itself is cancelled (its task cancelled ``task`` too)
            return None  # cancelled by an interrupt (hold): no result
        finally:
            self.tasks.pop(call.id, None)
            self.running.discard(call.id)
        if held is not None:
            if call.id in self.started:
                # Kept by the batch at once: an interrupt during the save still
                # publishes the real result.
                batch.record(call.id, block)
                state = scope.state
                if state is not None and not scope.sealed and mark_finished(state, block):
                    self.saving.add(call.id)
                    try:
                        await batch.save()
                    finally:
                        self.saving.discard(call.id)
            held.release()
        return block

    # -- an interrupt ----------------------------------------------------------------------

    def hold(self) -> bool:
        """An interrupt arrived: whether the batch must go on (a ``"finish"`` call
        runs, or a journal save is in flight). If so, the running ``"cancel"`` calls
        are cancelled here; the batch then ends by itself and the driver closes it."""
        saving = self.saving
        if not saving and not (self.running & self.finish):
            return False
        for call_id in list(self.running):
            if call_id not in self.finish and call_id not in saving:
                task = self.tasks.get(call_id)
                if task is not None:
                    task.cancel()
        return True

    def cut_text(self, call_id: str) -> str | None:
        """The result of a call left without one when the batch closes, if not the
        usual: a side-effect call that was running may have taken effect."""
        return CUT_TEXT if call_id in self.started else None

    def published(self) -> None:
        """The batch wrote its results to the context: its journal has served."""
        scope = self.batch.scope
        state = scope.state
        if not self.journal or state is None or not self.batch.calls:
            return
        msg = batch_message(state, self.batch.calls[0].id)
        if msg is not None:
            forget(msg)


class _HeldEnd:
    """A journaled call's emit: its result's end event waits until the result is
    saved (what the caller sees as finished is in the session)."""

    __slots__ = ("call_id", "events", "out")

    def __init__(self, out: Emit, call_id: str) -> None:
        self.out = out
        self.call_id = call_id
        self.events: list[AgentEvent] | None = None

    def emit(self, event: AgentEvent) -> None:
        events = self.events
        if events is not None:
            events.append(event)
        elif type(event) is ToolResultEndEvent and event.tool_call_id == self.call_id:
            self.events = [event]
        else:
            self.out(event)

    def release(self) -> None:
        events, self.events = self.events, None
        for event in events or ():
            self.out(event)
