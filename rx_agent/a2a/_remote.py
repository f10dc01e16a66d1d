"""One call of a remote agent with the ``a2a-sdk`` client: the message out, the task's
updates back as the library's events, its end as the final ``Msg``; failures as
:mod:`._errors`.

Text artifacts stream as text blocks (one block per artifact, a chunk per delta);
every status update is a ``CustomEvent("a2a_status", {...})``. A streaming peer is
read as it streams; a peer without streaming, or a stream that ends before the task
does, is polled with ``GetTask`` until the task ends or asks for input.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

try:
    from a2a.client import (
        A2ACardResolver,
        A2AClientError,
        A2AClientTimeoutError,
        AgentCardResolutionError,
        Client,
        ClientConfig,
        ClientFactory,
    )
    from a2a.helpers import get_data_parts
    from a2a.types import (
        AgentCard,
        CancelTaskRequest,
        GetTaskRequest,
        Message,
        Part,
        Role,
        SendMessageRequest,
        StreamResponse,
        Task,
        TaskState,
    )
    from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError
except ImportError as exc:  # only without the extra
    raise ImportError(
        f"A2AAgent needs the A2A SDK ({exc.name} is missing): pip install 'rx-agent[a2a]' "
        "(from a checkout: pip install -e '.[a2a]')"
    ) from exc

from ..event import (
    AgentEvent,
    CustomEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
)
from ..message import DataBlock, GenerateReason, Msg, TextBlock
from ._errors import (
    RemoteAgentAuthError,
    RemoteAgentError,
    RemoteAgentRequestError,
    RemoteAgentTimeoutError,
    RemoteAgentUnavailableError,
    RemoteTaskFailedError,
)

__all__ = ["AgentCard", "Exchange", "fetch_card", "open_client", "remote_error", "to_message",
           "to_parts"]

log = logging.getLogger("rx_agent.a2a")

POLL_INTERVAL = 0.5
"""Seconds between ``GetTask`` polls of a task the stream left unfinished."""

_FINAL = {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED,
          TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED}
_ASKING = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}


def state_name(state: int) -> str:
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower().replace("_", "-")


def remote_error(exc: BaseException, url: str, what: str) -> RemoteAgentError:
    """``exc`` (from httpx or the SDK) as the typed error; ``what`` names the peer."""
    if isinstance(exc, RemoteAgentError):
        return exc
    cause = exc.__cause__ if isinstance(exc, A2AClientError) else exc
    status = getattr(exc, "status_code", None)
    if isinstance(cause, httpx.HTTPStatusError):
        status = cause.response.status_code
    if isinstance(exc, A2AClientTimeoutError) or isinstance(cause, httpx.TimeoutException):
        return RemoteAgentTimeoutError(f"{what} did not answer in time ({type(cause).__name__})",
                                       url=url)
    if status in (401, 403):
        return RemoteAgentAuthError(f"{what} refused the credentials (HTTP {status}): "
                                    "check the Authorization header (headers=...)",
                                    url=url, status_code=status)
    if isinstance(cause, httpx.HTTPStatusError | httpx.RequestError):
        detail = f"HTTP {status}" if status else f"{type(cause).__name__}: {cause}"
        return RemoteAgentUnavailableError(f"{what} cannot be reached ({detail})", url=url,
                                           status_code=status)
    if isinstance(exc, AgentCardResolutionError):
        return RemoteAgentUnavailableError(f"{what} has no valid agent card: {exc.message}",
                                           url=url, status_code=status)
    if isinstance(exc, A2AClientError):
        return RemoteAgentRequestError(f"{what} answered with an error: {exc.message}",
                                       url=url, code=None)
    if isinstance(exc, A2AError):
        return RemoteAgentRequestError(f"{what} refused the request: {exc.message}", url=url,
                                       code=JSON_RPC_ERROR_CODE_MAP.get(type(exc)))
    raise exc


def http_client(headers: dict[str, str], timeout: float | None) -> httpx.AsyncClient:
    return httpx.AsyncClient(headers=headers, timeout=timeout)


async def fetch_card(http: httpx.AsyncClient, url: str, what: str) -> AgentCard:
    try:
        return await A2ACardResolver(http, url).get_agent_card()
    except Exception as exc:
        raise remote_error(exc, url, what) from exc


def open_client(http: httpx.AsyncClient, card: AgentCard, url: str, what: str) -> Client:
    try:
        return ClientFactory(ClientConfig(httpx_client=http,
                                          streaming=card.capabilities.streaming)).create(card)
    except ValueError as exc:  # the card offers no interface the SDK's client speaks
        raise RemoteAgentUnavailableError(f"{what} offers no interface this client speaks "
                                          f"(JSON-RPC): {exc}", url=url) from exc


def to_parts(msgs: list[Msg]) -> list[Part]:
    """The text and data blocks of ``msgs`` as A2A parts (other blocks stay behind)."""
    parts: list[Part] = []
    for msg in msgs:
        for block in msg.content:
            if isinstance(block, TextBlock):
                parts.append(Part(text=block.text))
            elif isinstance(block, DataBlock) and block.url:
                parts.append(Part(url=block.url, media_type=block.media_type))
            elif isinstance(block, DataBlock) and block.data:
                parts.append(Part(raw=base64.b64decode(block.data), media_type=block.media_type))
    return parts


def to_message(parts: list[Part], context_id: str | None, task_id: str | None) -> Message:
    return Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=parts,
                   context_id=context_id or "", task_id=task_id or "")


def _texts(parts: Any) -> str:
    return "".join(part.text for part in parts if part.WhichOneof("content") == "text")


def _parts_text(parts: Any) -> str:
    out: list[str] = []
    for part in parts:
        which = part.WhichOneof("content")
        if which == "text":
            out.append(part.text)
        elif which == "data":
            out.append(json.dumps(get_data_parts([part])[0], ensure_ascii=False))
        elif which == "url":
            out.append(f"[{part.filename or part.media_type or 'file'}: {part.url}]")
        elif which == "raw":
            out.append(f"[{part.filename or part.media_type or 'file'}: {len(part.raw)} bytes]")
    return "".join(out)


@dataclass(eq=False)
class Exchange:
    """One remote call's progress: what the caller's events and final message need."""

    name: str
    reply_id: str
    emit: Any
    task_id: str | None = None
    context_id: str | None = None
    state: int | None = None
    status_text: str = ""
    texts: dict[str, str] = field(default_factory=dict)
    open_blocks: set[str] = field(default_factory=set)
    answer: str | None = None
    """A direct ``Message`` reply's text."""

    @property
    def finished(self) -> bool:
        return self.answer is not None or self.state in _FINAL or self.state in _ASKING

    def _event(self, cls: type[AgentEvent], **values: Any) -> None:
        self.emit(cls(reply_id=self.reply_id, source=self.name, **values))

    def _chunk(self, artifact_id: str, text: str, *, append: bool, last: bool) -> None:
        if artifact_id not in self.open_blocks:
            self.open_blocks.add(artifact_id)
            self._event(TextBlockStartEvent, block_id=artifact_id)
        # append=false replaces the artifact (A2A); the caller saw the old chunks already
        self.texts[artifact_id] = (self.texts.get(artifact_id, "") if append else "") + text
        if text:
            self._event(TextBlockDeltaEvent, block_id=artifact_id, delta=text)
        if last:
            self.open_blocks.discard(artifact_id)
            self._event(TextBlockEndEvent, block_id=artifact_id)

    def close_blocks(self) -> None:
        for artifact_id in sorted(self.open_blocks):
            self._event(TextBlockEndEvent, block_id=artifact_id)
        self.open_blocks.clear()

    def _status(self, task_id: str, context_id: str, status: Any) -> None:
        self.task_id, self.context_id = task_id or self.task_id, context_id or self.context_id
        self.state = status.state
        text = _texts(status.message.parts) if status.HasField("message") else ""
        data = get_data_parts(status.message.parts) if status.HasField("message") else []
        if text or self.state not in (TaskState.TASK_STATE_WORKING,):
            self.status_text = text
        self.emit(CustomEvent("a2a_status", {
            "task_id": self.task_id, "context_id": self.context_id,
            "state": state_name(self.state or 0), "text": text, "data": data},
            source=self.name))

    def on_task(self, task: Task) -> None:
        for artifact in task.artifacts:  # a whole task (no streaming): each artifact at once
            if self.texts.get(artifact.artifact_id) != _parts_text(artifact.parts):
                self._chunk(artifact.artifact_id, _parts_text(artifact.parts), append=False,
                            last=True)
        self._status(task.id, task.context_id, task.status)

    def on_response(self, response: StreamResponse) -> None:
        which = response.WhichOneof("payload")
        if which == "task":
            self.on_task(response.task)
        elif which == "status_update":
            update = response.status_update
            self._status(update.task_id, update.context_id, update.status)
        elif which == "artifact_update":
            piece = response.artifact_update
            self.task_id = piece.task_id or self.task_id
            self._chunk(piece.artifact.artifact_id, _parts_text(piece.artifact.parts),
                        append=piece.append, last=piece.last_chunk)
        elif which == "message":
            text = _parts_text(response.message.parts)
            self.context_id = response.message.context_id or self.context_id
            self._chunk("message", text, append=False, last=True)
            self.answer = text

    def result(self, url: str) -> Msg:
        """The final message, or the error a failed task stands for."""
        self.close_blocks()
        texts = [t for t in self.texts.values() if t]
        what = f"the remote agent {self.name!r}"
        metadata = {"a2a": {"task_id": self.task_id, "context_id": self.context_id,
                            "state": None if self.state is None else state_name(self.state)}}
        if self.answer is not None:
            return Msg("assistant", self.answer, name=self.name, metadata=metadata,
                       generate_reason=GenerateReason.MODEL_STOP)
        state = self.state
        if state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED):
            assert state is not None
            raise RemoteTaskFailedError(
                f"{what}'s task {self.task_id} is {state_name(state)}: "
                f"{self.status_text or 'no reason given'}",
                url=url, task_id=self.task_id or "", state=state_name(state))
        if state == TaskState.TASK_STATE_CANCELED:
            return Msg("assistant", self.status_text or "The remote task was canceled.",
                       name=self.name, metadata=metadata,
                       generate_reason=GenerateReason.INTERRUPTED)
        if state in _ASKING:
            return Msg("assistant", self.status_text or "The remote agent asks for input.",
                       name=self.name, metadata=metadata,
                       generate_reason=GenerateReason.PERMISSION_ASKING)
        text = texts[-1] if texts else self.status_text
        return Msg("assistant", text, name=self.name, metadata=metadata,
                   generate_reason=GenerateReason.MODEL_STOP)


async def exchange_events(client: Client, message: Message, progress: Exchange
                          ) -> AsyncIterator[None]:
    """Send ``message`` and feed each answer to ``progress`` (yields after each)."""
    async for response in client.send_message(SendMessageRequest(message=message)):
        progress.on_response(response)
        yield None
    while not progress.finished and progress.task_id:
        await asyncio.sleep(POLL_INTERVAL)
        progress.on_task(await client.get_task(GetTaskRequest(id=progress.task_id)))
        yield None


async def cancel_task(client: Client, task_id: str) -> None:
    try:
        await client.cancel_task(CancelTaskRequest(id=task_id))
    except Exception as exc:  # it may have ended meanwhile; the caller stops either way
        log.debug("canceling remote task %s failed: %s", task_id, exc)
