"""One call per request: the agent's events as Server-Sent Events, or the final
``Msg`` as JSON; a client that goes away disposes the call.

The first event is awaited before any answer is sent, so a call that fails at once
(a busy session, a rejected resume, a model that is down) gets a proper 4xx/5xx JSON
answer. After that, an ASGI callable streams the rest while it listens for the
client's disconnect: when it comes, the subscription is disposed at once (the
model stream is closed and running tools cancelled; the agent still saves the state
and frees the session), not at the next event the server fails to write.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive, Scope, Send

from .._rx import DONE, ERROR, NEXT, Inbox
from ..agent import ReActAgent
from ..context import RuntimeContext
from ..event import AgentEvent, AgentResultEvent, AgentStartEvent, ModelCallEndEvent
from ..session import RunJournal, SessionKey
from ..session._journal_writer import JournalWriter
from ._errors import HTTPError, from_exception
from ._guard import Hold, SessionGuard
from ._metrics import Metrics
from ._runs import RunLog, RunRecord

__all__ = ["KEEPALIVE", "RAW_SEND", "CallRunner"]

KEEPALIVE = 15.0
"""Seconds of silence after which the stream sends an SSE comment (proxies close idle
connections)."""

_NEXT, _ERROR, _DONE = NEXT, ERROR, DONE

RAW_SEND = "rx_agent.send"
"""The scope key of the server's own ``send``, when the app's middleware leaves answer
bodies alone (``_app.py``): a stream's frames go to it once the answer started through
the middleware (whose send wrappers only watch for the start), one coroutine per write
instead of five."""


class EventPump(Inbox[AgentEvent]):
    """The call's events in a buffer the response drains (Rx has no backpressure):
    an :class:`~rx_agent._rx.Inbox` of ``agent.stream(inp, ctx)`` on the running loop."""

    __slots__ = ()

    def __init__(self, agent: ReActAgent, inp: Any, ctx: RuntimeContext) -> None:
        super().__init__(agent.stream(inp, ctx))


@dataclass(eq=False)
class Call:
    """A started call: what its response needs to finish it."""

    runner: CallRunner
    pump: EventPump
    record: RunRecord
    hold: Hold | None
    kind: str
    started: float
    first: list[tuple[int, Any]]
    result: Any = None
    finished: bool = False
    ctx: RuntimeContext | None = None
    """The call's context (its ``agent_state`` is the live session state once bound)."""
    journal: JournalWriter | None = None
    """Where its events go for other workers (``_resume.py``), when the app keeps a journal."""
    detached: bool = False
    """Its client left and it runs on (``keep_running``): its end is not a disconnect."""

    def note(self, event: AgentEvent) -> tuple[int, str]:
        """Count and record one event; its number in the stream and its JSON."""
        kind = type(event)
        type_ = event.type
        # What model_dump_json() returns, without its keyword handling on every event.
        data: str = kind.__pydantic_serializer__.to_json(event).decode()
        seq = self.record.add(type_, data)  # the record counts them for /metrics
        if self.journal is not None:
            self.journal.add(seq, type_, data)
        if kind is ModelCallEndEvent and event.usage is not None:  # type: ignore[attr-defined]
            usage = event.usage  # type: ignore[attr-defined]
            self.runner.metrics.tokens(usage.input_tokens, usage.output_tokens)
            self.record.used(usage.input_tokens, usage.output_tokens)
        elif kind is AgentResultEvent:
            self.result = event.result  # type: ignore[attr-defined]
        return seq, data

    async def finish(self, outcome: str, error: str | None = None) -> None:
        if self.finished:
            return
        self.finished = True
        if outcome == "disconnected":  # what the client never got: a reconnect reads it
            while (signal := self.pump.ready()) is not None:
                if signal[0] == _NEXT:
                    self.note(signal[1])
        self.pump.dispose()  # a no-op after the stream ended; cancels it otherwise
        self.record.finish(outcome, error)
        runner = self.runner
        runner.metrics.call_ended(self.kind, outcome, time.monotonic() - self.started,
                                  self.record.count)
        if self.journal is None:
            await runner.guard.leave(self.hold)
            return
        # The journal complete before the session is free again; shielded, so a response
        # cancelled meanwhile (its client left) still frees the session.
        await asyncio.shield(self._settle(outcome, error))

    async def _settle(self, outcome: str, error: str | None) -> None:
        try:
            if self.journal is not None:
                await self.journal.close(outcome, error)
        finally:
            await self.runner.guard.leave(self.hold)


class CallRunner:
    def __init__(self, agent: ReActAgent, guard: SessionGuard, runs: RunLog,
                 metrics: Metrics, journal: RunJournal | None = None, *,
                 keep_running: bool = False) -> None:
        self.agent = agent
        self.guard = guard
        self.runs = runs
        self.metrics = metrics
        self.journal = journal
        # An agent whose calls journal their own events (one run on Temporal): the server
        # relays them and leaves the journal to it.
        self.journaled_by_agent = bool(getattr(agent, "journals_runs", False))
        self.keep_running = keep_running and journal is not None
        self._detached: set[asyncio.Task[None]] = set()

    def detach(self, call: Call) -> None:
        """Its client left: run the call to its end anyway, its events into the journal
        (a reconnect with ``Last-Event-ID`` streams them, on any worker)."""
        call.detached = True
        task = asyncio.get_running_loop().create_task(self._run_out(call))
        self._detached.add(task)  # held until it ends
        task.add_done_callback(self._detached.discard)

    async def _run_out(self, call: Call) -> None:
        try:
            while True:
                signal = await call.pump.next()
                assert signal is not None
                kind, value = signal
                if kind == _NEXT:
                    call.note(value)
                    continue
                if kind == _ERROR:
                    error = from_exception(value, call.record.key.session_id,
                                           call.record.run_id)  # logs it
                    self.metrics.error(error.code, error.status)
                    await call.finish("failed", type(value).__name__)
                else:
                    await call.finish("completed")
                return
        finally:
            await call.finish("disconnected")  # a no-op when it finished itself

    def context(self, key: SessionKey, user_id: str | None) -> RuntimeContext:
        return RuntimeContext(session_id=key.session_id, user_id=user_id)

    async def start(self, key: SessionKey, user_id: str | None, inp: Any, kind: str, *,
                    ctx: RuntimeContext | None = None) -> Call:
        """Start the call and wait for its first signal; raise the HTTP answer if the
        call fails before producing an event. ``ctx``: the call's context when the
        route puts attributes in it (made from ``key`` otherwise)."""
        started = time.monotonic()
        if ctx is None:
            ctx = self.context(key, user_id)
        agent = self.agent
        hold = await self.guard.enter(key, ctx.run_id, lambda: agent.interrupt(ctx))
        record = self.runs.start(ctx.run_id, key, kind)
        self.metrics.call_started()
        call: Call | None = None
        try:
            pump = EventPump(agent, inp, ctx)
            call = Call(self, pump, record, hold, kind, started, [], ctx=ctx,
                        journal=None if self.journal is None or self.journaled_by_agent
                        else self.journal.writer(key, ctx.run_id))
            # A call that fails early (a rejected resume, a busy lease, a model that is
            # down) fails right after its AgentStartEvent: wait for the signal after it.
            while True:
                signal = await pump.next()
                assert signal is not None
                call.first.append(signal)
                if signal[0] != _NEXT or type(signal[1]) is not AgentStartEvent:
                    break
        except BaseException as exc:
            if call is None:
                self.metrics.call_ended(kind, "failed", time.monotonic() - started, 0)
                record.finish("failed", type(exc).__name__)
                await self.guard.leave(hold)
            else:
                await call.finish("failed", type(exc).__name__)
            raise
        self.metrics.first_event(time.monotonic() - started)
        if call.first[-1][0] == _ERROR:
            failure = call.first[-1][1]
            await call.finish("failed", type(failure).__name__)
            error = from_exception(failure, key.session_id, ctx.run_id)
            error.headers.setdefault("X-Run-Id", ctx.run_id)  # what to look for in the log
            raise error
        pump.unread(call.first)  # the response streams them first
        return call


def _error_data(error: HTTPError) -> str:
    return json.dumps(error.payload())


class CallResponse:
    """The ASGI answer of a started call: an SSE stream or, with ``as_json``, the final
    message once the call ends."""

    def __init__(self, call: Call, *, as_json: bool) -> None:
        self.call = call
        self.as_json = as_json
        self.body_send: Send | None = None
        """Where the body goes once the answer started (see :data:`RAW_SEND`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        call = self.call
        self.body_send = scope.get(RAW_SEND, send)
        work = asyncio.ensure_future(self._json(send) if self.as_json else self._sse(send))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():  # the client left first: dispose the call now
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await work
                if call.runner.keep_running and not call.finished:
                    call.runner.detach(call)  # or let it run on, for a reconnect
                    return
                await call.finish("disconnected")
                return
            with contextlib.suppress(OSError):
                await work
        finally:
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gone
            if not call.detached:
                await call.finish("disconnected")  # a no-op when the call finished itself

    async def _wait(self, send: Send) -> tuple[int, Any]:
        """The call's next signal, once the inbox is empty (the SSE and OpenAI streams
        call it only then, not per event as :meth:`_signals`' generator runs), an SSE
        keepalive comment sent after each ``KEEPALIVE`` seconds of silence."""
        pump = self.call.pump
        while not await pump.wait(KEEPALIVE):
            await send({"type": "http.response.body", "body": b": keepalive\n\n",
                        "more_body": True})
        signal = pump.ready()
        assert signal is not None  # wait() is true only with a signal there
        return signal

    async def _signals(self) -> Any:
        call = self.call
        while True:
            later = await call.pump.next(KEEPALIVE)
            yield later  # None: silence, a keepalive is due
            if later is not None and later[0] != _NEXT:
                return

    async def _sse(self, send: Send) -> None:
        call = self.call
        run_id = call.record.run_id
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
            (b"x-run-id", run_id.encode()),
        ]})
        send = self.body_send or send
        pump = call.pump
        while True:
            signal: tuple[int, Any] | None = pump.ready() or await self._wait(send)
            # Under load events queue up: whatever is buffered goes out in one write,
            # encoded once.
            frames: list[str] = []
            while signal is not None:
                kind, value = signal
                if kind == _NEXT:
                    seq, data = call.note(value)
                    frames.append(f"id: {run_id}.{seq}\nevent: {value.type}\ndata: {data}\n\n")
                    signal = pump.ready()
                    continue
                if kind == _ERROR:
                    error = from_exception(value, call.record.key.session_id, run_id)
                    call.runner.metrics.error(error.code, error.status)
                    await call.finish("failed", type(value).__name__)
                    frames.append(f"event: error\ndata: {_error_data(error)}\n\n")
                else:
                    await call.finish("completed")
                await send({"type": "http.response.body", "body": "".join(frames).encode(),
                            "more_body": False})
                return
            await send({"type": "http.response.body", "body": "".join(frames).encode(),
                        "more_body": True})

    async def _json(self, send: Send) -> None:
        call = self.call
        status, headers = 200, [(b"x-run-id", call.record.run_id.encode())]
        async for signal in self._signals():
            if signal is None:
                continue
            if signal[0] == _NEXT:
                call.note(signal[1])
                continue
            if signal[0] == _ERROR:
                error = from_exception(signal[1], call.record.key.session_id,
                                       call.record.run_id)
                call.runner.metrics.error(error.code, error.status)
                await call.finish("failed", type(signal[1]).__name__)
                status, body = error.status, _error_data(error).encode()
                headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
            elif call.result is None:
                await call.finish("failed", "NoResultError")
                status = 500
                body = json.dumps({"error": {"code": "no_result", "message":
                                   "the call ended without a result (a middleware dropped "
                                   "its AgentResultEvent)"}}).encode()
            else:
                await call.finish("completed")
                body = call.result.model_dump_json().encode()
        headers.append((b"content-type", b"application/json"))
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


async def _disconnected(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
