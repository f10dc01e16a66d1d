"""Which tool a code object belongs to, for naming a tool found on a stack (the
loop-lag watchdog samples the loop thread's frames; reading code objects needs no
access to another thread's locals)."""

from __future__ import annotations

import inspect
import weakref
from types import CodeType
from typing import Any

__all__ = ["remember_code", "tool_named_by"]

# Weak: a tool function that goes leaves nothing behind.
_CODES: weakref.WeakKeyDictionary[CodeType, str] = weakref.WeakKeyDictionary()


def remember_code(fn: Any, name: str) -> None:
    """Note that ``fn``'s code runs the tool ``name`` (once per tool made)."""
    target = inspect.unwrap(getattr(fn, "__func__", fn))
    code = getattr(target, "__code__", None)
    if code is None:  # a callable object: its class's __call__
        code = getattr(type(target).__call__, "__code__", None)
    if isinstance(code, CodeType):
        _CODES[code] = name


def tool_named_by(code: CodeType) -> str | None:
    """The name of the tool whose function runs ``code``, if one was made."""
    return _CODES.get(code)
