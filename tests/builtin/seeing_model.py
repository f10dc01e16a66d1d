"""A model whose answer reports what its input held, so concurrent replies are checkable."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from reactivex import Observable

from rx_agent import ChatModel, GenerateOptions, Msg, ScriptedModel
from rx_agent.model.base import ModelChunk


class SeeingModel(ChatModel):
    """Answers ``describe(messages)`` (one ScriptedModel entry per call: a text, or a
    list with tool calls); records every input."""

    name = "seeing"
    provider = "scripted"

    def __init__(self, describe: Callable[[Sequence[Msg]], Any]) -> None:
        self.describe = describe
        self.inputs: list[tuple[Msg, ...]] = []
        self._lock = threading.Lock()

    def stream(
        self,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        options: GenerateOptions | None = None,
    ) -> Observable[ModelChunk]:
        with self._lock:
            self.inputs.append(tuple(messages))
        return ScriptedModel([self.describe(messages)]).stream(messages, tools, options)


def tagged(messages: Sequence[Msg], tag: str) -> str:
    """The text of the last message starting with ``<tag>`` (``""`` when none)."""
    for msg in reversed(messages):
        if msg.text.startswith(f"<{tag}>"):
            return msg.text
    return ""
