"""Reading an OpenAI ``chat.completion.chunk`` event stream into model chunks.

Lenient where servers differ: ``reasoning`` / ``reasoning_content`` for thinking, tool
calls without ``index`` (Gemini's compatible endpoint, some proxies), arguments sent as
an object, usage repeated on every chunk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rx_agent._record import new_id
from rx_agent.message import ChatUsage

from ._http import HTTPTransport
from ._openai_format import content_text, parse_usage, reasoning_text
from ._sse import ServerSentEvent
from .base import FinishChunk, ModelChunk, TextChunk, ThinkingChunk, ToolCallChunk, UsageChunk
from .errors import ModelResponseError

__all__ = ["OpenAIStreamParser"]


@dataclass(slots=True)
class _ToolCallState:
    id: str | None
    name: str | None
    pending: str = ""  # arguments that arrived before the name
    started: bool = False


class OpenAIStreamParser:
    """Turns the ``chat.completion.chunk`` payloads of one stream into chunks.

    Only choice 0 is read (the runtime asks for one). Usage is held until the end
    because some servers repeat it (cumulatively) on every chunk; the finish reason
    too, so the last chunks are always usage then finish, as from any model.
    """

    def __init__(self, transport: HTTPTransport) -> None:
        # The transport maps in-body errors, reads events and names the endpoint.
        self._transport = transport
        self.url = transport.shown_url
        self.done = False
        self.finish_reason: str | None = None
        self.usage: ChatUsage | None = None
        self._calls: dict[int, _ToolCallState] = {}
        self._index_by_id: dict[str, int] = {}
        self._last_index: int | None = None

    def event(self, event: ServerSentEvent) -> list[ModelChunk]:
        data = event.data.strip()
        if data == "[DONE]":
            self.done = True
            return []
        if not data:
            return []
        payload = self._transport.event_json(data)
        if event.event == "error" or payload.get("error"):
            raise self._transport.payload_error(payload)
        return self._payload(payload)

    def _payload(self, payload: dict[str, Any]) -> list[ModelChunk]:
        out: list[ModelChunk] = []
        usage = payload.get("usage")
        if isinstance(usage, dict):
            self.usage = parse_usage(usage)
        choices = payload.get("choices")
        if not isinstance(choices, list):
            return out
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                thinking = reasoning_text(delta)
                if thinking:
                    out.append(ThinkingChunk(thinking))
                text = content_text(delta.get("content"))
                if text:
                    out.append(TextChunk(text))
                refusal = delta.get("refusal")
                if isinstance(refusal, str) and refusal:
                    # A refusal is the visible answer; dropping it would look like
                    # an empty reply.
                    out.append(TextChunk(refusal))
                calls = delta.get("tool_calls")
                if isinstance(calls, list):
                    out.extend(self._tool_calls(calls))
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
        return out

    def _tool_calls(self, calls: list[Any]) -> list[ModelChunk]:
        out: list[ModelChunk] = []
        for call in calls:
            if not isinstance(call, dict):
                continue
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
            name = function.get("name") if isinstance(function.get("name"), str) else None
            arguments = function.get("arguments")
            if arguments is None:
                arguments = ""
            elif not isinstance(arguments, str):
                arguments = json.dumps(arguments)  # some servers send an object
            index = self._index(call.get("index"), call_id)
            state = self._calls.get(index)
            if state is None:
                state = self._calls[index] = _ToolCallState(call_id, name or None)
            elif state.started:
                # Later pieces: only argument fragments matter (some servers repeat
                # the id and name on every piece).
                if arguments:
                    out.append(ToolCallChunk(index, arguments=arguments))
                continue
            else:
                state.id = state.id or call_id
                state.name = state.name or name or None
            state.pending += arguments
            if call_id:
                self._index_by_id[call_id] = index
            if state.name:
                out.append(self._start(index, state))
        return out

    def _index(self, index: Any, call_id: str | None) -> int:
        if isinstance(index, int) and not isinstance(index, bool):
            self._last_index = index
            return index
        # No index (Gemini's compatible endpoint, some proxies): calls come whole or
        # continue the last one; a new id starts a new call.
        if call_id is not None and call_id in self._index_by_id:
            result = self._index_by_id[call_id]
        elif call_id is None and self._last_index is not None:
            result = self._last_index
        else:
            result = max(self._calls, default=-1) + 1
        self._last_index = result
        return result

    @staticmethod
    def _start(index: int, state: _ToolCallState) -> ToolCallChunk:
        state.started = True
        if state.id is None:
            state.id = f"call_{new_id()}"  # the runtime matches results by id
        chunk = ToolCallChunk(index, state.id, state.name or "", state.pending)
        state.pending = ""
        return chunk

    def finish(self, elapsed: float) -> list[ModelChunk]:
        """The closing chunks; raises when the stream ended before the answer did."""
        if not self.done and self.finish_reason is None:
            raise ModelResponseError(
                f"the event stream from {self.url} ended before the answer was complete "
                "(no finish_reason and no [DONE])"
            )
        out: list[ModelChunk] = []
        for index, state in self._calls.items():
            if not state.started:
                # The name never came. Pass the call on anyway: the runtime answers
                # an unknown tool with an error the model can react to.
                out.append(self._start(index, state))
        if self.usage is not None:
            out.append(UsageChunk(self.usage.model_copy(update={"time": elapsed})))
        if self.finish_reason is not None:
            out.append(FinishChunk(self.finish_reason))
        return out
