"""AG-UI: ``POST /v1/agui`` takes a ``RunAgentInput`` and streams the run's AG-UI events.

The thread id is the session id (under the caller's user id, as on every route); the
call runs through the server's own machinery (auth, body limit, one call per
session, the run log, metrics, disposal on disconnect). The front end's ``tools``
are the call's :class:`~rx_agent.tool.CallerTools`: calling one ends the run with the
calls for the client to run, and its tool messages in the next run resume the call.
An approval pause ends the run with an ``interrupt`` outcome; the next run's
``resume`` answers it. See docs/protocols.md ("AG-UI").
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import RunAgentInput
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..context import AgentState
from ..session import ANONYMOUS_USER, SessionKey
from ..tool import CallerTools
from ._agui_events import (
    PROTOCOL_VERSION,
    Translator,
    frame,
    interrupt,
    messages_snapshot,
    snapshot,
)
from ._agui_input import caller_tools, plan_input, read_run_input
from ._body import read_json
from ._calls import _ERROR, _NEXT, Call, CallResponse
from ._errors import from_exception
from ._service import Service

__all__ = ["PATH", "openapi_paths", "routes"]

PATH = "/v1/agui"

_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


class _Stream(CallResponse):
    """A started call's events as AG-UI events (the base class listens for the
    client's disconnect and disposes the call)."""

    def __init__(self, call: Call, translator: Translator) -> None:
        super().__init__(call, as_json=False)
        self.translator = translator

    async def _sse(self, send: Send) -> None:
        call = self.call
        tr = self.translator
        await send({"type": "http.response.start", "status": 200, "headers": [
            *_HEADERS, (b"x-run-id", call.record.run_id.encode())]})
        send = self.body_send or send  # past the app's middleware (RAW_SEND)
        await send({"type": "http.response.body", "more_body": True,
                    "body": b"".join(frame(e) for e in tr.start())})
        async for first in self._signals():
            if first is None:
                await send({"type": "http.response.body", "body": b": keepalive\n\n",
                            "more_body": True})
                continue
            # Whatever is buffered goes out in one write (as on the server's own stream).
            out: list[dict[str, Any]] = []
            signal: tuple[int, Any] | None = first
            while signal is not None:
                kind, value = signal
                if kind == _NEXT:
                    call.note(value)
                    out += tr.feed(value)
                    signal = call.pump.ready()
                    continue
                if kind == _ERROR:
                    error = from_exception(value, call.record.key.session_id)
                    call.runner.metrics.error(error.code, error.status)
                    out += tr.error(error.code, error.message)
                    await call.finish("failed", type(value).__name__)
                else:
                    out += tr.finish()  # reads the state before the session is freed
                    await call.finish("completed")
                await send({"type": "http.response.body", "more_body": False,
                            "body": b"".join(frame(e) for e in out)})
                return
            await send({"type": "http.response.body", "more_body": True,
                        "body": b"".join(frame(e) for e in out)})


class _Started(Response):
    """The stream in Starlette's ``Response`` clothes (routing wants one)."""

    def __init__(self, answer: _Stream) -> None:
        self.status_code = 200
        self.background = None
        self._answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._answer(scope, receive, send)


def _state_only(run: RunAgentInput, state: AgentState | None) -> Response:
    """A run with nothing new: the thread's messages and state, and its pause as the
    outcome (a reloaded front end catches up)."""
    finished: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": run.thread_id,
                                "runId": run.run_id}
    pending = state.pending if state is not None else None
    if pending is not None and pending.kind == "confirm":
        finished["outcome"] = {"type": "interrupt",
                               "interrupts": [interrupt(pending.reply_id, pending.tool_calls)]}
    elif pending is not None:
        finished["outcome"] = {"type": "success",
                               "pendingToolCallIds": [c.id for c in pending.tool_calls]}
    events = [{"type": "RUN_STARTED", "threadId": run.thread_id, "runId": run.run_id,
               "protocolVersion": PROTOCOL_VERSION},
              messages_snapshot(state), snapshot(run.thread_id, state, running=False),
              finished]
    return Response(b"".join(frame(e) for e in events), headers={
        k.decode(): v.decode() for k, v in _HEADERS})


def routes(service: Service) -> list[Route]:
    agent = service.agent
    provider = str(getattr(agent.model, "provider", "unknown"))

    async def run_agui(request: Request) -> Response:
        user = service.user(request)
        run = read_run_input(await read_json(request, service.max_body))
        key = SessionKey(user or ANONYMOUS_USER, run.thread_id)
        tools = caller_tools(run, agent.toolkit)
        state = await service.load(key)
        inp = plan_input(run, state)
        if inp is None:
            return _state_only(run, state)
        ctx = service.calls.context(key, user)
        ctx.put(RunAgentInput, run)  # for tools and middleware: state, context, props
        if tools is not None:
            ctx.put(CallerTools, tools)
        call = await service.calls.start(key, user, inp, "agui", ctx=ctx)

        def live_state() -> AgentState | None:
            return ctx.agent_state

        translator = Translator(run.thread_id, run.run_id, call.record.run_id, live_state,
                                provider)
        return _Started(_Stream(call, translator))

    return [Route(PATH, run_agui, methods=["POST"])]


def openapi_paths() -> dict[str, Any]:
    error = {"description": "an error", "content": {"application/json": {"schema": {
        "$ref": "#/components/schemas/Error"}}}}
    return {PATH: {"post": {
        "summary": "AG-UI: run the agent on a RunAgentInput; the answer is the AG-UI event "
                   "stream (threadId is the session id)",
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["threadId", "runId", "messages"],
            "description": "An AG-UI RunAgentInput (ag-ui-protocol 1.0)",
            "properties": {
                "threadId": {"type": "string",
                             "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@~-]{0,127}$"},
                "runId": {"type": "string", "minLength": 1, "maxLength": 256},
                "messages": {"type": "array", "items": {"type": "object"}},
                "tools": {"type": "array", "items": {"type": "object"}},
                "state": {}, "context": {"type": "array", "items": {"type": "object"}},
                "forwardedProps": {},
                "resume": {"type": "array", "items": {"type": "object"}},
            }}}}},
        "responses": {
            "200": {"description": "AG-UI events as Server-Sent Events (`data:` lines): "
                    "RUN_STARTED ... RUN_FINISHED or RUN_ERROR",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}}},
            "400": error, "401": error, "409": error, "413": error, "415": error,
        },
    }}}

