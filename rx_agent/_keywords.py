"""Keyword construction that refuses what a class does not have.

``RequestStopEvent(generateReason=...)``, ``Msg(toolCalls=...)`` or
``RuntimeContext(userId=...)`` would otherwise be ignored (pydantic's default) or
fail with a bare "unexpected keyword" error. Here they raise a ``TypeError`` that
names the keyword and the closest real one: the snake_case name of a Java spelling
(as the builder's setters do), a per-class synonym (``CustomEvent(data=...)`` means
``value``), or a near spelling.

Only keyword construction checks. Reading stored JSON (``parse_event``,
``model_validate``, the session stores) stays tolerant, and the runtime's own
validation-free paths (``Record._fast``, ``AgentEvent.make``, the positional delta
builders) never come here.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

__all__ = [
    "java_candidates",
    "keyword_hint",
    "model_keywords",
    "refuse_unknown_keywords",
    "unknown_keyword_error",
]

_T = TypeVar("_T", bound=type)

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_ACCESSOR_PREFIXES = ("get", "set", "is", "has")


def _snake(name: str) -> str:
    return _CAMEL_BOUNDARY.sub("_", name).lower()


def java_candidates(name: str) -> list[str]:
    """The snake_case names a Java spelling may mean (``getUserId`` -> ``user_id``),
    most likely first; none for a name without capitals."""
    if name[:1] == "_" or not any(c.isupper() for c in name):
        return []
    full = _snake(name)
    for prefix in _ACCESSOR_PREFIXES:
        rest = name[len(prefix):]
        if name.startswith(prefix) and rest[:1].isupper():
            stripped = _snake(rest[0].lower() + rest[1:])
            # ``isStreaming`` may be ``is_streaming`` or ``streaming``; ``getUserId`` is
            # ``user_id`` (Python has no getters).
            return [full, stripped] if prefix in ("is", "has") else [stripped, full]
    return [full]


def model_keywords(cls: type) -> frozenset[str]:
    """The keywords a pydantic model's constructor takes: its field names and aliases."""
    names: set[str] = set()
    for name, info in getattr(cls, "__pydantic_fields__", {}).items():
        names.add(name)
        if info.alias:
            names.add(info.alias)
        choices = info.validation_alias
        if isinstance(choices, str):
            names.add(choices)
        elif choices is not None:  # AliasChoices / AliasPath
            for choice in getattr(choices, "choices", ()):
                if isinstance(choice, str):
                    names.add(choice)
    return frozenset(names)


def keyword_hint(cls: type, name: str, known: Collection[str]) -> tuple[str | None, str | None]:
    """``(the keyword name most likely means, the read-only attribute it named)``.

    In order: the snake_case of a Java / camelCase spelling, the class's synonyms
    (``__keyword_hints__``: ``{"data": "value"}``), a near spelling of a keyword.
    """
    synonyms: Mapping[str, str] = getattr(cls, "__keyword_hints__", {})
    candidates = [name, *java_candidates(name)]
    for candidate in candidates[1:]:
        if candidate in known:
            return candidate, None
    for candidate in candidates:
        if candidate in synonyms:
            readonly = candidate if candidate not in known and _is_attribute(cls, candidate) \
                else None
            return synonyms[candidate], readonly
    public = sorted(k for k in known if k != "type")
    close = difflib.get_close_matches(name, public, n=1, cutoff=0.75)
    if not close and candidates[1:]:
        close = difflib.get_close_matches(candidates[1], public, n=1, cutoff=0.75)
    return (close[0] if close else None), None


def _is_attribute(cls: type, name: str) -> bool:
    return inspect.getattr_static(cls, name, None) is not None


def unknown_keyword_error(
    cls: type, given: Collection[str], known: Collection[str], label: str | None = None
) -> TypeError:
    """The ``TypeError`` for the first keyword of ``given`` that ``known`` lacks."""
    name = next(k for k in given if k not in known)
    label = label or f"{cls.__name__}()"
    hint, readonly = keyword_hint(cls, name, known)
    text = f"{label} got an unexpected keyword argument {name!r}"
    if hint is None:
        accepted = ", ".join(sorted(k for k in known if k != "type"))
        return TypeError(f"{text} (it takes: {accepted})")
    text += f"; did you mean `{hint}`?"
    if readonly is not None:
        text += f" (`{readonly}` is read-only: it is derived from `{hint}`)"
    return TypeError(text)


def refuse_unknown_keywords(cls: _T) -> _T:
    """Make a dataclass's constructor (and ``with_``, which goes through it) name the
    closest field for a keyword it does not have. Positional calls pay one frame."""
    init: Callable[..., None] = cls.__init__  # type: ignore[misc]
    known = frozenset(f.name for f in dataclasses.fields(cls) if f.init)

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs and not kwargs.keys() <= known:
            raise unknown_keyword_error(cls, kwargs, known)
        init(self, *args, **kwargs)

    type.__setattr__(cls, "__init__", __init__)
    type.__setattr__(cls, "__init_keywords__", known)
    return cls
