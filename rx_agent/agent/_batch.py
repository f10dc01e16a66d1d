"""One ``on_acting`` step's batch: running its calls, the one result each keeps, and
how an interrupt stops them.

A :class:`Batch` is the acting round's step: the driver runs it like any other, and
while it runs it is the scope's step (``CallScope.step``), which is how the core of
``on_acting`` finds it.

The core of ``on_acting`` (:class:`BatchCore`) runs the calls it is handed as a
:class:`BatchRun` that the batch owns, not the subscription: a hook that stops
listening (``take``, ``first``, a filter that ends the stream) does not cancel the
tools; the run goes on and its events reach the caller directly. Only
``interrupt()`` and disposing the call cancel it (:meth:`Batch.close`). A
:class:`~rx_agent.tool._ledger.Ledger` keeps what the caller got of each result:
with a layer at ``on_acting`` what leaves the outermost hook decides; without one the
tools' events go to the caller through it directly. Results enter the context in call
order when the step ends, and a call whose arguments a hook changed is stored with
them before its tool starts.

How an interrupt stops tools. ``agent.interrupt()`` (any thread) sets the call's
flag and, at the loop's next turn, cuts the running step's stream
(``CallScope.request_interrupt``); from then on:

* no tool starts: the flag is read right before a tool's function is entered
  (:meth:`Batch.starting`, which ``tool/_run.py`` calls after the arguments
  validated), before each call of a sequential batch and before a concurrent batch's
  tasks begin (:meth:`Batch.execute`);
* what runs is cancelled and what finished is kept: the driver hands the cut step
  :meth:`Batch.cut`, which closes the batch (:meth:`Batch.close`): the runs'
  tasks are cancelled, a late result is dropped, and each call's one result is
  written in call order, ``INTERRUPTED`` for those without one;
* the reply ends: the driver's ``close`` step (``CallScope.close_interrupted``)
  answers any call still open and stores the final ``INTERRUPTED`` message.

A tool declared ``interrupt="finish"`` is the exception (:mod:`._batch_flags`): while
one runs, the cut is not made (:meth:`Batch.finishing`); the running ``"cancel"``
calls are cancelled, the batch ends when the finishing calls return, with their real
results, and the driver then closes the reply as above.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc

from .._rx import DirectObservable, from_coroutine, on_loop
from ..event import AgentEvent, AllToolsDeniedEvent
from ..message import Role, ToolResultBlock, ToolResultState, ToolUseBlock
from ..middleware.base import ExtensionPoint
from ..middleware.inputs import ActingInput
from ..middleware.types import Handler
from ..tool._ledger import DONE, Ledger
from ._batch_flags import BatchFlags
from ._results import denied_result, emit_result_events, record_result
from ._step import Continue, Outcome, Step, count
from ._steps import INTERRUPTED_TEXT, CallScope, Interrupted

__all__ = ["NOT_RUN_TEXT", "Batch", "BatchCore"]

_thread_id = threading.get_ident

NOT_RUN_TEXT = "Not executed: the on_acting chain did not run this tool call."


class Batch(Step):
    """The tool calls of one ``on_acting`` step: what ran and what each got."""

    __slots__ = ("calls", "chain", "closed", "denied", "flags", "given", "hooked", "ledger",
                 "lock", "models", "reply_id", "runs", "scope", "stored", "then", "who")
    name = "batch"

    def __init__(self, scope: CallScope, calls: tuple[ToolUseBlock, ...], reply_id: str,
                 denied: dict[str, str], who: Callable[[], str],
                 chain: Handler[ActingInput] | None, then: Continue) -> None:
        self.scope = scope
        self.chain = chain  # the on_acting chain, None without a layer there
        self.who = who
        self.then = then  # what follows the batch
        self.calls = calls  # the model's calls of this step, in call order
        self.given = calls  # what the chain was handed (a core given it needs no check)
        self.stored: dict[str, ToolUseBlock] | None = None  # calls a hook changed, as stored
        self.reply_id = reply_id
        self.denied = denied  # call id -> the user's reason
        # With a layer at on_acting what leaves it decides; without one, the tools' own
        # events reach the caller through the ledger.
        self.hooked = chain is not None
        self.ledger = Ledger(calls, scope.emit, scope.source, reply_id, who)
        self.models = self.ledger.entries  # each call id -> its entry (the model's call)
        self.runs: list[BatchRun] = []
        self.closed = False
        self.lock: asyncio.Lock | None = None  # one checkpoint at a time
        # Side effects and interrupt modes declared by the tools (_batch_flags.py);
        # None when every tool keeps the defaults.
        self.flags = BatchFlags.of(self, calls, scope.toolkit)

    # -- the step ----------------------------------------------------------------------

    async def run(self, loop: Any) -> Outcome:
        """Run the calls through ``on_acting`` (then wait for runs a hook stopped
        listening to); every call's result is in the context once it ends."""
        scope = self.scope
        chain = self.chain
        try:
            ain = ActingInput(self.calls)
            self.given = ain.tool_calls
            await scope.run_step(chain(ain) if chain is not None else
                                 BatchCore(self, ain, self.who), ExtensionPoint.ON_ACTING,
                                 ledger=self.ledger if chain is not None else None)
            if self.unsettled():  # the chain stopped listening to tools that still run
                await scope.run_step(self.drain(), None)
        except Interrupted:
            raise  # the driver closes the reply (and this batch: cut)
        except BaseException:
            # Failed or disposed: keep what finished, in call order.
            self.close(ToolResultState.INTERRUPTED, "Cancelled before it finished.")
            raise
        if not scope.interrupted:  # else cut: the rest is answered as interrupted
            self.close()  # calls the chain neither ran nor answered: "not executed"
        return self.then

    def cut(self, loop: Any) -> None:
        self.close(ToolResultState.INTERRUPTED, INTERRUPTED_TEXT)  # finished results stay

    def finishing(self) -> bool:
        flags = self.flags
        return flags is not None and flags.hold()

    def describe(self, loop: Any) -> str:
        return f"{count(len(self.calls), 'call')}: {', '.join(c.name for c in self.calls)}"

    # -- the core's input ------------------------------------------------------------

    def check(self, calls: tuple[ToolUseBlock, ...]) -> str | None:
        """What is wrong with the calls a hook handed ``next``, if anything."""
        models = self.models
        seen: set[str] = set()
        for call in calls:
            if not isinstance(call, ToolUseBlock):
                return f"passed next() {type(call).__name__} {call!r:.60}, not a ToolUseBlock"
            entry = models.get(call.id)
            if entry is None:
                ids = ", ".join(models)
                return (f"passed next() a tool call with id {call.id!r}, which the model did "
                        f"not make in this batch ({ids}): its result could not be matched to "
                        "the model's call")
            if call.name != entry.call.name:
                return (f"renamed tool call {call.id!r} from {entry.call.name!r} to "
                        f"{call.name!r}: its result could not be matched to the model's call "
                        "(change a call's arguments, or answer it without next)")
            if call.id in seen:
                return f"passed tool call {call.id!r} to next() twice"
            seen.add(call.id)
        return None

    def starting(self, call: ToolUseBlock) -> bool | Awaitable[bool]:
        """Right before a tool's function is entered: whether it may start (not after
        an interrupt), with the arguments it runs with stored first."""
        scope = self.scope
        if scope.interrupted or self.closed:
            return False
        flags = self.flags
        if flags is not None:
            return flags.starting(call, self._edited(call) and scope.checkpoint is not None)
        if not self._edited(call) or scope.checkpoint is None:
            return True
        return self.save()

    def _edited(self, call: ToolUseBlock) -> bool:
        """Whether a hook changed the call's arguments since they were stored (they
        are stored now)."""
        changed = self.stored
        if changed is not None and call.id in changed:
            stored: ToolUseBlock | None = changed[call.id]
        else:
            entry = self.models.get(call.id)
            stored = entry.call if entry is not None else None
        if stored is None or call is stored or (
                call.input == stored.input and call.raw_input == stored.raw_input):
            return False
        if changed is None:
            changed = self.stored = {}
        changed[call.id] = call
        self._store(call)
        return True

    def _store(self, call: ToolUseBlock) -> None:
        state = self.scope.state
        if state is None or self.scope.sealed:
            return
        for msg in reversed(state.context):
            if msg.role is not Role.ASSISTANT or not msg.tool_calls:
                continue
            # The batch's calls are in the latest message that made calls (models reuse
            # ids such as call_1 across turns: an older one is never edited).
            for i, block in enumerate(msg.content):
                if isinstance(block, ToolUseBlock) and block.id == call.id:
                    msg.content[i] = block.model_copy(
                        update={"input": dict(call.input), "raw_input": call.raw_input})
            return

    async def save(self) -> bool:
        """Checkpoint mid-batch (one at a time); whether the batch may go on (not
        interrupted meanwhile). A durable session holds the arguments that run, and
        the journal of side-effect calls, before the tool starts."""
        lock = self.lock
        if lock is None:
            lock = self.lock = asyncio.Lock()
        async with lock:
            checkpoint = self.scope.checkpoint
            if checkpoint is not None:
                await checkpoint()
        return not (self.scope.interrupted or self.closed)

    # -- running -----------------------------------------------------------------------

    def answered(self, call_id: str) -> bool:
        return self.ledger.answered(call_id)

    def record(self, call_id: str, block: ToolResultBlock) -> None:
        if not self.closed:  # a cancelled tool finishing late is not kept
            self.ledger.entries[call_id].result = block

    def _done(self, call_id: str) -> bool:
        entry = self.ledger.entries[call_id]
        return entry.result is not None or entry.phase == DONE

    async def execute(self, run: BatchRun) -> None:
        """Run ``run``'s calls in call order, or concurrently when every tool is
        concurrency-safe; a call the chain answered already is not run."""
        scope = self.scope
        calls = run.calls
        denied = self.denied
        emit = run.emit
        reply_id = self.reply_id
        if denied and all(c.id in denied for c in calls):
            for call in calls:
                block = denied_result(call, denied[call.id])
                emit_result_events(emit, scope.source, reply_id, block)
                self.record(call.id, block)
            emit(AllToolsDeniedEvent.make(scope.source, denied_tool_calls=list(calls)))
            return
        toolkit = scope.toolkit
        if len(calls) > 1 and not denied and all(
            (t := toolkit.get(c.name)) is not None and t.concurrency_safe for c in calls
        ):
            if not scope.interrupted:
                await self._concurrently(run)
            return
        timeout = scope.config.tool_timeout
        flags = self.flags
        for call in calls:
            if scope.interrupted or self.closed:  # the rest never start
                break
            if self.answered(call.id):
                continue
            if call.id in denied:
                block = denied_result(call, denied[call.id])
                emit_result_events(emit, scope.source, reply_id, block)
            elif flags is not None:
                flagged = await flags.run(call, emit)
                if flagged is None:
                    continue  # cancelled by an interrupt: closing answers it
                block = flagged
            else:
                block = await scope.execute_tool(toolkit, call, scope.tool_ctx, emit,
                                                 scope.source, reply_id, timeout, scope,
                                                 self.starting)
            self.record(call.id, block)

    async def _concurrently(self, run: BatchRun) -> None:
        scope = self.scope
        toolkit = scope.toolkit
        timeout = scope.config.tool_timeout
        flags = self.flags

        async def one(call: ToolUseBlock) -> None:
            # A task begun after interrupt() returned never enters its tool.
            if scope.interrupted or self.closed or self.answered(call.id):
                return
            if flags is not None:
                flagged = await flags.run(call, run.emit)
                if flagged is not None:
                    self.record(call.id, flagged)
                return
            block = await scope.execute_tool(toolkit, call, scope.tool_ctx, run.emit,
                                             scope.source, self.reply_id, timeout, scope,
                                             self.starting)
            self.record(call.id, block)

        assert scope.loop is not None
        tasks = [scope.loop.create_task(one(c)) for c in run.calls]
        ledger = self.ledger
        if self.hooked:  # a call the chain answers itself is not waited for
            for call, task in zip(run.calls, tasks, strict=True):
                ledger.entries[call.id].stop = _canceller(task)
        try:
            await asyncio.wait(tasks)
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
        for task in tasks:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    def unsettled(self) -> bool:
        """Whether runs the chain stopped listening to still work for a call nobody
        answered (those whose calls are all answered are cancelled), or failed."""
        busy = False
        for run in self.runs:
            task = run.task
            if run.error is not None:
                busy = True
            elif task is None or task.done():
                continue
            elif all(self.answered(c.id) or self._done(c.id) for c in run.calls):
                task.cancel()
            else:
                busy = True
        return busy

    def drain(self) -> Observable[AgentEvent]:
        """A step that waits for the runs still going (their events reach the caller
        directly), failing with a run's error."""
        async def body(observer: rxabc.ObserverBase[AgentEvent]) -> None:
            while True:
                tasks = [r.task for r in self.runs if r.task is not None and not r.task.done()]
                if not tasks:
                    break
                await asyncio.wait(tasks)
            for run in self.runs:
                if run.error is not None:
                    raise run.error

        return from_coroutine(body, self.scope.loop)

    # -- the end -----------------------------------------------------------------------

    def close(self, missing_state: ToolResultState | None = None, missing_text: str = "") -> None:
        """Cancel what still runs and write every call's result into the context in
        call order (once); the caller gets what it lacks of each. A call with no
        result gets ``missing_text`` (the "not executed" ERROR by default)."""
        if self.closed:
            return
        self.closed = True
        for run in self.runs:
            task = run.task
            if task is not None and not task.done():
                task.cancel()
        self.runs = []  # each run refers to the batch: no cycle left behind
        scope = self.scope
        state = scope.state
        if state is None or scope.sealed:
            return  # the call already closed its context (it answered what was missing)
        if missing_state is None:
            missing_state, missing_text = ToolResultState.ERROR, NOT_RUN_TEXT
        ledger = self.ledger
        entries = ledger.entries
        flags = self.flags
        if flags is None:
            for call in self.calls:
                record_result(state, ledger.settle(entries[call.id], missing_state,
                                                   missing_text))
            return
        for call in self.calls:
            text = (flags.cut_text(call.id) if missing_state is ToolResultState.INTERRUPTED
                    and entries[call.id].result is None else None)
            record_result(state, ledger.settle(entries[call.id], missing_state,
                                               text or missing_text))
        flags.published()


class BatchRun(rxabc.DisposableBase):
    """One subscription of the core: its calls run in a task the batch owns.
    Disposing it only stops the events reaching the chain."""

    __slots__ = ("batch", "calls", "error", "observer", "task")

    def __init__(self, batch: Batch, calls: tuple[ToolUseBlock, ...],
                 observer: rxabc.ObserverBase[AgentEvent]) -> None:
        self.batch = batch
        self.calls = calls
        self.observer: rxabc.ObserverBase[AgentEvent] | None = observer
        self.task: asyncio.Task[None] | None = None
        self.error: BaseException | None = None

    def dispose(self) -> None:
        self.observer = None  # the chain stopped listening: the run goes on

    def emit(self, event: AgentEvent) -> None:
        batch = self.batch
        if batch.closed:
            return
        ledger = batch.ledger
        if batch.scope.interrupted:  # closing delivers the rest
            ledger.core(event)
        elif not batch.hooked:
            ledger.direct(event)
        else:
            ledger.core(event)
            observer = self.observer
            if observer is not None:
                observer.on_next(event)
            else:  # the chain stopped listening
                ledger.drained(event)

    async def body(self) -> None:
        try:
            await self.batch.execute(self)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error = exc
        except BaseException as exc:
            # SystemExit / KeyboardInterrupt must not stop the shared loop.
            self.error = RuntimeError(f"the step failed with {exc!r}")
        observer, self.observer = self.observer, None
        if observer is not None:
            if self.error is not None:
                error, self.error = self.error, None  # the chain has it
                observer.on_error(error)  # type: ignore[arg-type]
            else:
                observer.on_completed()


class BatchCore(DirectObservable[AgentEvent]):
    """One subscription of ``on_acting``'s core: the calls it is handed, run as a
    :class:`BatchRun` of the step's batch."""

    def __init__(self, batch: Batch | None, ain: ActingInput,
                 who: Callable[[], str]) -> None:
        self._subscribe = None
        self.batch = batch
        self.ain = ain
        self.who = who

    def direct(self, observer: rxabc.ObserverBase[AgentEvent],
               scheduler: rxabc.SchedulerBase | None = None) -> rxabc.DisposableBase:
        batch = self.batch
        if batch is None or batch.closed:
            observer.on_error(RuntimeError(f"{self.who()}: next() was subscribed after its "
                                           "acting step ended"))
            return _Nothing()
        where = batch.scope.affinity
        assert where is not None
        if _thread_id() != where.thread:  # next() subscribed on another thread
            return on_loop(where, self.direct)(observer, scheduler)
        calls = self.ain.tool_calls
        if calls is not batch.given:
            problem = batch.check(calls)
            if problem is not None:
                observer.on_error(ValueError(f"{self.who()} {problem}"))
                return _Nothing()
        run = BatchRun(batch, calls, observer)
        batch.runs.append(run)
        run.task = where.loop.create_task(run.body())
        return run


def _canceller(task: asyncio.Task[None]) -> Callable[[], None]:
    def cancel() -> None:
        task.cancel()

    return cancel


class _Nothing(rxabc.DisposableBase):
    def dispose(self) -> None:
        pass
