"""The chat-model interface the agent loop consumes.

A model streams :data:`ModelChunk` items for one call: text and thinking deltas,
tool-call fragments (assembled by ``index``), usage and the finish reason. The
runtime turns them into block events with the spec's block-id rules.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from reactivex import Observable
from reactivex import abc as rxabc

from .._rx import cancelling, on_some_loop
from ..message import ChatUsage, Msg
from ..options import GenerateOptions

__all__ = [
    "AsyncChatModel",
    "ChatModel",
    "FinishChunk",
    "ModelChunk",
    "TextChunk",
    "ThinkingChunk",
    "ToolCallChunk",
    "UsageChunk",
]


@dataclass(slots=True)
class TextChunk:
    """A visible-text delta."""

    text: str


@dataclass(slots=True)
class ThinkingChunk:
    """A reasoning/thinking delta."""

    thinking: str


@dataclass(slots=True)
class ToolCallChunk:
    """A piece of a tool call. ``index`` groups the pieces of one call.

    The first piece of a call carries ``id`` and ``name``; ``arguments`` is a
    fragment of the JSON argument text. ``done=True`` marks the call complete
    (otherwise it is complete when the stream ends).
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    done: bool = False


@dataclass(slots=True)
class UsageChunk:
    """Token usage of the call (usually last)."""

    usage: ChatUsage


@dataclass(slots=True)
class FinishChunk:
    """The provider's finish reason (``"stop"``, ``"tool_calls"``, ``"length"`` ...)."""

    reason: str


ModelChunk: TypeAlias = TextChunk | ThinkingChunk | ToolCallChunk | UsageChunk | FinishChunk


class ChatModel(abc.ABC):
    """A streaming chat model.

    ``name`` is the model name (``"gpt-4o-mini"``), ``provider`` the system behind it
    (``"openai"``); both appear in events and traces. ``supports_response_schema``
    says the adapter maps ``GenerateOptions.response_schema`` to the provider's native
    structured output (else structured output uses a response tool).
    """

    name: str = "model"
    provider: str = "unknown"
    # Whether GenerateOptions.response_schema is sent as the provider's native structured
    # output; without it, structured output goes through a response tool.
    supports_response_schema: bool = False

    @abc.abstractmethod
    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        """A cold Observable of the chunks of one call; disposing it cancels the call."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class AsyncChatModel(ChatModel):
    """A model written as an async generator (``astream``); ``stream`` bridges it.

    Each subscription runs ``astream`` as a task on the subscriber's loop (or the
    runtime's loop when there is none); disposing cancels the task, which runs the
    generator's ``finally`` (closing HTTP responses and the like).
    """

    @abc.abstractmethod
    def astream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]],
        options: GenerateOptions,
    ) -> AsyncIterator[ModelChunk]:
        """Yield the chunks of one call."""

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        opts = options or GenerateOptions()

        def subscribe(
            observer: rxabc.ObserverBase[ModelChunk],
            scheduler: rxabc.SchedulerBase | None = None,
        ) -> rxabc.DisposableBase:
            async def pump() -> None:
                try:
                    async for chunk in self.astream(messages, tools, opts):
                        observer.on_next(chunk)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    observer.on_error(exc)
                    return
                observer.on_completed()

            return cancelling(asyncio.get_running_loop().create_task(pump()))

        def subscribe_on_a_loop(
            observer: rxabc.ObserverBase[ModelChunk],
            scheduler: rxabc.SchedulerBase | None = None,
        ) -> rxabc.DisposableBase:
            return on_some_loop(subscribe, observer, scheduler)

        return Observable(subscribe_on_a_loop)
