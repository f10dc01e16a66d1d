"""Text that can be stored and serialized: no lone UTF-16 surrogates.

A lone surrogate (``"\\ud800"``) is a valid Python ``str`` but not valid UTF-8, so a
message holding one breaks every later JSON dump of the session. Input from the
caller is refused (:func:`check_text`); text from models and tools, which the caller
does not control, is repaired (:func:`scrub`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_text", "check_value", "is_clean", "lone_surrogate_at", "scrub"]


def lone_surrogate_at(text: str) -> int:
    """Index of the first lone surrogate in ``text``, or -1."""
    if text.isascii():  # the common case, checked in C
        return -1
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return -1


def scrub(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (paired ones are joined)."""
    if lone_surrogate_at(text) < 0:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def check_text(text: str, where: str) -> None:
    """Raise ``ValueError`` naming ``where`` when ``text`` holds a lone surrogate."""
    at = lone_surrogate_at(text)
    if at >= 0:
        raise ValueError(
            f"{where} holds a lone UTF-16 surrogate {text[at]!r} at index {at}; "
            "it cannot be stored or sent as UTF-8 (decode the source with "
            "errors='replace' or encode with 'surrogatepass' first)"
        )


# Whether a class is a pydantic model, per class: pydantic's ``model_fields`` is a
# property that costs far more than a dict lookup, and this runs per input message.
_RECORD_TYPES: dict[type, bool] = {}


def _is_record(cls: type) -> bool:
    known = _RECORD_TYPES.get(cls)
    if known is None:
        known = _RECORD_TYPES[cls] = hasattr(cls, "model_fields")
    return known


def check_value(value: object, where: str) -> None:
    """:func:`check_text` over every string inside ``value`` (records, dicts, lists)."""
    if not is_clean(value):
        _check_value(value, where)


def is_clean(value: object) -> bool:
    """Whether no string inside ``value`` holds a lone surrogate: one walk without a
    call or a label per item (the labelled walk runs only to name a bad one)."""
    stack: list[Any] = [value]
    pop, push, extend, kinds = stack.pop, stack.append, stack.extend, _KINDS
    budget = _BUDGET
    while stack:
        budget -= 1
        if not budget:
            # No visited set (it would cost every call): a value this large, or one
            # that contains itself, gets the labelled walk, which raises
            # RecursionError on a cycle as it always did.
            return False
        item = pop()
        kind = kinds.get(type(item))
        if kind is None:
            kind = _kind(type(item))
        if kind == _STR:
            if not item.isascii() and lone_surrogate_at(item) >= 0:
                return False
        elif kind == _RECORD:
            for v in item.__dict__.values():
                if v is not None:
                    push(v)
        elif kind == _SEQ:
            extend(item)
        elif kind == _DICT:
            extend(item)
            extend(item.values())
    return True


_BUDGET = 100_000  # items one walk looks at before it hands over to the labelled walk

# What the walk does per class (found once per class): nothing, a text check, the
# items of a list or tuple, the keys and values of a dict, the fields of a record.
_SKIP, _STR, _SEQ, _DICT, _RECORD = range(5)
_KINDS: dict[type, int] = {type(None): _SKIP, int: _SKIP, float: _SKIP, bool: _SKIP,
                           str: _STR, list: _SEQ, tuple: _SEQ, dict: _DICT}


def _kind(cls: type) -> int:
    if issubclass(cls, str):
        kind = _STR
    elif issubclass(cls, dict):
        kind = _DICT
    elif issubclass(cls, (list, tuple)):
        kind = _SEQ
    elif issubclass(cls, (int, float)):
        kind = _SKIP
    elif _is_record(cls):
        kind = _RECORD
    else:
        kind = _SKIP
    _KINDS[cls] = kind
    return kind


def _check_value(value: object, where: str) -> None:
    if isinstance(value, str):
        check_text(value, where)
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_value(k, where)
            _check_value(v, f"{where}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_value(v, f"{where}[{i}]")
    else:
        fields = getattr(value, "__dict__", None)
        if fields is not None and _is_record(type(value)):
            for name, v in fields.items():
                if v is not None and not isinstance(v, (int, float)):
                    _check_value(v, f"{where}.{name}")
