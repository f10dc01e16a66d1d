"""Tool middleware: an onion around one tool's execution, wherever the tool runs.

``@tool(middlewares=[...])`` or ``tool.with_middleware(mw)`` attaches them to the tool
itself (AgentScope Python's tool middleware, the Blade SDK's ``ToolMiddleware``): they
run inside any agent (below its ``on_acting`` chain), as a sub-agent's tool, and when
the tool is called directly (``await tool.execute(...)``). A middleware is called
``mw(tool, ctx, call, next)`` and returns the call's events; ``next(call)`` runs the
next one inward, the tool itself innermost (``next()`` continues with the call it was
given).

The results follow ``on_acting``'s rule (see :mod:`._ledger`): what leaves the
outermost middleware is the call's one result. A middleware may answer without
``next`` (a cache), change the arguments, rewrite the result, or call ``next`` again
(holding back the attempt it replaces); one that stops listening does not cancel the
tool (its real result is kept) unless it answers the call itself (a timeout with a
fallback). A middleware that raises fails the call as a tool does (an ERROR result);
one that breaks the contract (renames the call, answers another one, answers twice)
fails the reply with :class:`ToolMiddlewareError`.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any, Protocol, TypeVar

import reactivex
from reactivex import Observable
from reactivex import abc as rxabc

from .._record import new_id
from .._rx import DirectObservable, affinity, on_loop, subscribe_observer
from ..context import RuntimeContext
from ..errors import RxAgentError
from ..event import AgentEvent
from ..message import ContentBlock, ToolResultBlock, ToolResultState, ToolUseBlock
from ._call import CallOwner, ToolCallHandle, bind, current_tool_call, unbind
from ._ledger import DONE, Ledger, result_events
from ._run import Emit, RunnableTool, Starting, run_direct, tool_error_text

__all__ = [
    "ToolMiddleware",
    "ToolMiddlewareError",
    "ToolNext",
    "answer",
    "check_middlewares",
    "execute_tool",
    "run_call",
    "with_middleware",
]

ToolNext = Callable[..., Observable[AgentEvent]]
"""``next(call=None)``: the events of the next middleware inward (the tool itself
innermost); with no argument, of the call this middleware was given."""


class ToolMiddleware(Protocol):
    """``(tool, ctx, call, next) -> Observable[AgentEvent]``: one layer around a tool."""

    def __call__(self, tool: Any, ctx: RuntimeContext | None, call: ToolUseBlock,
                 next: ToolNext, /) -> Observable[AgentEvent]: ...


class ToolMiddlewareError(RxAgentError, ValueError):
    """A tool middleware broke the contract: it renamed the call, answered a call it
    was not given, answered twice, or returned something that is not an Observable."""


class _Tool(RunnableTool, Protocol):
    middlewares: tuple[ToolMiddleware, ...]


_T = TypeVar("_T", bound=_Tool)


def label(mw: object) -> str:
    """How errors name a middleware: a function's name, else its class's."""
    target = getattr(mw, "func", mw)  # a functools.partial names its function
    if inspect.isfunction(target) or inspect.ismethod(target):
        return str(target.__qualname__).replace(".<locals>", "")
    return type(mw).__name__


def check_middlewares(tool_name: str, middlewares: Sequence[Any]) -> tuple[ToolMiddleware, ...]:
    """``middlewares`` as a tuple, each checked to be usable (a clear error if not)."""
    if isinstance(middlewares, (str, bytes)) or not isinstance(middlewares, Sequence):
        raise TypeError(f"tool {tool_name!r}: middlewares must be a list of callables "
                        f"(tool, ctx, call, next), got {type(middlewares).__name__}")
    for i, mw in enumerate(middlewares):
        if isinstance(mw, type):
            raise TypeError(f"tool {tool_name!r}: middleware #{i} is the class {mw.__name__}; "
                            "pass an instance")
        if not callable(mw):
            raise TypeError(f"tool {tool_name!r}: middleware #{i} ({type(mw).__name__}) is not "
                            "callable as (tool, ctx, call, next)")
    return tuple(middlewares)


def with_middleware(self: _T, middleware: ToolMiddleware) -> _T:
    """A copy of this tool with ``middleware`` added inside the ones it has (the first
    attached is the outermost, as with ``@tool(middlewares=[...])``); the tool itself
    is unchanged."""
    (checked,) = check_middlewares(self.name, [middleware])
    made = copy.copy(self)
    made.middlewares = (*self.middlewares, checked)
    return made


async def execute_tool(
    self: _Tool,
    arguments: Mapping[str, Any] | ToolUseBlock | None = None,
    ctx: RuntimeContext | None = None,
    *,
    emit: Callable[[AgentEvent], None] | None = None,
    timeout: float | None = None,
) -> ToolResultBlock:
    """Run this tool once, outside any agent, through its middlewares.

    ``arguments`` are the tool's arguments (or a whole ``ToolUseBlock``); ``ctx`` is
    what a ``RuntimeContext`` parameter (and every middleware) gets; ``emit`` is
    given the call's events as they happen; ``timeout`` applies unless the tool has
    its own. Returns the result; failures are ERROR results, as in an agent."""
    if isinstance(arguments, ToolUseBlock):
        call = arguments
        if call.name != self.name:
            raise ValueError(f"tool {self.name!r} cannot run a call to {call.name!r}")
    elif arguments is None or isinstance(arguments, Mapping):
        call = ToolUseBlock(id=f"call_{new_id()}", name=self.name,
                            input=dict(arguments or {}))
    else:
        raise TypeError(f"{self.name}.execute() takes the arguments as a dict (or a "
                        f"ToolUseBlock), got {type(arguments).__name__}")
    return await run_call(self, call, ctx, emit or _nowhere, None, new_id(), timeout)


def answer(
    call: ToolUseBlock,
    output: str | list[ContentBlock] | ToolResultBlock,
    state: ToolResultState = ToolResultState.SUCCESS,
    *,
    reply_id: str | None = None,
) -> Observable[AgentEvent]:
    """The events of a result for ``call`` that no tool ran (a cache hit, a refusal):
    what a middleware returns to answer a call itself."""
    if not isinstance(call, ToolUseBlock):
        raise TypeError(f"answer() takes the ToolUseBlock it answers, got {type(call).__name__}")
    if isinstance(output, ToolResultBlock):
        block = output.model_copy(update={"id": call.id, "name": call.name})
    else:
        block = ToolResultBlock(id=call.id, name=call.name, output=output, state=state)
    handle = current_tool_call()
    ours = handle is not None and handle.id == call.id
    rid = reply_id or (handle.reply_id if ours and handle is not None else new_id())
    source = handle.source if ours and handle is not None else None
    return reactivex.from_iterable(result_events(block, source, rid))


async def run_call(
    tool: _Tool,
    call: ToolUseBlock,
    ctx: RuntimeContext | None,
    emit: Emit,
    source: str | None,
    reply_id: str,
    timeout: float | None = None,
    owner: CallOwner | None = None,
    executor: Executor | None = None,
    starting: Starting | None = None,
) -> ToolResultBlock:
    """Run ``call`` through ``tool``'s middlewares (the tool alone when it has none),
    emitting exactly one result's events; return that result."""
    if not tool.middlewares:
        return await run_direct(tool, call, ctx, emit, source, reply_id, timeout, owner,
                                executor, starting)
    return await _Chain(tool, call, ctx, emit, source, reply_id, timeout, owner, executor,
                        starting).run()


def _nowhere(event: AgentEvent) -> None:
    pass


class _Next:
    """The ``next`` a middleware gets: checks the call it is handed."""

    __slots__ = ("at", "chain", "given")

    def __init__(self, chain: _Chain, at: int, given: ToolUseBlock) -> None:
        self.chain = chain
        self.at = at  # the layer it enters
        self.given = given  # the call the calling middleware was given

    def __call__(self, call: Any = None) -> Observable[AgentEvent]:
        chain = self.chain
        original = chain.call
        if call is None:
            call = self.given
        elif not isinstance(call, ToolUseBlock):
            return chain.refuse(self.at - 1, f"passed next() {type(call).__name__} "
                                f"{call!r:.60}, not a ToolUseBlock")
        elif call.id != original.id or call.name != original.name:
            return chain.refuse(self.at - 1, (
                f"passed next() a call {call.id!r} to {call.name!r} while running call "
                f"{original.id!r} to {original.name!r}: a tool middleware may change the "
                "arguments, not the call's id or tool (the result could not be matched to "
                "the model's call)"))
        return chain.enter(self.at, call)

    apply = __call__  # Java's next.apply(input)


class _Chain:
    """One call of a tool through its middlewares."""

    __slots__ = ("call", "closed", "ctx", "done", "emit", "executor", "labels", "ledger",
                 "loop", "owner", "reply_id", "runs", "source", "starting", "thread",
                 "timeout", "tool")

    def __init__(self, tool: _Tool, call: ToolUseBlock, ctx: RuntimeContext | None,
                 emit: Emit, source: str | None, reply_id: str, timeout: float | None,
                 owner: CallOwner | None, executor: Executor | None,
                 starting: Starting | None) -> None:
        self.tool = tool
        self.call = call
        self.ctx = ctx
        self.emit = emit
        self.source = source
        self.reply_id = reply_id
        self.timeout = timeout
        self.owner = owner
        self.executor = executor
        self.starting = starting
        self.labels = [label(mw) for mw in tool.middlewares]
        who = self.who()  # a string, not a bound method: the ledger must not refer back
        self.ledger = Ledger((call,), emit, source, reply_id, lambda: who, ToolMiddlewareError)
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.done: asyncio.Future[BaseException | None] = self.loop.create_future()
        self.runs: list[_CoreRun] = []
        self.closed = False

    def who(self) -> str:
        return f"the middlewares of tool {self.tool.name!r} ({', '.join(self.labels)})"

    def refuse(self, at: int, why: str) -> Observable[AgentEvent]:
        return reactivex.throw(ToolMiddlewareError(
            f"tool {self.tool.name!r}: middleware {self.labels[at]} {why}"))

    def enter(self, at: int, call: ToolUseBlock) -> Observable[AgentEvent]:
        """The events of layer ``at`` for ``call`` (past the last: the tool)."""
        middlewares = self.tool.middlewares
        if at == len(middlewares):
            return _Core(self, call)
        try:
            out = middlewares[at](self.tool, self.ctx, call, _Next(self, at + 1, call))
        except Exception as exc:
            return reactivex.throw(exc)
        if not isinstance(out, Observable):
            return self.refuse(at, f"returned {type(out).__name__}, expected an Observable "
                                   "(did it forget to `return next(call)`?)")
        return out

    async def run(self) -> ToolResultBlock:
        call = self.call
        entry = self.ledger.entries[call.id]
        # current_tool_call() answers inside the middlewares too (answer() reads it).
        token = bind(ToolCallHandle(self.emit, self.source, self.reply_id, call.id, call.name,
                                    self.owner))
        try:
            subscription = subscribe_observer(self.enter(0, call), _Sink(self))
        finally:
            unbind(token)
        try:
            failure = await self.done
            if failure is None:
                while True:  # runs the middlewares stopped listening to finish here
                    tasks = [r.task for r in self.runs if r.task is not None and not r.task.done()]
                    if not tasks:
                        break
                    await asyncio.wait(tasks)
            for run in self.runs:
                if run.error is not None:
                    raise run.error
        except BaseException:
            self.close()
            raise
        finally:
            subscription.dispose()
        self.close()
        missing = f"Not executed: no middleware of tool {self.tool.name!r} ran or answered it."
        if failure is not None:
            if isinstance(failure, ToolMiddlewareError):
                raise failure
            if entry.phase != DONE:
                entry.result = None  # the middleware failed: so did the call
            missing = tool_error_text(self.tool.name, failure)
        return self.ledger.settle(entry, ToolResultState.ERROR, missing)

    def close(self) -> None:
        self.closed = True
        for run in self.runs:
            task = run.task
            if task is not None and not task.done():
                task.cancel()
        self.runs = []  # each run refers to the chain: no cycle left behind
        self.ledger.entries[self.call.id].stop = None


class _Sink:
    """Observes what leaves the outermost middleware (on the loop's thread)."""

    __slots__ = ("chain",)

    def __init__(self, chain: _Chain) -> None:
        self.chain = chain

    def _hop(self, fn: Callable[..., None], *args: Any) -> bool:
        chain = self.chain
        if threading.get_ident() == chain.thread:
            return False
        if not chain.loop.is_closed():  # a middleware moved the stream (a timer thread)
            chain.loop.call_soon_threadsafe(fn, *args)
        return True

    def on_next(self, event: AgentEvent) -> None:
        if self._hop(self.on_next, event):
            return
        chain = self.chain
        if chain.done.done():
            return
        if not isinstance(event, AgentEvent):
            chain.done.set_result(ToolMiddlewareError(
                f"{chain.who()} emitted {type(event).__name__} {event!r:.60}, not an "
                "AgentEvent"))
            return
        error = chain.ledger.out(event)
        if error is not None:
            chain.done.set_result(error)

    def on_error(self, error: Exception) -> None:
        if not self._hop(self.on_error, error) and not self.chain.done.done():
            self.chain.done.set_result(error)

    def on_completed(self) -> None:
        if not self._hop(self.on_completed) and not self.chain.done.done():
            self.chain.done.set_result(None)


class _Core(DirectObservable[AgentEvent]):
    """The innermost ``next``: the tool itself, run in a task the chain owns (a
    middleware that stops listening does not cancel it)."""

    def __init__(self, chain: _Chain, call: ToolUseBlock) -> None:
        self._subscribe = None
        self.chain = chain
        self.call = call

    def direct(self, observer: rxabc.ObserverBase[AgentEvent],
               scheduler: rxabc.SchedulerBase | None = None) -> rxabc.DisposableBase:
        chain = self.chain
        if threading.get_ident() != chain.thread:  # next() subscribed on another thread
            return on_loop(affinity(chain.loop), self.direct)(observer, scheduler)
        if chain.closed:
            observer.on_error(RuntimeError(f"tool {chain.tool.name!r}: next() was "
                                           "subscribed after the call ended"))
            return _Detached()
        run = _CoreRun(chain, observer)
        chain.runs.append(run)
        run.task = chain.loop.create_task(run.body(self.call))
        chain.ledger.entries[chain.call.id].stop = run.cancel
        return run


class _Detached(rxabc.DisposableBase):
    def dispose(self) -> None:
        pass


class _CoreRun(rxabc.DisposableBase):
    """One subscription of the tool: disposing it only stops the events reaching the
    middleware; the tool goes on, its events straight to the ledger."""

    __slots__ = ("chain", "error", "observer", "task")

    def __init__(self, chain: _Chain, observer: rxabc.ObserverBase[AgentEvent]) -> None:
        self.chain = chain
        self.observer: rxabc.ObserverBase[AgentEvent] | None = observer
        self.task: asyncio.Task[None] | None = None
        self.error: BaseException | None = None

    def dispose(self) -> None:
        self.observer = None

    def cancel(self) -> None:
        task = self.task
        if task is not None and not task.done():
            task.cancel()

    def emit(self, event: AgentEvent) -> None:
        chain = self.chain
        if chain.closed:
            return
        ledger = chain.ledger
        ledger.core(event)
        observer = self.observer
        if observer is not None:
            observer.on_next(event)
        else:
            ledger.drained(event)

    async def body(self, call: ToolUseBlock) -> None:
        chain = self.chain
        try:
            block = await run_direct(chain.tool, call, chain.ctx, self.emit, chain.source,
                                     chain.reply_id, chain.timeout, chain.owner,
                                     chain.executor, chain.starting)
        except asyncio.CancelledError:
            observer, self.observer = self.observer, None
            if observer is not None and not chain.closed:
                observer.on_completed()  # answered by a middleware: the tool's part ends
            raise
        except Exception as exc:  # an error of the agent's check before the tool starts
            self.error = exc  # it fails the call, whatever the middlewares make of it
            observer, self.observer = self.observer, None
            if observer is not None:
                observer.on_error(exc)
            return
        if not chain.closed:
            chain.ledger.entries[chain.call.id].result = block
        observer, self.observer = self.observer, None
        if observer is not None:
            observer.on_completed()
