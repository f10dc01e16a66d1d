"""The pydantic base shared by messages, blocks and events.

Java constructors are positional (``new TextBlock("hi")``), and the pinned Python
names keep that shape (``TextBlock("hi")``, ``ToolUseBlock(id, name, input)``).
Pydantic models are keyword-only, so :class:`Record` maps positional arguments onto
the fields a class declares as positional, in declaration order.
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

__all__ = ["Record", "new_id", "now"]

# Ids are a random per-process prefix plus a counter: unique across processes in
# practice and ~5x cheaper than uuid4 on the per-event path.
_PREFIX = os.urandom(6).hex()
_counter = itertools.count(1)


def new_id() -> str:
    """A short unique id (process prefix + counter)."""
    return f"{_PREFIX}{next(_counter):06x}"


now = time.time


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

    @classmethod
    def _fast(cls, values: dict[str, Any]) -> Any:
        """Build an instance from already-valid internal values, skipping validation.

        Used only on the runtime's hot paths with values the runtime itself produced;
        ``values`` must hold every field. User-facing construction always validates.
        """
        obj = _new(cls)
        _set(obj, "__dict__", values)
        _set(obj, "__pydantic_fields_set__", set(values))
        _set(obj, "__pydantic_extra__", None)
        _set(obj, "__pydantic_private__", None)
        return obj


_new = object.__new__
_set = object.__setattr__
