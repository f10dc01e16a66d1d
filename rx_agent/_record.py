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
import random
import time
from collections.abc import Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict

from ._keywords import java_candidates, model_keywords, unknown_keyword_error

__all__ = [
    "STAMPS",
    "Record",
    "Stamps",
    "install_java_names",
    "java_attribute_error",
    "java_name_hint",
    "jitter",
    "model_getattr",
    "new_id",
    "now",
]

# Ids are a random per-process prefix plus a counter: unique across processes in
# practice and ~5x cheaper than uuid4 on the per-event path.
_PREFIX = os.urandom(6).hex()
_counter = itertools.count(1)


class Stamps(Protocol):
    """Where ids, timestamps and random draws come from instead (a durable workflow's own: they must
    be the same when its history is replayed)."""

    def new_id(self) -> str: ...

    def now(self) -> float: ...

    def random(self) -> float: ...


STAMPS: ContextVar[Stamps | None] = ContextVar("rx_agent_stamps", default=None)
"""Set by code that runs a call where ids and the clock must replay (``rx_agent.temporal``);
unset, ids are the process prefix and a counter and the clock is ``time.time``."""

_stamps = STAMPS.get


def new_id() -> str:
    """A short unique id (process prefix + counter, or the :data:`STAMPS` in effect)."""
    stamps = _stamps()
    if stamps is None:
        return f"{_PREFIX}{next(_counter):06x}"
    return stamps.new_id()


def now() -> float:
    """Seconds since the epoch (``time.time``, or the :data:`STAMPS` in effect)."""
    stamps = _stamps()
    return _time() if stamps is None else stamps.now()


def jitter() -> float:
    """A random float in [0, 1) (``random.random``, or the :data:`STAMPS` in effect)."""
    stamps = _stamps()
    return _random() if stamps is None else stamps.random()


_time = time.time
_random = random.random

# -- Java names ------------------------------------------------------------------------
# A Java user writes ``sysPrompt``, ``getUserId()`` or ``toolCalls``; the error should
# name the Python attribute. Pydantic models already route misses through their
# ``__getattr__`` (:func:`model_getattr` extends it). Other classes get the Java
# spellings of their public names installed as class-level descriptors that raise
# (:func:`install_java_names`): a ``__getattr__`` there would slow every attribute
# access of the class (CPython stops specializing them), a descriptor costs nothing.

_ABSENT = object()


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
    for candidate in java_candidates(name):
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
    """A pydantic model that also accepts its leading fields positionally.

    Keyword construction refuses a keyword the class does not have, naming the closest
    one (``TypeError``); validating data (``model_validate``, JSON) ignores unknown
    fields, so records written by a newer version still load.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True)

    # Names accepted positionally, in order. Subclasses set it, or it defaults to
    # the fields the class itself adds (``type`` excluded).
    __positional__: ClassVar[tuple[str, ...]] = ()
    # The keywords the constructor takes (fields and their aliases), per class.
    __keywords__: ClassVar[frozenset[str]] = frozenset()
    # A keyword that is not a field -> the field it most likely means (did-you-mean).
    __keyword_hints__: ClassVar[dict[str, str]] = {}
    # Whether fields read from a newer version's JSON are kept (``StoredRecord``).
    __keeps_unknown__: ClassVar[bool] = False

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.__keywords__ = model_keywords(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Only the caller's keywords: positional names are fields by construction.
        if kwargs and not kwargs.keys() <= type(self).__keywords__:
            raise unknown_keyword_error(type(self), kwargs, type(self).__keywords__)
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

    # Pydantic calls a model's own ``__init__`` when it validates data too (nested
    # records, JSON); marked as the base one, this stays the caller's constructor only,
    # so stored JSON with a newer version's fields still loads (they are dropped).
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

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
        _set(obj, "__pydantic_extra__", {} if cls.__keeps_unknown__ else None)
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


class StoredRecord(Record):
    """A record a session store keeps (the state, its pending calls and remembered
    rules, messages and their blocks): fields read from a newer version's JSON are
    kept (``model_extra``) and written back when the record is saved again, so an
    older worker in a rolling upgrade does not erase them. Constructors and attribute
    assignment still refuse unknown names.
    """

    model_config = ConfigDict(extra="allow")
    __keeps_unknown__ = True

    if not TYPE_CHECKING:

        def __setattr__(self, name: str, value: Any) -> None:
            # With ``extra="allow"`` pydantic would store any name; a typo must fail.
            if name not in type(self).__pydantic_fields__ and name[:1] != "_":
                hint = java_name_hint(self, name)
                raise ValueError(f'"{type(self).__name__}" object has no field "{name}"'
                                 + (f"; did you mean `{hint}`?" if hint else ""))
            super().__setattr__(name, value)
