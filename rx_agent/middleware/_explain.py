"""Messages for a hook's mistakes found while a call runs, each naming the fix.

Built only on the error path: nothing here runs per event or per call.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import linecache
import re
from collections.abc import Sequence
from types import FrameType, TracebackType
from typing import Any, TypeVar

from reactivex import Observable

from ..message import Msg

__all__ = ["field_call", "not_an_event"]


def not_an_event(point: str, labels: Sequence[str], item: Any) -> TypeError:
    """A hook stream at ``point`` (its name) carried ``item``, which is not an
    ``AgentEvent``; ``labels`` are the middlewares whose hook at ``point`` could have
    emitted it."""
    hooks = [f"{label}.{point}()" for label in labels]
    if not hooks:
        who = "the runtime"
    elif len(hooks) == 1:
        who = hooks[0]
    else:
        who = "one of " + ", ".join(hooks)
    text = f"{who} emitted {type(item).__name__} {item!r:.80}, not an AgentEvent, into the " \
           f"{point} stream"
    hint = _hint(item)
    return TypeError(f"{text} ({hint})" if hint else text)


def _hint(item: Any) -> str | None:
    if type(item) is int:
        return ("a port of Mono.delay(...).thenMany(...) emits the timer's 0: drop it with "
                "ops.ignore_elements() or use ops.flat_map")
    if isinstance(item, Observable):
        return ("a stream inside the stream: to splice one in per event, use ops.flat_map "
                "or ops.concat_map instead of ops.map")
    if isinstance(item, Msg):
        return ("the reply's message is not an event: the runtime emits it itself, in "
                "AgentResultEvent; emit events such as TextBlockDeltaEvent to add text")
    return None


_E = TypeVar("_E", bound=BaseException)
_NOT_CALLABLE = re.compile(r"'(\w+)' object is not callable")


def field_call(exc: _E, where: str | None = None) -> _E | TypeError:
    """``exc`` itself, or, when it is Python's "'tuple' object is not callable" raised
    by a call like ``input.messages()`` (a Java record accessor) on an attribute that
    holds a value, a ``TypeError`` that says to drop the parentheses (``where``, say
    ``Audit.on_reasoning()``, prefixes it). Reads the failing frame's source position;
    only ever called on an error path."""
    if type(exc) is not TypeError or not exc.args:
        return exc
    found = _NOT_CALLABLE.fullmatch(str(exc.args[0]))
    tb = exc.__traceback__
    if found is None or tb is None:
        return exc
    while tb.tb_next is not None:
        tb = tb.tb_next
    try:
        fix = _accessor_fix(tb, found.group(1))
    except Exception:  # the source is not readable, or not what it seems: leave it
        return exc
    if fix is None:
        return exc
    better = TypeError(f"{where}: {fix}" if where else fix)
    better.__cause__ = exc
    return better.with_traceback(exc.__traceback__)


def _accessor_fix(tb: TracebackType, type_name: str) -> str | None:
    frame = tb.tb_frame
    positions = list(frame.f_code.co_positions())
    line, end_line, col, end_col = positions[tb.tb_lasti // 2]
    if line is None or end_line is None or col is None or end_col is None:
        return None
    source = _segment(frame.f_code.co_filename, line, end_line, col, end_col)
    call = ast.parse(source.strip(), mode="eval").body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and not call.args and not call.keywords):
        return None
    owner = _value(call.func.value, frame)
    name = call.func.attr
    value = getattr(owner, name)
    if callable(value) or type(value).__name__ != type_name:
        return None
    cls = type(owner)
    fields: Any = getattr(cls, "model_fields", None) or getattr(cls, "__dataclass_fields__", ())
    kind = "a field" if name in fields or dataclasses.is_dataclass(owner) else "an attribute"
    text = ast.unparse(call.func)
    article = "an" if type_name[:1] in "aeiouAEIOU" else "a"
    held = (f"{article} {type_name}" if type_name != "HistoryView"
            else "a read-only sequence of messages")  # the runtime's snapshot of the context
    return (f"{name} is {kind}: write {text}, without the parentheses of Java's record "
            f"accessor ({cls.__name__}.{name} holds {held}, which cannot be called)")


def _segment(filename: str, line: int, end_line: int, col: int, end_col: int) -> str:
    """The source text between two positions (columns are UTF-8 byte offsets)."""
    lines = [linecache.getline(filename, n).encode() for n in range(line, end_line + 1)]
    if len(lines) == 1:
        return lines[0][col:end_col].decode()
    lines[0], lines[-1] = lines[0][col:], lines[-1][:end_col]
    return b"".join(lines).decode()


def _value(node: ast.expr, frame: FrameType) -> Any:
    """What a name or a dotted name means in ``frame`` (nothing else is evaluated)."""
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals, vars(builtins)):
            if node.id in scope:
                return scope[node.id]
        raise LookupError(node.id)
    if isinstance(node, ast.Attribute):
        return getattr(_value(node.value, frame), node.attr)
    raise LookupError(ast.dump(node))
