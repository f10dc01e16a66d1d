"""The tool call being executed, for tools that stream more than their result text.

:func:`current_tool_call` answers inside a tool (async, sync on its worker thread, or
an async generator): the call's id and name, and :meth:`ToolCallHandle.emit` to put an
event into the agent's stream between the call's ``ToolResultStartEvent`` and its
``ToolResultEndEvent`` (sub-agents forward their events this way, MCP progress
becomes text deltas). Outside a tool it is ``None``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Protocol

from ..event import AgentEvent, ToolResultDataDeltaEvent, ToolResultTextDeltaEvent
from ..message import DataBlock

__all__ = ["CallOwner", "ToolCallHandle", "current_tool_call", "may_start"]


class CallOwner(Protocol):
    """The agent call a tool runs in (the runtime's per-call scope has these)."""

    @property
    def agent(self) -> Any: ...

    @property
    def tool_ctx(self) -> Any: ...

    @property
    def interrupted(self) -> bool: ...

    def request_interrupt(self, msg: Any = None) -> None: ...


class ToolCallHandle:
    """One running tool call: who it is, and a way to add events to the stream."""

    __slots__ = ("_emit", "_loop", "_thread", "id", "name", "owner", "reply_id", "source")

    def __init__(
        self,
        emit: Callable[[AgentEvent], None],
        source: str | None,
        reply_id: str,
        call_id: str,
        name: str,
        owner: CallOwner | None = None,
    ) -> None:
        self._emit = emit
        # The agent call running the tool (None when a tool runs outside one).
        self.owner = owner
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self.source = source
        self.reply_id = reply_id
        self.id = call_id
        self.name = name

    def emit(self, event: AgentEvent) -> None:
        """Add ``event`` to the agent's stream (thread-safe: a sync tool's worker
        thread hands it to the loop). Events after the call ended are dropped."""
        if not isinstance(event, AgentEvent):
            raise TypeError(f"emit() takes an AgentEvent, not {type(event).__name__}")
        if threading.get_ident() == self._thread:
            self._emit(event)
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._emit, event)

    def text(self, delta: str) -> None:
        """Stream part of the result's text (the model still sees the returned value)."""
        self.emit(ToolResultTextDeltaEvent.make(self.source, reply_id=self.reply_id,
                                                tool_call_id=self.id, tool_call_name=self.name,
                                                delta=delta))

    def data(self, block: DataBlock) -> None:
        """Stream a data block (an image, audio) as part of the result."""
        self.emit(ToolResultDataDeltaEvent.make(self.source, reply_id=self.reply_id,
                                                tool_call_id=self.id, tool_call_name=self.name,
                                                delta=block))

    def __repr__(self) -> str:
        return f"ToolCallHandle(id={self.id!r}, name={self.name!r})"


_CURRENT: ContextVar[ToolCallHandle | None] = ContextVar("rx_agent_tool_call", default=None)


def current_tool_call() -> ToolCallHandle | None:
    """The tool call being executed in this context, or ``None`` outside a tool."""
    return _CURRENT.get()


def may_start() -> bool:
    """Whether the call of this context may still enter its tool: not once its reply
    was interrupted (read on a sync tool's thread, right before the function)."""
    handle = _CURRENT.get()
    owner = handle.owner if handle is not None else None
    return owner is None or not owner.interrupted


def bind(handle: ToolCallHandle) -> Any:
    """Make ``handle`` current (returns the token for :func:`unbind`)."""
    return _CURRENT.set(handle)


def unbind(token: Any) -> None:
    _CURRENT.reset(token)
