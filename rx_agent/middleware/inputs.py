"""Immutable input records passed through the onion hooks.

A middleware changes an input by making a changed copy (``inp.with_(messages=...)``)
and passing it to ``next``; the records themselves never change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from .._history import HistoryView
from .._keywords import refuse_unknown_keywords, unknown_keyword_error
from .._record import install_java_names
from ..event import ExternalExecutionResultEvent, UserConfirmResultEvent
from ..message import GenerateReason, Msg, ToolUseBlock
from ..options import GenerateOptions
from .types import ModelLike

__all__ = [
    "ActingInput",
    "AgentFinishOutcome",
    "AgentInput",
    "CompressContextInput",
    "ModelCallInput",
    "ReasoningInput",
    "ToolSchema",
]

ToolSchema = dict[str, Any]
"""``{"name", "description", "parameters"}``; ``parameters`` is a JSON Schema object."""

_R = TypeVar("_R")


def _tuple(record: object, name: str) -> None:
    value = getattr(record, name)
    if not isinstance(value, tuple):
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise TypeError(
                f"{type(record).__name__}.{name} must be a sequence, not {type(value).__name__}"
            )
        object.__setattr__(record, name, tuple(value))


def _tools(record: ReasoningInput | ModelCallInput) -> None:
    if type(record.tools) is not tuple:
        if record.tools is None:  # Java normalizes null tools to an empty list
            object.__setattr__(record, "tools", ())
        else:
            _tuple(record, "tools")


class _WithMixin:
    __slots__ = ()

    def with_(self: _R, **changes: Any) -> _R:
        """A copy of this input with ``changes`` applied (the original is unchanged)."""
        known: frozenset[str] = type(self).__init_keywords__  # type: ignore[attr-defined]
        if not changes.keys() <= known:  # named here, not as the constructor's error
            raise unknown_keyword_error(type(self), changes, known,
                                        f"{type(self).__name__}.with_()")
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


@dataclass(frozen=True, slots=True)
class AgentInput(_WithMixin):
    """Input of ``on_agent``: the call's messages (``resume`` when continuing a pause)."""

    msgs: tuple[Msg, ...]
    resume: UserConfirmResultEvent | ExternalExecutionResultEvent | None = None

    def __post_init__(self) -> None:
        if type(self.msgs) is not tuple:  # the runtime's own inputs: no call per check
            _tuple(self, "msgs")


@dataclass(frozen=True, slots=True)
class ReasoningInput(_WithMixin):
    """Input of ``on_reasoning``: the model input of one ReAct round.

    ``messages`` starts with the system message (when there is one) followed by the
    session context; edits here reach the model but are not written to the context.
    It is a read-only sequence: a tuple, or the runtime's snapshot of the context
    (indexing, slices, ``len``, iteration and ``+`` as a tuple's), never changed by the
    session after the round began.
    """

    messages: Sequence[Msg]
    tools: tuple[ToolSchema, ...] = ()
    options: GenerateOptions = field(default_factory=GenerateOptions)
    iteration: int = 1

    def __post_init__(self) -> None:
        kind = type(self.messages)
        if kind is not tuple and kind is not HistoryView:  # the context view copies nothing
            _tuple(self, "messages")
        if type(self.tools) is not tuple:
            _tools(self)


@dataclass(frozen=True, slots=True)
class ActingInput(_WithMixin):
    """Input of ``on_acting``: the batch of tool calls made by one reasoning step."""

    tool_calls: tuple[ToolUseBlock, ...]

    def __post_init__(self) -> None:
        _tuple(self, "tool_calls")


@dataclass(frozen=True, slots=True)
class ModelCallInput(_WithMixin):
    """Input of ``on_model_call``: one model API call (``tools=None`` means ``()``)."""

    # AgentScope Python's ``next_handler(current_model=...)`` is ``with_(model=...)``.
    __keyword_hints__: ClassVar[dict[str, str]] = {"current_model": "model"}

    messages: Sequence[Msg]
    """A read-only sequence, as :attr:`ReasoningInput.messages`."""
    tools: tuple[ToolSchema, ...]
    options: GenerateOptions
    model: ModelLike

    def __post_init__(self) -> None:
        kind = type(self.messages)
        if kind is not tuple and kind is not HistoryView:  # the context view copies nothing
            _tuple(self, "messages")
        if type(self.tools) is not tuple:
            _tools(self)


@dataclass(frozen=True, slots=True)
class CompressContextInput(_WithMixin):
    """Input of ``on_compress_context``: the session context at the top of round
    ``iteration``, with what the round's model call will add to it.

    ``messages`` is the context (no system message); replacing it (through ``next``)
    replaces the session's. ``system``, ``tools`` and ``model`` are the round's
    system message, tool schemas and the agent's model, for sizing and summarizing.
    """

    messages: tuple[Msg, ...]
    model: ModelLike
    system: Msg | None = None
    tools: tuple[ToolSchema, ...] = ()
    iteration: int = 1

    def __post_init__(self) -> None:
        _tuple(self, "messages")
        if type(self.tools) is not tuple:
            object.__setattr__(self, "tools", () if self.tools is None else tuple(self.tools))


@dataclass(frozen=True, slots=True)
class AgentFinishOutcome:
    """What ``on_agent_finish`` is told: the result message, or the error."""

    result: Msg | None = None
    error: BaseException | None = None
    reason: GenerateReason | None = None


# ``input.toolCalls`` / ``getMessages()`` answer with the Python attribute, and
# ``ActingInput(toolCalls=...)`` / ``with_(toolCalls=...)`` with the field it means.
for _record in (AgentInput, ReasoningInput, ActingInput, ModelCallInput, CompressContextInput,
                AgentFinishOutcome):
    install_java_names(_record)
    refuse_unknown_keywords(_record)
del _record
