"""The base of every event: ids, timestamps, the emitting agent, and the runtime's
validation-free constructor (:meth:`AgentEvent.make`)."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import Field

from ._record import CHECK_RECORDS, Record, check_fields, new_id, now

__all__ = ["AgentEvent"]

_new = object.__new__
_set = object.__setattr__
_BASE_FIELDS = frozenset({"id", "created_at", "source", "metadata", "type"})


class AgentEvent(Record):
    """Base of every event. ``type`` names the concrete class in JSON."""

    type: str
    id: str = Field(default_factory=new_id)
    created_at: float = Field(default_factory=now)
    source: str | None = Field(default=None, description="Name of the emitting agent.")
    metadata: dict[str, Any] = Field(default_factory=dict)

    # Default values of the concrete class, for the runtime's validation-free path.
    _defaults: ClassVar[dict[str, Any]] = {}
    _all_fields: ClassVar[set[str]] = set()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "__positional__" not in cls.__dict__:
            cls.__positional__ = tuple(n for n in cls.model_fields if n not in _BASE_FIELDS)
        # Every field in declaration order (the order validation produces), with its
        # default; the runtime fills the rest, so dumps look the same either way.
        cls._defaults = {
            name: None if f.is_required() or f.default_factory is not None else f.default
            for name, f in cls.model_fields.items()
        }
        # Every field is set on a runtime-built event, so one shared "fields set" per
        # class is exact (pydantic only ever adds names that are already in it).
        cls._all_fields = set(cls.model_fields)

    @classmethod
    def make(cls, source: str | None = None, /, **values: Any) -> Self:
        """Build an event from runtime-produced values without validation (hot path).

        With ``RX_AGENT_CHECK_RECORDS=1`` (the test suite sets it) every key is checked
        against the class's fields."""
        if CHECK_RECORDS:
            check_fields(cls, values, exact=False)
        obj = _new(cls)
        data = cls._defaults.copy()
        data["id"] = new_id()
        data["created_at"] = now()
        data["source"] = source
        data["metadata"] = {}
        data.update(values)
        _set(obj, "__dict__", data)
        _set(obj, "__pydantic_fields_set__", cls._all_fields)
        _set(obj, "__pydantic_extra__", None)
        _set(obj, "__pydantic_private__", None)
        return obj
