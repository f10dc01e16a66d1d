"""Generation options passed to a model call."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ._keywords import refuse_unknown_keywords

__all__ = ["GenerateOptions", "ToolChoice"]

ToolChoice = str
"""``"auto"``, ``"none"``, ``"required"``, or the name of the one tool to call."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@refuse_unknown_keywords  # GenerateOptions(maxTokens=...) names ``max_tokens``
@dataclass(frozen=True, slots=True)
class GenerateOptions:
    """Sampling and tool-choice options for one model call (immutable).

    ``extra`` holds provider-specific keys sent as-is (e.g. ``{"seed": 7}``).
    ``response_schema`` (``{"name", "schema"}``) asks a model that supports it for JSON
    text in that schema (structured output); other models ignore it.
    """

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    tool_choice: ToolChoice | None = None
    stop: tuple[str, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    response_schema: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.temperature is not None and self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be > 0, got {self.max_tokens}")
        if self.stop is not None and not isinstance(self.stop, tuple):
            object.__setattr__(self, "stop", tuple(self.stop))
        if not isinstance(self.extra, MappingProxyType):
            object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    def with_(self, **changes: Any) -> GenerateOptions:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)

    def merged(self, other: GenerateOptions | None) -> GenerateOptions:
        """These options with every field ``other`` sets laid over them."""
        if other is None:
            return self
        changes: dict[str, Any] = {
            f.name: getattr(other, f.name)
            for f in dataclasses.fields(other)
            if f.name != "extra" and getattr(other, f.name) is not None
        }
        if other.extra:
            changes["extra"] = {**self.extra, **other.extra}
        return dataclasses.replace(self, **changes) if changes else self
