"""The OpenAI-compatible routes: ``POST /v1/chat/completions``, ``POST /v1/responses``
(in :mod:`._openai_responses`), ``GET /v1/models`` and ``GET /v1/models/{model}``.

``model`` names the agent. Without the ``X-Session-Id`` header a request is
stateless: its messages are the context of a temporary session that is deleted when
the call ends. With it, the caller's stored session (the same one as
``/v1/sessions/{id}``) is used and only the messages after the last assistant
message are new.

The request's ``tools`` are the client's: they join the call as external tools
(:class:`~rx_agent.tool._caller.CallerTools`), so a call to one pauses the reply and
the answer carries ``tool_calls``; the next request's ``role: "tool"`` messages
resume it. A stateless pause is kept under a session named after the paused tool
call ids and the caller's user id (``openai-pause-<digest>``); the request that
brings those calls' results resumes it, with the server-side state of the reply
intact (the results of the agent's own tools included). If no such pause is found
(another user's, a worker with its own memory), the request's history is replayed
as a new stateless call.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._record import new_id
from ..event import ExternalExecutionResultEvent
from ..message import GenerateReason, Msg, ToolResultBlock
from ..session import ANONYMOUS_USER, InMemorySessionStore, SessionKey
from ..tool._caller import CallerTools
from ._body import check_session_id, read_json
from ._errors import HTTPError, busy
from ._openai_chunks import OpenAIAnswer, Started
from ._openai_request import (
    SESSION_HEADER,
    TEMP_PREFIX,
    ChatRequest,
    OpenAIError,
    as_openai,
    read_chat,
)
from ._openai_responses import responses
from ._service import Service

__all__ = ["OpenAIRoutes", "openapi_paths", "routes"]

log = logging.getLogger("rx_agent.serve")

PAUSE_PREFIX = "openai-pause-"

Handler = Callable[[Request], Awaitable[Response]]


def _openai_errors(handler: Handler) -> Handler:
    """Every error of ``handler`` in OpenAI's shape, a crash included."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except HTTPError as exc:
            raise as_openai(exc) from None
        except Exception as exc:
            log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
            raise OpenAIError(500, "internal_error", f"the server failed "
                              f"({type(exc).__name__}); the server log has the details") from None

    return wrapped


def pause_key(user: str, call_ids: list[str]) -> SessionKey:
    """Where a stateless reply paused on these tool calls is kept, for this user."""
    digest = hashlib.sha256("\n".join(sorted(call_ids)).encode()).hexdigest()[:40]
    return SessionKey(user, PAUSE_PREFIX + digest)


class OpenAIRoutes:
    def __init__(self, service: Service) -> None:
        self.service = service
        self.agent = service.agent

    def routes(self) -> list[Route]:
        return [
            Route("/v1/chat/completions", _openai_errors(self.chat_completions),
                  methods=["POST"]),
            Route("/v1/responses", _openai_errors(self.responses), methods=["POST"]),
            Route("/v1/models", _openai_errors(self.models), methods=["GET"]),
            Route("/v1/models/{model}", _openai_errors(self.model), methods=["GET"]),
        ]

    # -- models ----------------------------------------------------------------------

    def _model_object(self) -> dict[str, Any]:
        return {"id": self.agent.name, "object": "model", "created": 0, "owned_by": "rx_agent"}

    def check_model(self, model: str) -> None:
        if model != self.agent.name:
            raise OpenAIError(404, "model_not_found",
                              f"the model {model!r} does not exist: this server serves the "
                              f"agent {self.agent.name!r} (GET /v1/models)", "model")

    async def models(self, request: Request) -> Response:
        self.service.user(request)
        return JSONResponse({"object": "list", "data": [self._model_object()]})

    async def model(self, request: Request) -> Response:
        self.service.user(request)
        self.check_model(request.path_params["model"])
        return JSONResponse(self._model_object())

    async def responses(self, request: Request) -> Response:
        return await responses(self, request)

    # -- chat completions ------------------------------------------------------------

    async def chat_completions(self, request: Request) -> Response:
        service = self.service
        user = service.user(request)
        req = read_chat(await read_json(request, service.max_body))
        self.check_model(req.model)
        if req.tools is not None:
            clashes = req.tools.clashes(self.agent.toolkit)
            if clashes:
                raise OpenAIError(400, "tool_name_taken",
                                  f"tool(s) {', '.join(map(repr, clashes))} are the agent's "
                                  "own (it runs them on the server); rename yours", "tools")
        owner = user or ANONYMOUS_USER
        header = request.headers.get(SESSION_HEADER)
        stateless = header is None
        fresh = False  # a temporary session made for this request
        if header is not None:
            key = SessionKey(owner, check_session_id(header))
            inp: Any = (await self.resume(key, req.tool_results, stored=True)
                        if req.tool_results else req.tail)
        else:
            key, inp = await self._stateless(owner, req)
            fresh = inp is req.messages
        ctx = service.calls.context(key, user)
        if req.tools is not None:
            ctx.put(CallerTools, req.tools)
        try:
            call = await service.calls.start(key, user, inp, "openai", ctx=ctx)
        except BaseException:
            # A stored pause that did not start (a busy session) stays as it is.
            if fresh:
                await self.settle(key, None)
            raise
        answer = OpenAIAnswer(call, model=self.agent.name, stream=req.stream,
                              include_usage=req.include_usage, session_id=key.session_id)
        if stateless:
            answer.after = lambda: self.settle(key, answer.reply.result,
                                               answer.call.record.status == "completed")
        return Started(answer)

    async def _stateless(self, owner: str, req: ChatRequest) -> tuple[SessionKey, Any]:
        if req.tool_results:
            key = pause_key(owner, [r.id for r in req.tool_results])
            if await self.service.guard.running(key):  # these results are being answered
                raise busy(key.session_id)
            event = await self.resume(key, req.tool_results, stored=False)
            if event is not None:
                return key, event
        # The request's messages are the whole context, in a session of its own.
        return SessionKey(owner, TEMP_PREFIX + new_id()), req.messages

    async def resume(self, key: SessionKey, results: list[ToolResultBlock], *,
                     stored: bool) -> ExternalExecutionResultEvent | None:
        """The answer to the pause of ``key``; ``None`` (stateless) when there is none
        for these calls, an error for a stored session."""
        state = await self.service.load(key)
        pending = state.pending if state is not None else None
        ids = [r.id for r in results]
        if pending is None or pending.kind != "external" or \
                sorted(c.id for c in pending.tool_calls) != sorted(ids):
            if not stored:
                return None
            if pending is None:
                raise OpenAIError(409, "not_paused", f"session {key.session_id!r} is not "
                                  "waiting for tool results", "messages")
            if pending.kind != "external":
                raise OpenAIError(409, "not_paused", f"session {key.session_id!r} waits for a "
                                  "confirmation (answer it at /v1/sessions/"
                                  f"{key.session_id}/confirm)", "messages")
            raise OpenAIError(409, "wrong_tool_calls", f"the tool messages answer "
                              f"{', '.join(ids)}; session {key.session_id!r} waits for "
                              f"{', '.join(c.id for c in pending.tool_calls)}", "messages")
        names = {c.id: c.name for c in pending.tool_calls}
        return ExternalExecutionResultEvent(reply_id=pending.reply_id, tool_results=[
            r.model_copy(update={"name": names[r.id]}) for r in results])

    async def _store(self, name: str, *args: Any) -> Any:
        store = self.service.store
        if type(store) is InMemorySessionStore:  # never blocks: no thread hop
            return getattr(store, name)(*args)
        return await self.service._store_call(name, *args)

    async def settle(self, key: SessionKey, result: Msg | None, completed: bool = False, *,
                     keep_pause_here: bool = False) -> None:
        """After a stateless call: keep its state only if it paused for the client's
        tools (under the key their results will find, or with ``keep_pause_here`` where
        it is), else delete it."""
        try:
            if result is not None and completed and \
                    result.generate_reason is not GenerateReason.TOOL_SUSPENDED:
                await self._store("delete", key)  # the usual case: nothing to keep
                return
            await _free(self.agent, key)
            state = await self._store("load", key)
            pending = state.pending if state is not None else None
            if state is not None and pending is not None and pending.kind == "external":
                if keep_pause_here:
                    return
                target = pause_key(key.user_id, [c.id for c in pending.tool_calls])
                if target != key:
                    moved = state.model_copy(update={"session_id": target.session_id})
                    await self._store("save", target, moved)
                    await self._store("delete", key)
                return
            if state is not None:
                await self._store("delete", key)
        except Exception:
            log.warning("cleaning up the stateless session %s failed", key, exc_info=True)


async def _free(agent: Any, key: SessionKey, timeout: float = 10.0) -> None:
    """Wait until the agent no longer holds ``key`` (a disposed call saves its state
    after the answer ended), at most ``timeout`` seconds: queued on the session's slot
    (woken when it is released, no polling), then handing it straight back."""
    slots = agent._slots  # the agent's in-process session slots
    mine = object()
    try:
        await asyncio.wait_for(slots.acquire(key, mine), timeout)
    except TimeoutError:
        return  # a call still holds it: the caller goes on with what is stored
    slots.release(key, mine)


def routes(service: Service) -> list[Route]:
    """The OpenAI-compatible routes for ``create_app``."""
    return OpenAIRoutes(service).routes()


def openapi_paths() -> dict[str, Any]:
    """The routes' entries in ``/openapi.json``."""
    error = {"description": "an error in OpenAI's shape", "content": {"application/json": {
        "schema": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["message", "type", "code"], "properties": {
                "message": {"type": "string"}, "type": {"type": "string"},
                "param": {"type": ["string", "null"]}, "code": {"type": "string"}}}}}}}}
    session = {"name": SESSION_HEADER, "in": "header", "required": False,
               "description": "A stored session of the caller to use (only the messages "
               "after the last assistant message are new); without it the request is "
               "stateless.",
               "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@~-]{0,127}$"}}
    return {
        "/v1/chat/completions": {"post": {
            "summary": "OpenAI-compatible chat completion: `model` names the agent; the "
                       "request's `tools` are the client's (answered with `tool_calls`)",
            "parameters": [session],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["model", "messages"], "properties": {
                    "model": {"type": "string"}, "messages": {"type": "array"},
                    "stream": {"type": "boolean"}, "stream_options": {"type": "object"},
                    "tools": {"type": "array"},
                    "tool_choice": {"enum": ["auto", "none"]}}}}}},
            "responses": {
                "200": {"description": "A `chat.completion` object, or with `stream: true` "
                        "`chat.completion.chunk` Server-Sent Events ending with "
                        "`data: [DONE]`. `X-Session-Id` names the session used.",
                        "content": {"application/json": {"schema": {"type": "object"}},
                                    "text/event-stream": {"schema": {"type": "string"}}}},
                **dict.fromkeys(("400", "401", "404", "409", "413", "415"), error)},
        }},
        "/v1/responses": {"post": {
            "summary": "OpenAI Responses API: `model` names the agent; `previous_response_id` "
                       "(or the session header) continues its session; the request's function "
                       "`tools` are the client's (answered with `function_call` items)",
            "parameters": [session],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["model", "input"], "properties": {
                    "model": {"type": "string"},
                    "input": {"oneOf": [{"type": "string"}, {"type": "array"}]},
                    "instructions": {"type": "string"}, "stream": {"type": "boolean"},
                    "previous_response_id": {"type": "string"}, "store": {"type": "boolean"},
                    "tools": {"type": "array"},
                    "tool_choice": {"enum": ["auto", "none"]}}}}}},
            "responses": {
                "200": {"description": "A `response` object, or with `stream: true` its "
                        "`response.*` Server-Sent Events ending with `response.completed`.",
                        "content": {"application/json": {"schema": {"type": "object"}},
                                    "text/event-stream": {"schema": {"type": "string"}}}},
                **dict.fromkeys(("400", "401", "404", "409", "413", "415"), error)},
        }},
        "/v1/models": {"get": {"summary": "The served agent as an OpenAI model list",
                               "responses": {"200": {"description": "a model list"},
                                             "401": error}}},
        "/v1/models/{model}": {"get": {
            "summary": "The served agent as an OpenAI model",
            "parameters": [{"name": "model", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
            "responses": {"200": {"description": "a model"}, "404": error}}},
    }
