"""An offline model that plays back a script: for tests, demos and benchmarks."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from typing import Any

from reactivex import Observable
from reactivex import abc as rxabc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from .._rx import DirectObservable, on_some_loop, running_loop
from ..message import ChatUsage, Msg, TextBlock, ThinkingBlock, ToolUseBlock
from ..middleware.inputs import ModelCallInput
from ..options import GenerateOptions
from .base import (
    ChatModel,
    FinishChunk,
    ModelChunk,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from .errors import ScriptExhaustedError

__all__ = ["ScriptedModel"]

ScriptItem = str | ThinkingBlock | ToolUseBlock | TextBlock | BaseException
ScriptEntry = str | Sequence[ScriptItem] | BaseException


def _estimate_tokens(text_len: int) -> int:
    return max(1, text_len // 4)


class ScriptedModel(ChatModel):
    """Plays back one scripted response per model call, in order.

    Each entry of ``responses`` is one call:

    * a ``str``: answer with that text (one text delta);
    * a list of items: ``str`` (a text delta each), :class:`ThinkingBlock` (a thinking
      delta), :class:`ToolUseBlock` (a tool call), or an exception instance (the stream
      fails there, after the items before it);
    * an exception instance: the call fails before its first chunk.

    ``delay`` seconds pass before each chunk, on the event loop (no thread is held).
    Usage with non-zero token counts is streamed at the end. ``calls`` records the
    :class:`ModelCallInput` of every call received, retries included. Calling past
    the end of the script fails with :class:`ScriptExhaustedError`.
    """

    provider = "scripted"

    def __init__(
        self, responses: Sequence[ScriptEntry], name: str = "scripted", delay: float = 0.0
    ) -> None:
        if isinstance(responses, (str, bytes)) or not isinstance(responses, Sequence):
            raise TypeError("ScriptedModel(responses) takes a list of responses")
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        self._script: list[list[Any] | BaseException] = [self._check(i, r) for i, r in
                                                         enumerate(responses)]
        self.name = name
        self.delay = float(delay)
        self.calls: list[ModelCallInput] = []
        self._lock = threading.Lock()

    @staticmethod
    def _check(i: int, entry: ScriptEntry) -> list[Any] | BaseException:
        if isinstance(entry, BaseException):
            return entry
        if isinstance(entry, str):
            return [entry]
        if isinstance(entry, Sequence):
            items = list(entry)
            for item in items:
                if not isinstance(
                    item, (str, ThinkingBlock, ToolUseBlock, TextBlock, BaseException)
                ):
                    raise TypeError(
                        f"ScriptedModel response #{i} has an item of type "
                        f"{type(item).__name__}; expected str, TextBlock, ThinkingBlock, "
                        "ToolUseBlock or an exception instance"
                    )
            return items
        raise TypeError(
            f"ScriptedModel response #{i} is a {type(entry).__name__}; expected a str, "
            "a list of items or an exception instance"
        )

    @property
    def remaining(self) -> int:
        """How many scripted responses are left."""
        with self._lock:
            return len(self._script) - len(self.calls)

    def _next_entry(
        self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]], options: GenerateOptions
    ) -> list[Any] | BaseException:
        with self._lock:
            index = len(self.calls)
            self.calls.append(ModelCallInput(tuple(messages), tuple(tools), options, self))
            if index >= len(self._script):
                return ScriptExhaustedError(
                    f"ScriptedModel {self.name!r} has no response for call #{index + 1}: "
                    f"the script has {len(self._script)} response(s)"
                )
            return self._script[index]

    def _chunks(
        self, messages: Sequence[Msg], items: list[Any]
    ) -> list[ModelChunk | BaseException]:
        out: list[ModelChunk | BaseException] = []
        produced = 0
        tool_index = 0
        for item in items:
            if isinstance(item, str):
                out.append(TextChunk(item))
                produced += len(item)
            elif isinstance(item, TextBlock):
                out.append(TextChunk(item.text))
                produced += len(item.text)
            elif isinstance(item, ThinkingBlock):
                out.append(ThinkingChunk(item.thinking))
                produced += len(item.thinking)
            elif isinstance(item, ToolUseBlock):
                args = json.dumps(item.input)
                out.append(ToolCallChunk(tool_index, item.id, item.name, args, done=True))
                tool_index += 1
                produced += len(args) + len(item.name)
            else:
                out.append(item)  # an exception: the stream fails here
                return out
        prompt = sum(len(m.text) + len(m.thinking) for m in messages)
        out.append(
            UsageChunk(ChatUsage(input_tokens=_estimate_tokens(prompt),
                                  output_tokens=_estimate_tokens(produced)))
        )
        out.append(FinishChunk("tool_calls" if tool_index else "stop"))
        return out

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
            entry = self._next_entry(messages, tools, opts)
            if isinstance(entry, BaseException):
                observer.on_error(_as_exception(entry))
                return Disposable()
            chunks = self._chunks(messages, entry)
            if self.delay == 0:
                loop = running_loop()
                if loop is None:
                    return _emit_now(observer, chunks)
                # Emit from a loop callback, as a network model does, rather than deep
                # inside the subscription: a deep emitting stack can make every event
                # cross a CPython data-stack chunk boundary (gh-142183, unfixed in 3.11).
                holder = SingleAssignmentDisposable()
                loop.call_soon(_emit_now, observer, chunks, holder)
                return holder
            return _emit_later(observer, chunks, self.delay)

        return DirectObservable(subscribe)


def _as_exception(err: BaseException) -> Exception:
    return err if isinstance(err, Exception) else RuntimeError(repr(err))


def _emit_now(
    observer: rxabc.ObserverBase[ModelChunk],
    chunks: list[ModelChunk | BaseException],
    holder: SingleAssignmentDisposable | None = None,
) -> rxabc.DisposableBase:
    """Emit every chunk now; stops as soon as ``holder`` (or the result) is disposed."""
    subscription = holder if holder is not None else SingleAssignmentDisposable()
    on_next = observer.on_next
    for chunk in chunks:
        if subscription.is_disposed:
            return subscription
        if isinstance(chunk, BaseException):
            observer.on_error(_as_exception(chunk))
            return subscription
        on_next(chunk)
    if not subscription.is_disposed:
        observer.on_completed()
    return subscription


def _emit_later(
    observer: rxabc.ObserverBase[ModelChunk],
    chunks: list[ModelChunk | BaseException],
    delay: float,
) -> rxabc.DisposableBase:
    # A chain of loop timers (no task, no future per chunk): thousands of concurrent
    # scripted calls stay cheap, and nothing holds a thread.
    loop = running_loop()
    if loop is None:
        disposable: rxabc.DisposableBase = on_some_loop(
            lambda obs, _: _emit_later(obs, chunks, delay), observer, None
        )
        return disposable
    handle: list[asyncio.TimerHandle | None] = [None]
    index = 0
    disposed = False

    def step() -> None:
        nonlocal index
        chunk = chunks[index]
        index += 1
        if isinstance(chunk, BaseException):
            handle[0] = None
            observer.on_error(_as_exception(chunk))
            return
        more = index < len(chunks)
        # Schedule before on_next, which may dispose (and so cancel the timer).
        handle[0] = loop.call_later(delay, step) if more else None
        observer.on_next(chunk)
        if not more and not disposed:
            observer.on_completed()

    if not chunks:
        observer.on_completed()
        return Disposable()
    handle[0] = loop.call_later(delay, step)

    def dispose() -> None:
        nonlocal disposed
        disposed = True
        timer = handle[0]
        if timer is not None:
            timer.cancel()
            handle[0] = None

    return Disposable(dispose)

