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
import inspect
import re
from collections.abc import Collection, Mapping
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
    """Give a frozen dataclass a constructor (and so ``with_``, which goes through it)
    that names the closest field for a keyword it does not have.

    The constructor is generated like the dataclass's own (same parameters, defaults,
    ``object.__setattr__`` per field, then ``__post_init__``) plus a ``**`` catch-all
    that raises: the runtime's positional constructions pay no extra call."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    known = frozenset(f.name for f in fields)
    params_ = getattr(cls, "__dataclass_params__")  # noqa: B009 (not on type for mypy)
    if any(f.kw_only for f in fields) or not params_.frozen:
        raise TypeError(f"{cls.__name__}: only frozen dataclasses without kw_only fields")
    scope: dict[str, Any] = {"_cls": cls, "_known": known, "_error": unknown_keyword_error,
                             "_set": object.__setattr__, "_FACTORY": _FACTORY}
    params, required = [], []
    body = ["    if _unknown:", "        raise _error(_cls, _unknown, _known)"]
    for f in fields:
        if f.default is not dataclasses.MISSING:
            scope[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            body.append(f"    if {f.name} is _FACTORY: {f.name} = _f_{f.name}()")
        else:  # required: checked after the keywords, so ``toolCalls=`` is named first
            params.append(f"{f.name}=_FACTORY")
            required.append(f.name)
    if required:
        scope["_missing"] = _missing_error
        given = " or ".join(f"{n} is _FACTORY" for n in required)
        body.append(f"    if {given}:")
        body.append(f"        raise _missing(_cls, {required!r}, ({', '.join(required)},))")
    body += [f"    _set(self, {f.name!r}, {f.name})" for f in fields]
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join([*params, '**_unknown'])}):\n" + "\n".join(body)
    exec(source, scope)  # the dataclass module builds its __init__ the same way
    init = scope["__init__"]
    original = cls.__init__  # type: ignore[misc]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__signature__ = inspect.signature(original)  # help() shows the real parameters
    init.__doc__ = original.__doc__
    type.__setattr__(cls, "__init__", init)
    type.__setattr__(cls, "__init_keywords__", known)
    return cls


_FACTORY = object()  # "not given": use the default factory, or a required one is missing


def _missing_error(cls: type, names: list[str], values: tuple[Any, ...]) -> TypeError:
    missing = [n for n, v in zip(names, values, strict=True) if v is _FACTORY]
    listed = ", ".join(repr(n) for n in missing)
    return TypeError(f"{cls.__name__}.__init__() missing {len(missing)} required "
                     f"argument{'s' if len(missing) > 1 else ''}: {listed}")
