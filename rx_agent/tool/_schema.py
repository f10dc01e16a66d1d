"""Tool schemas from Python signatures: docstring parameter descriptions, names
pydantic would not keep as plain fields, and JSON schemas without titles."""

from __future__ import annotations

import inspect
import re
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["has_alias", "reserved", "split_docstring", "strip_titles", "type_name"]


def split_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary and the per-parameter descriptions of a Google/NumPy-ish docstring."""
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    params: dict[str, str] = {}
    match = re.search(r"^(Args|Arguments|Parameters|Params):\s*$", text, re.MULTILINE)
    if not match:
        return text.strip(), params
    summary = text[: match.start()].strip()
    current: str | None = None
    for line in text[match.end():].splitlines():
        if not line.strip():
            continue
        if not line.startswith((" ", "\t")) and line.rstrip().endswith(":"):
            break  # next section (Returns:, Raises:)
        item = re.match(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
        if item and (current is None or len(line) - len(line.lstrip()) <= 4):
            current = item.group(1).lstrip("*")
            params[current] = item.group(2).strip()
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return summary, params


def reserved(name: str) -> bool:
    """A name pydantic would not keep as a plain field: private (``_x``), its own
    namespace (``model_config``, ``model_x``) or a ``BaseModel`` attribute (``json``)."""
    return name.startswith(("_", "model_")) or hasattr(BaseModel, name)


def has_alias(annotation: Any, info: Any) -> bool:
    """Whether the user gave the field an alias (then it is the name the model sees)."""
    if isinstance(info, FieldInfo) and info.alias is not None:
        return True
    return get_origin(annotation) is Annotated and any(
        isinstance(m, FieldInfo) and m.alias is not None for m in get_args(annotation)[1:]
    )


def type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return f"{annotation.__module__}.{annotation.__qualname__}".removeprefix("builtins.")
    return repr(annotation)


def strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            k: strip_titles(v)
            for k, v in schema.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(schema, list):
        return [strip_titles(v) for v in schema]
    return schema


def validation_problems(exc: Any, root: str = "(arguments)", limit: int | None = None) -> str:
    """A pydantic ``ValidationError`` as ``"field.path: message; ..."`` for people and
    models to read (``root`` names an error of the whole value)."""
    errors = exc.errors()
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or root}: {e['msg']}"
        for e in (errors if limit is None else errors[:limit])
    )
