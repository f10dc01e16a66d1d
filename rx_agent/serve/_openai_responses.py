"""``POST /v1/responses``: OpenAI's Responses API over the served agent.

A response runs on a session, and its id names it (``resp_<run id>.<session id>``),
so ``previous_response_id`` continues that session with the new ``input`` items, as
the ``X-Session-Id`` header does. Without either, ``input`` is the whole context of a
new session, kept for a later ``previous_response_id`` (``store: false``: deleted
after the call, unless it paused for the client's function calls). The answer's
``output`` holds ``reasoning`` items (the agent's thinking), ``message`` items (its
text) and ``function_call`` items (calls to the request's ``tools``, the client's);
``function_call_output`` items resume the pause.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Send

from .._record import new_id
from ..agent import ReActAgent
from ..event import (
    AgentResultEvent,
    ExternalExecutionResultEvent,
    ModelCallStartEvent,
    RequireExternalExecutionEvent,
    TextBlockDeltaEvent,
    ThinkingBlockDeltaEvent,
)
from ..message import Msg, Role, ToolResultBlock
from ..session import ANONYMOUS_USER, SessionKey
from ..tool._caller import CallerTools
from ._body import check_session_id, read_json
from ._calls import _ERROR, _NEXT, Call, CallResponse
from ._errors import from_exception
from ._openai_chunks import Started
from ._openai_input import read_input, read_request, read_tools, session_of
from ._openai_request import (
    SESSION_HEADER,
    TEMP_PREFIX,
    OpenAIError,
    as_openai,
    bad_request,
)
from ._service import Service


class Routes(Protocol):
    """What this route needs of the chat-completions routes (their helpers)."""

    service: Service
    agent: ReActAgent

    def check_model(self, model: str) -> None: ...

    async def resume(self, key: SessionKey, results: list[ToolResultBlock], *,
                     stored: bool) -> ExternalExecutionResultEvent | None: ...

    async def settle(self, key: SessionKey, result: Msg | None, completed: bool = False, *,
                     keep_pause_here: bool = False) -> None: ...

__all__ = ["responses"]

def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# -- the answer ----------------------------------------------------------------------


class ResponsesAnswer(CallResponse):
    """The answer of ``POST /v1/responses``: a ``response`` object, or its stream of
    ``response.*`` events."""

    def __init__(self, call: Call, *, model: str, stream: bool, request: dict[str, Any],
                 previous: str | None) -> None:
        super().__init__(call, as_json=not stream)
        self.model = model
        self.id = f"resp_{call.record.run_id}.{call.record.key.session_id}"
        self.created = int(time.time())
        self.request = request
        self.previous = previous
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self.new_round = False
        self.seq = 0
        self.result: Any = None
        self.after: Callable[[], Awaitable[None]] | None = None

    async def __call__(self, scope: Any, receive: Any, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.after is not None:
                await self.after()

    def response(self, status: str, error: dict[str, str] | None = None) -> dict[str, Any]:
        record = self.call.record
        req = self.request
        return {
            "id": self.id, "object": "response", "created_at": self.created,
            "status": status, "model": self.model, "output": list(self.output),
            "error": error, "incomplete_details": None,
            "instructions": req.get("instructions"), "metadata": req.get("metadata") or {},
            "parallel_tool_calls": True, "temperature": None, "top_p": None,
            "tool_choice": req.get("tool_choice") or "auto", "tools": req.get("tools") or [],
            "previous_response_id": self.previous, "store": req.get("store", True),
            "text": {"format": {"type": "text"}},
            "usage": {"input_tokens": record.input_tokens,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": record.output_tokens,
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": record.input_tokens + record.output_tokens},
        }

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return event

    def _close(self) -> list[dict[str, Any]]:
        item, self.open = self.open, None
        if item is None:
            return []
        index = len(self.output) - 1
        part = item["content"][0]
        text = part["text"]
        item["status"] = "completed"
        if item["type"] == "reasoning":
            return [self._event("response.reasoning_text.done", item_id=item["id"],
                                output_index=index, content_index=0, text=text),
                    self._event("response.output_item.done", output_index=index, item=item)]
        return [self._event("response.output_text.done", item_id=item["id"],
                            output_index=index, content_index=0, text=text, logprobs=[]),
                self._event("response.content_part.done", item_id=item["id"],
                            output_index=index, content_index=0, part=part),
                self._event("response.output_item.done", output_index=index, item=item)]

    def _delta(self, kind: str, delta: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        item = self.open
        if item is not None and item["type"] != kind:
            events += self._close()
            item = None
        if item is None:
            part: dict[str, Any] = ({"type": "reasoning_text", "text": ""} if kind == "reasoning"
                                    else {"type": "output_text", "text": "", "annotations": []})
            prefix = "rs_" if kind == "reasoning" else "msg_"
            item = {"id": prefix + new_id(), "type": kind, "status": "in_progress",
                    "content": [part]}
            if kind == "reasoning":
                item["summary"] = []
            else:
                item["role"] = "assistant"
            self.open = item
            self.output.append(item)
            index = len(self.output) - 1
            events.append(self._event("response.output_item.added", output_index=index,
                                      item={**item, "content": []}))
            if kind == "message":
                events.append(self._event("response.content_part.added", item_id=item["id"],
                                          output_index=index, content_index=0, part=dict(part)))
        elif self.new_round and item["content"][0]["text"]:
            delta = "\n\n" + delta
        self.new_round = False
        item["content"][0]["text"] += delta
        index = len(self.output) - 1
        name = ("response.reasoning_text.delta" if kind == "reasoning"
                else "response.output_text.delta")
        extra: dict[str, Any] = {} if kind == "reasoning" else {"logprobs": []}
        events.append(self._event(name, item_id=item["id"], output_index=index,
                                  content_index=0, delta=delta, **extra))
        return events

    def _calls(self, event: RequireExternalExecutionEvent) -> list[dict[str, Any]]:
        events = self._close()
        for call in event.tool_calls:
            arguments = call.raw_input if call.raw_input is not None else _dumps(call.input)
            item = {"id": "fc_" + call.id, "type": "function_call", "status": "completed",
                    "call_id": call.id, "name": call.name, "arguments": arguments}
            self.output.append(item)
            index = len(self.output) - 1
            events += [
                self._event("response.output_item.added", output_index=index,
                            item={**item, "arguments": "", "status": "in_progress"}),
                self._event("response.function_call_arguments.delta", item_id=item["id"],
                            output_index=index, delta=arguments),
                self._event("response.function_call_arguments.done", item_id=item["id"],
                            output_index=index, arguments=arguments, name=call.name),
                self._event("response.output_item.done", output_index=index, item=item)]
        return events

    def _feed(self, event: Any) -> list[dict[str, Any]]:
        self.call.note(event)
        cls = type(event)
        if cls is TextBlockDeltaEvent:
            return self._delta("message", event.delta)
        if cls is ThinkingBlockDeltaEvent:
            return self._delta("reasoning", event.delta)
        if cls is ModelCallStartEvent:
            self.new_round = True
        elif cls is RequireExternalExecutionEvent:
            return self._calls(event)
        elif cls is AgentResultEvent:
            self.result = event.result
        return []

    async def _finish(self, kind: int, value: Any) -> tuple[list[dict[str, Any]], Any]:
        """The closing events and the error (``None`` when the call completed)."""
        call = self.call
        if kind == _ERROR:
            error = as_openai(from_exception(value, call.record.key.session_id))
            call.runner.metrics.error(error.code, error.status)
            await call.finish("failed", type(value).__name__)
            return [self._event("response.failed", response=self.response(
                "failed", {"code": error.code, "message": error.message}))], error
        await call.finish("completed")
        events = []
        if not any(i["type"] == "message" for i in self.output) and self.result is not None \
                and self.result.text:
            events += self._delta("message", self.result.text)  # a middleware answered
        events += self._close()
        events.append(self._event("response.completed", response=self.response("completed")))
        return events, None

    async def _sse(self, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"),
                   (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no"),
                   (b"x-run-id", self.call.record.run_id.encode()),
                   (b"x-session-id", self.call.record.key.session_id.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        send = self.body_send or send  # past the app's middleware (RAW_SEND)
        pending = [self._event("response.created", response=self.response("in_progress")),
                   self._event("response.in_progress", response=self.response("in_progress"))]
        async for first in self._signals():
            if first is None:
                await send({"type": "http.response.body", "body": b": keepalive\n\n",
                            "more_body": True})
                continue
            signal: tuple[int, Any] | None = first
            done = False
            while signal is not None:
                if signal[0] != _NEXT:
                    pending += (await self._finish(*signal))[0]
                    done = True
                    break
                pending += self._feed(signal[1])
                signal = self.call.pump.ready()
            body = "".join(f"event: {e['type']}\ndata: {_dumps(e)}\n\n" for e in pending)
            pending = []
            await send({"type": "http.response.body", "body": body.encode(),
                        "more_body": not done})
            if done:
                return

    async def _json(self, send: Send) -> None:
        status, body = 200, None
        async for signal in self._signals():
            if signal is None:
                continue
            if signal[0] == _NEXT:
                self._feed(signal[1])
                continue
            _, error = await self._finish(*signal)
            if error is not None:
                status, body = error.status, error.payload()
            else:
                body = self.response("completed")
        data = _dumps(body).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
            (b"x-run-id", self.call.record.run_id.encode()),
            (b"x-session-id", self.call.record.key.session_id.encode())]})
        await send({"type": "http.response.body", "body": data, "more_body": False})


# -- the route -----------------------------------------------------------------------


async def responses(routes: Routes, request: Request) -> Response:
    service = routes.service
    user = service.user(request)
    data = read_request(await read_json(request, service.max_body))
    routes.check_model(data["model"])
    stream = data.get("stream") is True
    msgs = read_input(data.get("input"))
    instructions = data.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise bad_request('"instructions" must be a string', "instructions")
    tools = read_tools(data.get("tools"), data.get("tool_choice"))
    if tools is not None and tools.clashes(routes.agent.toolkit):
        raise OpenAIError(400, "tool_name_taken", f"tool(s) "
                          f"{', '.join(map(repr, tools.clashes(routes.agent.toolkit)))} are the "
                          "agent's own (it runs them on the server); rename yours", "tools")
    owner = user or ANONYMOUS_USER
    header = request.headers.get(SESSION_HEADER)
    previous = data.get("previous_response_id")
    results = [b for m in msgs if m.role is Role.TOOL for b in m.tool_results]
    inp: Any = msgs
    if header is not None or previous is not None:
        if previous is not None and not isinstance(previous, str):
            raise bad_request('"previous_response_id" must be a string', "previous_response_id")
        session = check_session_id(header) if header is not None else session_of(previous or "")
        key = SessionKey(owner, session)
        state = await service.load(key)
        if previous is not None and header is None and state is None:
            raise OpenAIError(404, "previous_response_not_found",
                              f"there is no response {previous!r}", "previous_response_id")
        if results:
            if len(results) != len(msgs):
                raise bad_request("function_call_output items must be the only input items "
                                  "that answer a response's function calls", "input")
            inp = await routes.resume(key, results, stored=True)
        elif instructions and not any(m.role is Role.SYSTEM and m.text == instructions
                                      for m in (state.context if state is not None else ())):
            inp = [Msg(Role.SYSTEM, instructions), *msgs]  # new instructions for the session
        fresh = False
    else:
        key = SessionKey(owner, TEMP_PREFIX + new_id())
        fresh = True
        if instructions:
            inp = [Msg(Role.SYSTEM, instructions), *msgs]
    ctx = service.calls.context(key, user)
    if tools is not None:
        ctx.put(CallerTools, tools)
    try:
        call = await service.calls.start(key, user, inp, "openai", ctx=ctx)
    except BaseException:
        if fresh:
            await routes.settle(key, None)
        raise
    answer = ResponsesAnswer(call, model=routes.agent.name, stream=stream, request=data,
                             previous=previous)
    if data.get("store") is False and key.session_id.startswith(TEMP_PREFIX):
        answer.after = lambda: routes.settle(key, answer.result,
                                             answer.call.record.status == "completed",
                                             keep_pause_here=True)
    return Started(answer)
