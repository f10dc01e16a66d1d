"""The pydantic base shared by messages, blocks and events.

Java constructors are positional (``new TextBlock("hi")``), and the pinned Python
names keep that shape (``TextBlock("hi")``, ``ToolUseBlock(id, name, input)``).
Pydantic models are keyword-only, so :class:`Record` maps positional arguments onto
the fields a class declares as positional, in declaration order.
"""

from __future__ import annotations

import inspect
import itertools
import os
import re
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from pydantic import BaseModel, ConfigDict

__all__ = [
    "Record",
    "install_java_names",
    "java_attribute_error",
    "java_name_hint",
    "model_getattr",
    "new_id",
    "now",
]

# Ids are a random per-process prefix plus a counter: unique across processes in
# practice and ~5x cheaper than uuid4 on the per-event path.
_PREFIX = os.urandom(6).hex()
_counter = itertools.count(1)


def new_id() -> str:
    """A short unique id (process prefix + counter)."""
    return f"{_PREFIX}{next(_counter):06x}"


now = time.time

# -- Java names ------------------------------------------------------------------------
# A Java user writes ``sysPrompt``, ``getUserId()`` or ``toolCalls``; the error should
# name the Python attribute. Pydantic models already route misses through their
# ``__getattr__`` (:func:`model_getattr` extends it). Other classes get the Java
# spellings of their public names installed as class-level descriptors that raise
# (:func:`install_java_names`): a ``__getattr__`` there would slow every attribute
# access of the class (CPython stops specializing them), a descriptor costs nothing.

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_ACCESSOR_PREFIXES = ("get", "set", "is", "has")
_ABSENT = object()


def _snake(name: str) -> str:
    return _CAMEL_BOUNDARY.sub("_", name).lower()


def _candidates(name: str) -> list[str]:
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


def _has(obj: object, name: str) -> bool:
    cls = obj if isinstance(obj, type) else type(obj)
    if inspect.getattr_static(cls, name, _ABSENT) is not _ABSENT:
        return True
    fields = getattr(cls, "model_fields", None) or getattr(cls, "__dataclass_fields__", None)
    if fields is not None and name in fields:
        return True
    return not isinstance(obj, type) and name in getattr(obj, "__dict__", ())


def java_name_hint(obj: object, name: str) -> str | None:
    """The snake_case attribute of ``obj`` a Java-style ``name`` most likely means."""
    for candidate in _candidates(name):
        if candidate != name and _has(obj, candidate):
            return candidate
    return None


def java_attribute_error(obj: object, name: str, hint: str | None = None) -> AttributeError:
    """The ``AttributeError`` for ``name``, suggesting the Python name (``hint``, or
    the one :func:`java_name_hint` finds)."""
    owner = obj.__name__ if isinstance(obj, type) else type(obj).__name__
    hint = hint or java_name_hint(obj, name)
    if hint is None:
        return AttributeError(f"{owner!r} object has no attribute {name!r}")
    note = ""
    if any(name.startswith(p) and name[len(p):][:1].isupper() for p in ("get", "is", "has")):
        cls = obj if isinstance(obj, type) else type(obj)
        found = inspect.getattr_static(cls, hint, None)
        if not (inspect.isfunction(found) or isinstance(found, (staticmethod, classmethod))):
            note = f" (an attribute: read `.{hint}`, without a call)"
    return AttributeError(f"{owner} has no attribute {name!r}; did you mean `{hint}`?{note}")


class _JavaName:
    # A Java spelling on a class: reading or assigning it raises, naming ``python``.
    # (No class docstring: each instance has its own ``__doc__``, shown by ``help()``.)

    __slots__ = ("__doc__", "java", "python")

    def __init__(self, java: str, python: str) -> None:
        self.java = java
        self.python = python
        self.__doc__ = f"Java spelling of ``{python}``: raises AttributeError naming it."

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        raise java_attribute_error(obj if obj is not None else owner, self.java, self.python)

    def __set__(self, obj: object, value: Any) -> None:
        # ``agent.maxIters = 5`` would otherwise create an attribute nobody reads.
        raise java_attribute_error(obj, self.java, self.python)


def _java_spellings(name: str, data: bool) -> list[str]:
    """``sys_prompt`` -> ``sysPrompt`` (and, for data, the getter ``getSysPrompt``)."""
    parts = name.split("_")
    if name[:1] == "_" or not all(parts):
        return []
    pascal = "".join(p[:1].upper() + p[1:] for p in parts)
    out = [f"get{pascal}"] if data else []
    if len(parts) > 1:
        out.insert(0, parts[0] + pascal[len(parts[0]):])
    return out


_T = TypeVar("_T", bound=type)


def install_java_names(cls: _T, attributes: Iterable[str] = ()) -> _T:
    """Give ``cls`` the Java spellings (``sysPrompt``; ``getSysPrompt`` for data) of its
    public names plus ``attributes`` (instance attributes the class body does not
    show); each raises an ``AttributeError`` naming the Python name."""
    data = set(attributes) | set(getattr(cls, "__dataclass_fields__", None) or ())
    names = set(data)
    for klass in cls.__mro__[:-1]:  # not object
        names.update(n for n in vars(klass) if not n.startswith("_"))
    installed = []
    for name in sorted(names):
        is_data = name in data or not callable(inspect.getattr_static(cls, name, None))
        for java in _java_spellings(name, is_data):
            if inspect.getattr_static(cls, java, _ABSENT) is _ABSENT:
                setattr(cls, java, _JavaName(java, name))
                installed.append(java)
    hidden = frozenset(installed) | frozenset(getattr(cls, "_java_names", ()))
    type.__setattr__(cls, "_java_names", hidden)
    if "__dir__" not in vars(cls):
        type.__setattr__(cls, "__dir__", _dir_without_java_names)
    return cls


def _dir_without_java_names(self: object) -> list[str]:
    hidden: frozenset[str] = getattr(type(self), "_java_names", frozenset())
    return [n for n in object.__dir__(self) if n not in hidden]


if TYPE_CHECKING:

    def _pydantic_getattr(self: BaseModel, name: str) -> Any: ...

else:
    _pydantic_getattr = BaseModel.__getattr__


def model_getattr(self: BaseModel, name: str) -> Any:
    """``__getattr__`` for pydantic models: pydantic's own, plus the Java-name hint."""
    try:
        return _pydantic_getattr(self, name)
    except AttributeError:
        if name[:1] == "_" or name.islower():
            raise
        raise java_attribute_error(self, name) from None



class Record(BaseModel):
    """A pydantic model that also accepts its leading fields positionally."""

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True)

    # Names accepted positionally, in order. Subclasses set it, or it defaults to
    # the fields the class itself adds (``type`` excluded).
    __positional__: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args:
            names = type(self).__positional__
            if len(args) > len(names):
                raise TypeError(
                    f"{type(self).__name__}() takes at most {len(names)} positional "
                    f"argument(s) ({', '.join(names) or 'none'}), got {len(args)}"
                )
            for name, value in zip(names, args, strict=False):
                if name in kwargs:
                    raise TypeError(
                        f"{type(self).__name__}() got multiple values for argument {name!r}"
                    )
                kwargs[name] = value
        super().__init__(**kwargs)

    if not TYPE_CHECKING:  # hidden from type checkers: unknown names stay type errors
        __getattr__ = model_getattr

    @classmethod
    def _fast(cls, values: dict[str, Any]) -> Self:
        """Build an instance from already-valid internal values, skipping validation.

        Used only on the runtime's hot paths with values the runtime itself produced;
        ``values`` must hold every field. User-facing construction always validates.
        With ``RX_AGENT_CHECK_RECORDS=1`` (the test suite sets it) the keys are checked.
        """
        if CHECK_RECORDS:
            check_fields(cls, values, exact=True)
        obj = _new(cls)
        _set(obj, "__dict__", values)
        # Every field is set, so one "fields set" per class is exact and can be shared
        # (pydantic only ever adds names that are already in it).
        fields = _ALL_FIELDS.get(cls)
        if fields is None:
            fields = _ALL_FIELDS[cls] = set(cls.model_fields)
        _set(obj, "__pydantic_fields_set__", fields)
        _set(obj, "__pydantic_extra__", None)
        _set(obj, "__pydantic_private__", None)
        return obj


_new = object.__new__
_set = object.__setattr__
_ALL_FIELDS: dict[type, set[str]] = {}

# Validation-free construction trusts the runtime's keys; the test suite checks them
# (one global flag per construction otherwise).
CHECK_RECORDS = os.environ.get("RX_AGENT_CHECK_RECORDS", "") not in ("", "0")


def check_fields(cls: type[BaseModel], values: dict[str, Any], *, exact: bool) -> None:
    """Raise ``TypeError`` when ``values`` names a field ``cls`` does not have (or, with
    ``exact``, misses one)."""
    fields = cls.model_fields
    unknown = sorted(k for k in values if k not in fields)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
    if exact:
        missing = sorted(k for k in fields if k not in values)
        if missing:
            raise TypeError(f"{cls.__name__}._fast() is missing {', '.join(missing)}")
