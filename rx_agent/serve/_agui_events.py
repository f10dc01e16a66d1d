"""The agent's events as AG-UI events: one translator per run.

Every AG-UI event is written as a plain dict with the protocol's camelCase keys
(cheaper per event than building and dumping its pydantic model; the tests validate
every event of several runs against the ``ag-ui-protocol`` models).

* text blocks are ``TEXT_MESSAGE_START/CONTENT/END``; the text and the tool calls of
  one model call share a message id (the tool calls' ``parentMessageId``), so a
  client's history has one assistant message per model call;
* thinking blocks are the 1.0 reasoning events (``REASONING_START``,
  ``REASONING_MESSAGE_START/CONTENT/END``, ``REASONING_END``);
* tool calls are ``TOOL_CALL_START/ARGS/END``; a result the agent produced (ran,
  failed, denied) is one ``TOOL_CALL_RESULT`` once it is complete;
* ``CustomEvent`` is ``CUSTOM``; a sub-agent's nested events stay on the server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..builtin.tasks import read_tasks
from ..context import AgentState
from ..event import (
    AgentEvent,
    AgentResultEvent,
    CustomEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)
from ..message import DataBlock, GenerateReason, Role, TextBlock, ToolResultState, ToolUseBlock

__all__ = [
    "APPROVAL_SCHEMA",
    "PROTOCOL_VERSION",
    "Translator",
    "frame",
    "interrupt",
    "messages_snapshot",
    "snapshot",
]

PROTOCOL_VERSION = "1.0"
"""The AG-UI version these events follow (``RUN_STARTED.protocolVersion``)."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "Run (true) or deny (false) the calls."},
        "reason": {"type": "string", "description": "Why, for a denial (the model reads it)."},
        "calls": {"type": "object", "additionalProperties": {"type": "boolean"},
                  "description": "Per tool call id: overrides approved for that call."},
    },
    "required": ["approved"],
}
"""The ``responseSchema`` of an approval interrupt (``confirmed`` is accepted for
``approved``)."""


def frame(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() \
        + b"\n\n"


def _call_json(call: ToolUseBlock) -> dict[str, Any]:
    return {"id": call.id, "name": call.name,
            "arguments": call.input if call.raw_input is None else call.raw_input}


def snapshot(session_id: str, state: AgentState | None, running: bool) -> dict[str, Any]:
    """``STATE_SNAPSHOT``: what a UI can show of the session (docs/protocols.md)."""
    pending = state.pending if state is not None else None
    status = "running" if running else "paused" if pending is not None else "idle"
    return {"type": "STATE_SNAPSHOT", "snapshot": {
        "sessionId": session_id,
        "status": status,
        "tasks": [t.model_dump() for t in read_tasks(state)],
        "pending": None if pending is None else {
            "kind": "approval" if pending.kind == "confirm" else "tool_results",
            "replyId": pending.reply_id,
            "toolCalls": [_call_json(c) for c in pending.tool_calls],
        },
    }}


def interrupt(reply_id: str, calls: list[ToolUseBlock]) -> dict[str, Any]:
    """The one interrupt of an approval pause: its id is the paused reply's."""
    names = ", ".join(f"{c.name}({json.dumps(c.input, ensure_ascii=False)})" for c in calls)
    found: dict[str, Any] = {
        "id": reply_id, "reason": "tool_approval",
        "message": f"Approve {'this tool call' if len(calls) == 1 else 'these tool calls'}: "
                   f"{names}",
        "responseSchema": APPROVAL_SCHEMA,
        "metadata": {"toolCalls": [_call_json(c) for c in calls]},
    }
    if len(calls) == 1:
        found["toolCallId"] = calls[0].id
    return found


def _content(blocks: list[Any]) -> str | list[dict[str, Any]]:
    """Text, or parts when there is media (hints and thinking are the agent's own)."""
    kept = [b for b in blocks if isinstance(b, (TextBlock, DataBlock))]
    if all(isinstance(b, TextBlock) for b in kept):
        return "".join(b.text for b in kept if isinstance(b, TextBlock))
    return [{"type": "text", "text": b.text} if isinstance(b, TextBlock) else _media_part(b)
            for b in kept]


def messages_snapshot(state: AgentState | None) -> dict[str, Any]:
    """``MESSAGES_SNAPSHOT``: the stored conversation as AG-UI messages (our ids)."""
    out: list[dict[str, Any]] = []
    for msg in state.context if state is not None else ():
        if msg.role is Role.TOOL:
            for i, result in enumerate(msg.tool_results):
                output = result.output if isinstance(result.output, str) else \
                    _content(list(result.output))
                entry: dict[str, Any] = {"id": msg.id if i == 0 else f"{msg.id}-{i}",
                                         "role": "tool", "toolCallId": result.id,
                                         "content": output}
                if result.state is ToolResultState.ERROR:
                    entry["error"] = result.text or "the tool failed"
                out.append(entry)
            continue
        content = _content(msg.content)
        if msg.role is Role.ASSISTANT:
            entry = {"id": msg.id, "role": "assistant"}
            if content:
                entry["content"] = content if isinstance(content, str) else msg.text
            calls = msg.tool_calls
            if calls:
                entry["toolCalls"] = [{"id": c.id, "type": "function", "function": {
                    "name": c.name, "arguments": c.raw_input if c.raw_input is not None
                    else json.dumps(c.input, ensure_ascii=False)}} for c in calls]
            if len(entry) > 2:
                out.append(entry)
        elif content:
            role = "user" if msg.role is Role.USER else "system"
            out.append({"id": msg.id, "role": role, "content": content if role == "user"
                        or isinstance(content, str) else msg.text})
    return {"type": "MESSAGES_SNAPSHOT", "messages": out}


def _media_part(block: DataBlock) -> dict[str, Any]:
    kind = block.media_type.split("/", 1)[0]
    source: dict[str, Any] = (
        {"type": "data", "value": block.data, "mimeType": block.media_type}
        if block.data is not None
        else {"type": "url", "value": block.url or "", "mimeType": block.media_type})
    return {"type": kind if kind in ("image", "audio", "video") else "document",
            "source": source}


class Translator:
    """Turns one run's agent events into AG-UI events (``feed``), and closes whatever is
    still open when the run ends (``finish``)."""

    def __init__(self, thread_id: str, run_id: str, prefix: str,
                 state: Callable[[], AgentState | None], provider: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.prefix = prefix
        self.state = state
        self.provider = provider
        self.count = 0
        self.message: str | None = None  # the current model call's message id
        self.text: str | None = None  # an open text message
        self.reasoning: dict[str, str] = {}  # block id -> open reasoning message id
        self.calls: set[str] = set()  # open tool calls
        self.results: dict[str, list[Any]] = {}  # tool call id -> text and media parts
        self.model: str | None = None
        self.usage: dict[str, list[int]] = {}  # model -> [input, output]
        self.approval: RequireUserConfirmEvent | None = None
        self.external: list[str] = []
        self.reason: GenerateReason | None = None
        self.last_state: dict[str, Any] | None = None

    def _id(self) -> str:
        self.count += 1
        return f"{self.prefix}-{self.count}"

    def start(self) -> list[dict[str, Any]]:
        started = {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id,
                   "protocolVersion": PROTOCOL_VERSION}
        return [started, self.state_event(running=True)]

    def state_event(self, running: bool) -> dict[str, Any]:
        event = snapshot(self.thread_id, self.state(), running)
        self.last_state = event["snapshot"]
        return event

    def feed(self, event: AgentEvent) -> list[dict[str, Any]]:
        handler = _HANDLERS.get(type(event))
        return handler(self, event) if handler is not None else []

    # -- one method per agent event type (the table _HANDLERS, below) --------------

    def _on_text_delta(self, event: TextBlockDeltaEvent) -> list[dict[str, Any]]:
        if self.text is None:  # a delta without its start (a middleware dropped it)
            return [*self._open_text(), self._content(event.delta)]
        return [self._content(event.delta)]

    def _on_args(self, event: ToolCallDeltaEvent) -> list[dict[str, Any]]:
        if event.tool_call_id not in self.calls or not event.delta:
            return []
        return [{"type": "TOOL_CALL_ARGS", "toolCallId": event.tool_call_id,
                 "delta": event.delta}]

    def _on_thinking_delta(self, event: ThinkingBlockDeltaEvent) -> list[dict[str, Any]]:
        opened = self.reasoning.get(event.block_id)
        if opened is None:
            return []
        return [{"type": "REASONING_MESSAGE_CONTENT", "messageId": opened,
                 "delta": event.delta}]

    def _on_text_start(self, event: TextBlockStartEvent) -> list[dict[str, Any]]:
        return self._open_text()

    def _on_text_end(self, event: TextBlockEndEvent) -> list[dict[str, Any]]:
        return self._close_text()

    def _on_model_start(self, event: ModelCallStartEvent) -> list[dict[str, Any]]:
        self.message = None  # each model call is one assistant message
        self.model = event.model_name
        return []

    def _on_model_end(self, event: ModelCallEndEvent) -> list[dict[str, Any]]:
        if event.usage is not None:
            total = self.usage.setdefault(self.model or "", [0, 0])
            total[0] += event.usage.input_tokens
            total[1] += event.usage.output_tokens
        return self.close()

    def _on_thinking_start(self, event: ThinkingBlockStartEvent) -> list[dict[str, Any]]:
        out = self._close_reasoning(event.block_id)
        opened = self.reasoning[event.block_id] = self._id()
        return [*out, {"type": "REASONING_START", "messageId": opened},
                {"type": "REASONING_MESSAGE_START", "messageId": opened, "role": "reasoning"}]

    def _on_thinking_end(self, event: ThinkingBlockEndEvent) -> list[dict[str, Any]]:
        return self._close_reasoning(event.block_id)

    def _on_call_start(self, event: ToolCallStartEvent) -> list[dict[str, Any]]:
        out = self._close_text()
        if event.tool_call_id in self.calls:
            return out
        self.calls.add(event.tool_call_id)
        out.append({"type": "TOOL_CALL_START", "toolCallId": event.tool_call_id,
                    "toolCallName": event.tool_call_name, "parentMessageId": self._message()})
        return out

    def _on_call_end(self, event: ToolCallEndEvent) -> list[dict[str, Any]]:
        if event.tool_call_id not in self.calls:
            return []
        self.calls.discard(event.tool_call_id)
        return [{"type": "TOOL_CALL_END", "toolCallId": event.tool_call_id}]

    def _on_result_start(self, event: ToolResultStartEvent) -> list[dict[str, Any]]:
        self.results[event.tool_call_id] = []
        return []

    def _on_result_text(self, event: ToolResultTextDeltaEvent) -> list[dict[str, Any]]:
        self.results.setdefault(event.tool_call_id, []).append(event.delta)
        return []

    def _on_result_data(self, event: ToolResultDataDeltaEvent) -> list[dict[str, Any]]:
        self.results.setdefault(event.tool_call_id, []).append(event.delta)
        return []

    def _on_confirm(self, event: RequireUserConfirmEvent) -> list[dict[str, Any]]:
        self.approval = event
        return []

    def _on_external(self, event: RequireExternalExecutionEvent) -> list[dict[str, Any]]:
        self.external = [c.id for c in event.tool_calls]
        return []

    def _on_result_event(self, event: AgentResultEvent) -> list[dict[str, Any]]:
        self.reason = event.result.generate_reason
        return []

    def _on_custom(self, event: CustomEvent) -> list[dict[str, Any]]:
        return [{"type": "CUSTOM", "name": event.name, "value": event.value}]

    # -- pieces --------------------------------------------------------------------

    def _message(self) -> str:
        if self.message is None:
            self.message = self._id()
        return self.message

    def _open_text(self) -> list[dict[str, Any]]:
        if self.text is not None:
            return []
        self.text = self._message()
        return [{"type": "TEXT_MESSAGE_START", "messageId": self.text, "role": "assistant"}]

    def _content(self, delta: str) -> dict[str, Any]:
        return {"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text, "delta": delta}

    def _close_text(self) -> list[dict[str, Any]]:
        if self.text is None:
            return []
        closed, self.text = self.text, None
        return [{"type": "TEXT_MESSAGE_END", "messageId": closed}]

    def _close_reasoning(self, block_id: str) -> list[dict[str, Any]]:
        opened = self.reasoning.pop(block_id, None)
        if opened is None:
            return []
        return [{"type": "REASONING_MESSAGE_END", "messageId": opened},
                {"type": "REASONING_END", "messageId": opened}]

    def _close_calls(self) -> list[dict[str, Any]]:
        out = [{"type": "TOOL_CALL_END", "toolCallId": c} for c in sorted(self.calls)]
        self.calls.clear()
        return out

    def _on_result_end(self, event: ToolResultEndEvent) -> list[dict[str, Any]]:
        parts = self.results.pop(event.tool_call_id, [])
        content: str | list[dict[str, Any]]
        if all(isinstance(p, str) for p in parts):
            content = "".join(parts)
        else:
            content = [{"type": "text", "text": p} if isinstance(p, str) else _media_part(p)
                       for p in parts]
        out: list[dict[str, Any]] = [*self._close_text(), *self._close_calls()]
        result: dict[str, Any] = {"type": "TOOL_CALL_RESULT", "messageId": self._id(),
                                  "toolCallId": event.tool_call_id, "content": content,
                                  "role": "tool"}
        if event.state is not ToolResultState.SUCCESS:
            result["metadata"] = {"state": event.state.value}
        out.append(result)
        current = snapshot(self.thread_id, self.state(), True)["snapshot"]
        if current != self.last_state:  # a tool changed the task list (or the state)
            self.last_state = current
            out.append({"type": "STATE_SNAPSHOT", "snapshot": current})
        return out

    # -- the end -------------------------------------------------------------------

    def close(self) -> list[dict[str, Any]]:
        """Close what an interrupted or failed run left open."""
        out = self._close_text()
        for block_id in list(self.reasoning):
            out += self._close_reasoning(block_id)
        return out + self._close_calls()

    def _usage(self) -> list[dict[str, Any]]:
        return [{"provider": self.provider, **({"model": model} if model else {}),
                 "inputTokens": i, "outputTokens": o, "totalTokens": i + o}
                for model, (i, o) in self.usage.items()]

    def finish(self) -> list[dict[str, Any]]:
        """The end of a run that did not fail: the state, then ``RUN_FINISHED`` with its
        outcome (an approval is an interrupt; an interrupt of the call is cancelled;
        calls the client must run are ``pendingToolCallIds`` of a success)."""
        out = [*self.close(), self.state_event(running=False)]
        finished: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": self.thread_id,
                                    "runId": self.run_id}
        if self.approval is not None:
            finished["outcome"] = {"type": "interrupt", "interrupts": [
                interrupt(self.approval.reply_id, self.approval.tool_calls)]}
        elif self.reason is GenerateReason.INTERRUPTED:
            finished["outcome"] = {"type": "cancelled"}
        elif self.external:
            finished["outcome"] = {"type": "success", "pendingToolCallIds": self.external}
        if self.usage:
            finished["usage"] = self._usage()
        if self.reason is not None:
            finished["metadata"] = {"generateReason": self.reason.value}
        out.append(finished)
        return out

    def error(self, code: str, message: str) -> list[dict[str, Any]]:
        failed: dict[str, Any] = {"type": "RUN_ERROR", "message": message, "code": code}
        if self.usage:
            failed["usage"] = self._usage()
        return [failed]


_HANDLERS: dict[type[AgentEvent], Callable[[Translator, Any], list[dict[str, Any]]]] = {
    TextBlockDeltaEvent: Translator._on_text_delta,
    ToolCallDeltaEvent: Translator._on_args,
    ThinkingBlockDeltaEvent: Translator._on_thinking_delta,
    TextBlockStartEvent: Translator._on_text_start,
    TextBlockEndEvent: Translator._on_text_end,
    ModelCallStartEvent: Translator._on_model_start,
    ModelCallEndEvent: Translator._on_model_end,
    ThinkingBlockStartEvent: Translator._on_thinking_start,
    ThinkingBlockEndEvent: Translator._on_thinking_end,
    ToolCallStartEvent: Translator._on_call_start,
    ToolCallEndEvent: Translator._on_call_end,
    ToolResultStartEvent: Translator._on_result_start,
    ToolResultTextDeltaEvent: Translator._on_result_text,
    ToolResultDataDeltaEvent: Translator._on_result_data,
    ToolResultEndEvent: Translator._on_result_end,
    RequireUserConfirmEvent: Translator._on_confirm,
    RequireExternalExecutionEvent: Translator._on_external,
    AgentResultEvent: Translator._on_result_event,
    CustomEvent: Translator._on_custom,
}
"""What each agent event becomes; the others (lifecycle, hints, nested events of a
sub-agent, resume echoes...) have no AG-UI counterpart and are not sent."""
