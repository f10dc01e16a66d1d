"""A call's events as an OpenAI answer: ``chat.completion.chunk`` Server-Sent Events
(``stream=true``) or one ``chat.completion`` object.

What the client sees of the agent: its text (``content``), its thinking
(``reasoning_content``, the field rx_agent's own ``OpenAIChatModel`` reads) and the
calls to the *client's* tools (``tool_calls``, from the reply's
``RequireExternalExecutionEvent``). The agent's own tool calls run on the server and
are not shown. Text of successive model calls is joined with a blank line, in the
stream and in the completion alike.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..event import (
    AgentResultEvent,
    ModelCallStartEvent,
    RequireExternalExecutionEvent,
    TextBlockDeltaEvent,
    ThinkingBlockDeltaEvent,
)
from ..message import GenerateReason, ToolUseBlock
from ._calls import _ERROR, _NEXT, Call, CallResponse
from ._errors import from_exception
from ._openai_request import as_openai

__all__ = ["OpenAIAnswer", "Started"]

_dumps = json.dumps


def _tool_call(index: int, call: ToolUseBlock) -> dict[str, Any]:
    arguments = call.raw_input if call.raw_input is not None else _dumps(call.input)
    return {"index": index, "id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": arguments}}


class _Reply:
    """What the events of one call say, as OpenAI message parts."""

    __slots__ = ("content", "reasoning", "result", "round_content", "round_reasoning",
                 "tool_calls")

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.result: Any = None
        # Whether the current model call has shown text / thinking yet (a later call's
        # first piece is set off with a blank line).
        self.round_content = self.round_reasoning = False

    def text(self, delta: str) -> str:
        if not self.round_content:
            self.round_content = True
            if self.content:
                delta = "\n\n" + delta
        self.content.append(delta)
        return delta

    def thinking(self, delta: str) -> str:
        if not self.round_reasoning:
            self.round_reasoning = True
            if self.reasoning:
                delta = "\n\n" + delta
        self.reasoning.append(delta)
        return delta

    def new_round(self) -> None:
        self.round_content = self.round_reasoning = False

    def calls(self, event: RequireExternalExecutionEvent) -> list[dict[str, Any]]:
        start = len(self.tool_calls)
        new = [_tool_call(start + i, c) for i, c in enumerate(event.tool_calls)]
        self.tool_calls += new
        return new

    def missing_text(self) -> str:
        """The result's text when no text was streamed (a middleware answered)."""
        if self.content or self.result is None:
            return ""
        text: str = self.result.text
        if text:
            self.content.append(text)
        return text

    @property
    def finish_reason(self) -> str:
        reason = getattr(self.result, "generate_reason", None)
        if reason is GenerateReason.TOOL_SUSPENDED and self.tool_calls:
            return "tool_calls"
        return "stop"


class OpenAIAnswer(CallResponse):
    """The ASGI answer of a call started for ``POST /v1/chat/completions``; ``after``
    runs once the answer is sent (or the client left)."""

    def __init__(self, call: Call, *, model: str, stream: bool, include_usage: bool,
                 session_id: str | None,
                 after: Callable[[], Awaitable[None]] | None = None) -> None:
        super().__init__(call, as_json=not stream)
        self.model = model
        self.include_usage = include_usage
        self.session_id = session_id
        self.after = after
        self.id = "chatcmpl-" + call.record.run_id
        self.created = int(time.time())
        self.reply = _Reply()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.after is not None:
                await self.after()

    def _headers(self, content_type: bytes) -> list[tuple[bytes, bytes]]:
        headers = [(b"content-type", content_type),
                   (b"x-run-id", self.call.record.run_id.encode())]
        if self.session_id is not None:
            headers.append((b"x-session-id", self.session_id.encode()))
        return headers

    def _usage(self) -> dict[str, int]:
        record = self.call.record
        return {"prompt_tokens": record.input_tokens,
                "completion_tokens": record.output_tokens,
                "total_tokens": record.input_tokens + record.output_tokens}

    # -- streaming -------------------------------------------------------------------

    async def _sse(self, send: Send) -> None:
        call = self.call
        reply = self.reply
        # Every chunk but the tool calls' and the last ones is this text around a delta.
        head = ('data: {"id":"' + self.id + '","object":"chat.completion.chunk","created":'
                + str(self.created) + ',"model":' + _dumps(self.model)
                + ',"system_fingerprint":null,"choices":[{"index":0,"delta":{')
        tail = '},"logprobs":null,"finish_reason":null}]}\n\n'
        text, thinking = TextBlockDeltaEvent, ThinkingBlockDeltaEvent
        await send({"type": "http.response.start", "status": 200, "headers": [
            *self._headers(b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]})
        send = self.body_send or send
        frames: list[str] = [head + '"role":"assistant","content":""' + tail]
        pump = call.pump
        while True:
            signal: tuple[int, Any] | None = pump.ready() or await self._wait(send)
            while signal is not None:  # whatever is buffered goes out in one write
                kind, event = signal
                if kind != _NEXT:
                    frames += await self._end(kind, event, head, tail)
                    await send({"type": "http.response.body",
                                "body": "".join(frames).encode(), "more_body": False})
                    return
                call.note(event)
                cls = type(event)
                if cls is text:
                    frames.append(head + '"content":' + _dumps(reply.text(event.delta))
                                  + tail)
                elif cls is thinking:
                    frames.append(head + '"reasoning_content":'
                                  + _dumps(reply.thinking(event.delta)) + tail)
                elif cls is ModelCallStartEvent:
                    reply.new_round()
                elif cls is RequireExternalExecutionEvent:
                    frames.append(head + '"tool_calls":' + _dumps(reply.calls(event)) + tail)
                elif cls is AgentResultEvent:
                    reply.result = event.result
                signal = pump.ready()
            if frames:  # (events without a chunk of their own: nothing to write)
                await send({"type": "http.response.body", "body": "".join(frames).encode(),
                            "more_body": True})
                frames = []

    async def _end(self, kind: int, value: Any, head: str, tail: str) -> list[str]:
        call = self.call
        if kind == _ERROR:
            error = as_openai(from_exception(value, call.record.key.session_id))
            call.runner.metrics.error(error.code, error.status)
            await call.finish("failed", type(value).__name__)
            return ["data: " + _dumps(error.payload()) + "\n\n"]
        await call.finish("completed")
        reply = self.reply
        frames = []
        missing = reply.missing_text()
        if missing:
            frames.append(head + '"content":' + _dumps(missing) + tail)
        frames.append(head + tail.replace('"finish_reason":null',
                                          '"finish_reason":' + _dumps(reply.finish_reason)))
        if self.include_usage:
            frames.append("data: " + _dumps({
                "id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model, "system_fingerprint": None, "choices": [],
                "usage": self._usage()}) + "\n\n")
        frames.append("data: [DONE]\n\n")
        return frames

    # -- one completion object -------------------------------------------------------

    async def _json(self, send: Send) -> None:
        call = self.call
        reply = self.reply
        status, extra = 200, []
        async for signal in self._signals():
            if signal is None:
                continue
            kind, event = signal
            if kind == _NEXT:
                call.note(event)
                cls = type(event)
                if cls is TextBlockDeltaEvent:
                    reply.text(event.delta)
                elif cls is ThinkingBlockDeltaEvent:
                    reply.thinking(event.delta)
                elif cls is ModelCallStartEvent:
                    reply.new_round()
                elif cls is RequireExternalExecutionEvent:
                    reply.calls(event)
                elif cls is AgentResultEvent:
                    reply.result = event.result
                continue
            if kind == _ERROR:
                error = as_openai(from_exception(event, call.record.key.session_id))
                call.runner.metrics.error(error.code, error.status)
                await call.finish("failed", type(event).__name__)
                status, body = error.status, error.payload()
                extra = [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
            else:
                await call.finish("completed")
                body = self._completion()
        data = _dumps(body).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            *self._headers(b"application/json"), *extra,
            (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data, "more_body": False})

    def _completion(self) -> dict[str, Any]:
        reply = self.reply
        reply.missing_text()
        message: dict[str, Any] = {"role": "assistant",
                                   "content": "".join(reply.content) or None,
                                   "refusal": None}
        if reply.reasoning:
            message["reasoning_content"] = "".join(reply.reasoning)
        if reply.tool_calls:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"}
                                     for c in reply.tool_calls]
        return {"id": self.id, "object": "chat.completion", "created": self.created,
                "model": self.model, "system_fingerprint": None,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": reply.finish_reason}],
                "usage": self._usage()}


class Started(Response):
    """A started call's answer (:class:`OpenAIAnswer`, ...) in Starlette's ``Response``
    clothes (routing wants one)."""

    def __init__(self, answer: CallResponse) -> None:
        self.status_code = 200
        self.background = None
        self._answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._answer(scope, receive, send)
