"""A2A tasks of this worker: who owns each, its state, artifacts and history, and how
one call's agent events become the task's A2A updates.

A task is one request of a client and everything that answers it: the call its
message starts and, when that call pauses for a human decision (``input-required``),
the calls its answers resume, until a final state. Its context id is the session id,
so the session is the same one the ``/v1/sessions`` API shows. Tasks are kept per
worker, like runs, the most recent ``keep``; a client reaches only its own user's.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from a2a.helpers import new_data_part, new_text_part
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from ..event import (
    AgentEvent,
    AgentResultEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolResultEndEvent,
    ToolResultTextDeltaEvent,
)
from ..message import GenerateReason, Msg, ToolUseBlock
from ..session import SessionKey

__all__ = ["TERMINAL", "Pause", "TaskBook", "TaskRecord", "Updates", "agent_message"]

TERMINAL = frozenset({TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED,
                      TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED})

A2AEvent = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent | Message


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` -> ``input-required`` (how people say it)."""
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower().replace("_", "-")


@dataclass(frozen=True)
class Pause:
    """What an ``input-required`` task waits for: the paused reply and its calls."""

    kind: str  # "confirm" or "external"
    reply_id: str
    tool_calls: tuple[ToolUseBlock, ...]


def agent_message(record: TaskRecord, parts: list[Part]) -> Message:
    return Message(message_id=uuid.uuid4().hex, context_id=record.context_id,
                   task_id=record.id, role=Role.ROLE_AGENT, parts=parts)


@dataclass(eq=False)
class TaskRecord:
    id: str
    context_id: str
    key: SessionKey
    state: int = TaskState.TASK_STATE_SUBMITTED
    message: Message | None = None
    """The message of the current status (a pause's question, a failure's reason)."""
    updated: float = field(default_factory=time.time)
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    history: list[Message] = field(default_factory=list)
    pause: Pause | None = None
    running: bool = False
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    """Set whenever no call of the task runs (a cancel waits on it)."""
    listeners: list[asyncio.Queue[A2AEvent | None]] = field(default_factory=list)
    """Queues of ``SubscribeToTask`` streams; ``None`` ends them."""

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def status(self) -> TaskStatus:
        status = TaskStatus(state=self.state)  # type: ignore[arg-type]
        status.timestamp.FromMicroseconds(int(self.updated * 1e6))
        if self.message is not None:
            status.message.CopyFrom(self.message)
        return status

    def set_state(self, state: int, message: Message | None = None) -> TaskStatusUpdateEvent:
        self.state = state
        self.message = message
        self.updated = time.time()
        if message is not None:
            self.history.append(message)
        return TaskStatusUpdateEvent(task_id=self.id, context_id=self.context_id,
                                     status=self.status())

    def snapshot(self, history_length: int | None = None) -> Task:
        history = self.history
        if history_length is not None:
            history = history[len(history) - history_length:] if history_length > 0 else []
        return Task(id=self.id, context_id=self.context_id, status=self.status(),
                    artifacts=list(self.artifacts.values()), history=history)

    def publish(self, event: A2AEvent | None) -> None:
        for queue in self.listeners:
            queue.put_nowait(event)


class TaskBook:
    """The tasks of this worker, the most recent ``keep``; each reachable only by the
    user it belongs to."""

    def __init__(self, keep: int = 1000) -> None:
        self.keep = keep
        self._tasks: OrderedDict[str, TaskRecord] = OrderedDict()

    def new(self, key: SessionKey) -> TaskRecord:
        record = TaskRecord(uuid.uuid4().hex, key.session_id, key)
        self._tasks[record.id] = record
        if len(self._tasks) > self.keep:
            for old in list(self._tasks.values())[: len(self._tasks) - self.keep]:
                if not old.running:
                    del self._tasks[old.id]
        return record

    def get(self, task_id: str, user_id: str) -> TaskRecord | None:
        record = self._tasks.get(task_id)
        return record if record is not None and record.key.user_id == user_id else None

    def of_user(self, user_id: str) -> list[TaskRecord]:
        return [r for r in self._tasks.values() if r.key.user_id == user_id]

    def waiting(self, key: SessionKey) -> list[TaskRecord]:
        """The session's tasks that wait for an answer."""
        return [r for r in self._tasks.values()
                if r.key == key and r.state == TaskState.TASK_STATE_INPUT_REQUIRED]


def _calls(calls: tuple[ToolUseBlock, ...]) -> str:
    return ", ".join(f"{c.name}({json.dumps(c.input, ensure_ascii=False)})" for c in calls)


def pause_message(record: TaskRecord, pause: Pause) -> Message:
    """The ``input-required`` status message: what to answer, in words and as data."""
    if pause.kind == "confirm":
        text = (f"Approve {_calls(pause.tool_calls)}? Answer yes or no, or send a data "
                'part {"approved": true} or {"approved": false}.')
    else:
        text = (f"Waiting for the results of the external tool calls "
                f"{_calls(pause.tool_calls)}: send a data part "
                '{"tool_results": [{"id": "<call id>", "output": "<result>"}, ...]}, or '
                '{"approved": false} to decline them.')
    data = {"input_required": {
        "kind": pause.kind, "reply_id": pause.reply_id,
        "tool_calls": [{"id": c.id, "name": c.name, "input": c.input} for c in pause.tool_calls]}}
    return agent_message(record, [new_text_part(text), new_data_part(data)])


class Updates:
    """One call's events as the task's updates (and the record kept up to date).

    Text blocks of the agent's own reply become artifacts (one per block, streamed in
    chunks); tool calls and results become ``working`` status messages carrying a
    data part; a sub-agent's nested events stay inside. The final state comes from
    the call's end: ``input-required`` for a pause, ``canceled`` for an interrupt."""

    def __init__(self, record: TaskRecord) -> None:
        self.record = record
        self.blocks: dict[tuple[str, str], str] = {}
        self.args: dict[str, list[str]] = {}
        self.outputs: dict[str, list[str]] = {}
        self.pause: Pause | None = None
        self.result: Msg | None = None
        self.texts: list[str] = []

    def start(self) -> TaskStatusUpdateEvent:
        self.record.running = True
        self.record.idle.clear()
        self.record.pause = None
        return self.record.set_state(TaskState.TASK_STATE_WORKING)

    def on_event(self, event: AgentEvent) -> A2AEvent | None:
        kind = type(event)
        if kind is TextBlockDeltaEvent:
            assert isinstance(event, TextBlockDeltaEvent)
            return self._text(event.reply_id, event.block_id, event.delta, last=False)
        if kind is TextBlockStartEvent:
            assert isinstance(event, TextBlockStartEvent)
            self.blocks[(event.reply_id, event.block_id)] = f"text-{len(self.record.artifacts) + 1}"
            return None
        if kind is TextBlockEndEvent:
            assert isinstance(event, TextBlockEndEvent)
            return self._text(event.reply_id, event.block_id, "", last=True)
        if kind is ToolCallDeltaEvent:
            assert isinstance(event, ToolCallDeltaEvent)
            self.args.setdefault(event.tool_call_id, []).append(event.delta)
            return None
        if kind is ToolCallEndEvent:
            assert isinstance(event, ToolCallEndEvent)
            raw = "".join(self.args.pop(event.tool_call_id, []))
            try:
                args: Any = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError:
                args = raw
            return self._working(f"calling {event.tool_call_name}", {"tool_call": {
                "id": event.tool_call_id, "name": event.tool_call_name, "input": args}})
        if kind is ToolResultTextDeltaEvent:
            assert isinstance(event, ToolResultTextDeltaEvent)
            self.outputs.setdefault(event.tool_call_id, []).append(event.delta)
            return None
        if kind is ToolResultEndEvent:
            assert isinstance(event, ToolResultEndEvent)
            output = "".join(self.outputs.pop(event.tool_call_id, []))
            return self._working(f"{event.tool_call_name}: {event.state.value.lower()}", {
                "tool_result": {"id": event.tool_call_id, "name": event.tool_call_name,
                                "state": event.state.value, "output": output}})
        if kind is RequireUserConfirmEvent or kind is RequireExternalExecutionEvent:
            assert isinstance(event, RequireUserConfirmEvent | RequireExternalExecutionEvent)
            self.pause = Pause("confirm" if kind is RequireUserConfirmEvent else "external",
                               event.reply_id, tuple(event.tool_calls))
            return None
        if kind is AgentResultEvent:
            assert isinstance(event, AgentResultEvent)
            self.result = event.result
        return None

    def _text(self, reply_id: str, block_id: str, delta: str, last: bool) -> A2AEvent | None:
        artifact_id = self.blocks.get((reply_id, block_id))
        if artifact_id is None:
            return None
        if last:
            del self.blocks[(reply_id, block_id)]
        known = self.record.artifacts.get(artifact_id)
        if known is None:
            if not delta:  # an empty block makes no artifact
                return None
            known = self.record.artifacts[artifact_id] = Artifact(
                artifact_id=artifact_id, name="reply", parts=[new_text_part("")])
            append = False
        else:
            append = True
        known.parts[0].text += delta
        if last:
            self.texts.append(known.parts[0].text)
        return TaskArtifactUpdateEvent(
            task_id=self.record.id, context_id=self.record.context_id, append=append,
            last_chunk=last, artifact=Artifact(artifact_id=artifact_id, name="reply",
                                               parts=[new_text_part(delta)]))

    def _working(self, text: str, data: dict[str, Any]) -> TaskStatusUpdateEvent:
        record = self.record
        record.updated = time.time()
        record.message = agent_message(record, [new_text_part(text), new_data_part(data)])
        return TaskStatusUpdateEvent(task_id=record.id, context_id=record.context_id,
                                     status=record.status())

    def end(self, failure: str | None = None) -> list[A2AEvent]:
        """The task's last updates of this call; ``failure`` when it failed."""
        record = self.record
        record.running = False
        record.idle.set()
        out: list[A2AEvent] = []
        result = self.result
        if failure is None and result is None:
            failure = "the call ended without a result (a middleware dropped it)"
        if failure is not None:
            out.append(record.set_state(TaskState.TASK_STATE_FAILED,
                                        agent_message(record, [new_text_part(failure)])))
            return out
        assert result is not None
        reason = result.generate_reason
        text = result.text
        if text and text not in self.texts[-1:] and reason not in _PAUSED:
            # A reply whose text was not streamed as a block (a tool's direct return,
            # structured output) still gets its artifact.
            artifact_id = f"text-{len(record.artifacts) + 1}"
            artifact = Artifact(artifact_id=artifact_id, name="reply",
                                parts=[new_text_part(text)])
            record.artifacts[artifact_id] = artifact
            out.append(TaskArtifactUpdateEvent(task_id=record.id, context_id=record.context_id,
                                               last_chunk=True, artifact=artifact))
        if reason is GenerateReason.INTERRUPTED:
            out.append(record.set_state(TaskState.TASK_STATE_CANCELED, agent_message(
                record, [new_text_part(text or "The task was interrupted.")])))
        elif reason in _PAUSED and self.pause is not None:
            record.pause = self.pause
            out.append(record.set_state(TaskState.TASK_STATE_INPUT_REQUIRED,
                                        pause_message(record, self.pause)))
        else:
            final = agent_message(record, [new_text_part(text)]) if text else None
            if final is not None:
                record.history.append(final)
            out.append(record.set_state(TaskState.TASK_STATE_COMPLETED))
        return out


_PAUSED = frozenset({GenerateReason.PERMISSION_ASKING, GenerateReason.TOOL_SUSPENDED})
