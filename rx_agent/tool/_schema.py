"""Tool schemas from Python signatures: the fields of a function's parameters (and
the error naming one without a JSON schema), docstring parameter descriptions, names
pydantic would not keep as plain fields, JSON schemas without titles, and what a
definition lacks for the model (type hints, a description, a default of the hinted
type)."""

from __future__ import annotations

import inspect
import os
import re
import sys
import warnings
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ..context import RuntimeContext

__all__ = [
    "ToolDefinitionWarning",
    "argument_fields",
    "check_default",
    "definition_problems",
    "has_alias",
    "reserved",
    "schema_error",
    "split_docstring",
    "strip_titles",
    "type_name",
    "warn_definition",
]


class ToolDefinitionWarning(UserWarning):
    """A tool registered without what the model needs to call it well: type hints, a
    description, defaults of the hinted types. Filter it with
    ``warnings.filterwarnings("ignore", category=ToolDefinitionWarning)``."""


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


_LENIENT = ConfigDict(arbitrary_types_allowed=True)


def definition_problems(
    tool: str, description: str, parameters: list[tuple[str, bool, Any, Any]]
) -> list[str]:
    """What the model will miss of a tool (warned when a toolkit registers it), from
    its description and its ``(name, hinted, annotation, default)`` parameters; a
    default its hint refuses raises ``TypeError``."""
    problems = []
    unhinted = [name for name, hinted, _, _ in parameters if not hinted]
    if unhinted:
        many = len(unhinted) > 1
        problems.append(
            f"{'parameters' if many else 'parameter'} {', '.join(map(repr, unhinted))} "
            f"{'have' if many else 'has'} no type hint, so the model is told nothing of "
            f"{'their types' if many else 'its type'} and any JSON value passes: annotate "
            f"{'them' if many else 'it'} (`{unhinted[0]}: str`, say)")
    if not description.strip():
        problems.append("it has no description (no docstring), so the model knows it by "
                        "its name alone: write a docstring, or pass description=...")
    for name, _, annotation, default in parameters:
        value = default.default if isinstance(default, FieldInfo) else default
        note = check_default(tool, name, annotation, value)
        if note is not None:
            problems.append(note)
    return problems


def check_default(tool: str, name: str, annotation: Any, default: Any) -> str | None:
    """What is wrong with ``default`` for ``annotation``: ``None`` when it is of the
    hinted type, a note when the hint accepts it only by conversion (or it is ``None``
    under a hint without ``None``); a default the hint refuses raises ``TypeError``."""
    if default is PydanticUndefined or default is Ellipsis or annotation is Any:
        return None
    if isinstance(annotation, type) and type(default) is annotation:
        return None  # the usual case, without building a validator
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation, config=_LENIENT)
    except Exception:  # a hint pydantic cannot check by itself (the schema step says so)
        return None
    shown = f"{default!r:.60}"
    try:
        adapter.validate_python(default, strict=True)
        return None
    except ValidationError:
        pass
    try:
        adapter.validate_python(default)
    except ValidationError as exc:
        if default is None:
            return (f"parameter {name!r} defaults to None, which its hint "
                    f"{type_name(annotation)} does not allow: write "
                    f"`{name}: {type_name(annotation)} | None = None`")
        raise TypeError(
            f"tool {tool!r}: parameter {name!r} defaults to {shown}, which its hint "
            f"{type_name(annotation)} refuses ({validation_problems(exc, 'default', 1)}); "
            "give a default of the hinted type"
        ) from None
    return (f"parameter {name!r} defaults to {shown} ({type(default).__name__}), which its "
            f"hint {type_name(annotation)} accepts only by conversion (the function gets "
            f"{shown} itself when the model leaves it out)")


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def warn_definition(tool: str, problems: list[str]) -> None:
    """One :class:`ToolDefinitionWarning` naming the tool and what it lacks, pointing at
    the first frame outside rx_agent (the user's registration)."""
    if not problems:
        return
    level, frame = 1, sys._getframe(0)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back  # type: ignore[assignment]
    warnings.warn(f"tool {tool!r}: " + "; ".join(problems), ToolDefinitionWarning,
                  stacklevel=level)


def schema_error(
    tool: str, fields: dict[str, Any], names: dict[str, str], error: Exception
) -> TypeError:
    """Name the parameter whose type hint has no JSON schema (found by trying each
    field alone; only on this error path)."""
    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    for field, spec in fields.items():
        try:
            create_model(
                "probe",
                __config__=ConfigDict(arbitrary_types_allowed=True),
                **{field: spec},
            ).model_json_schema()
        except Exception as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return TypeError(
                f"tool {tool!r}: parameter {names[field]!r} has a type hint with no "
                f"JSON schema ({type_name(spec[0])}): {reason}. Use a JSON-compatible "
                "type (str, int, float, bool, list, dict, a pydantic model...)"
            )
    return TypeError(f"cannot build the JSON schema of tool {tool!r}: {reason}")


def argument_fields(
    tool: str, fn: Callable[..., Any], docs: dict[str, str]
) -> tuple[dict[str, Any], list[tuple[str, str]], list[str], list[str],
           list[tuple[str, bool, Any, Any]]]:
    """The pydantic fields of the parameters the model fills, from ``fn``'s signature
    and hints (``docs``: the docstring's parameter descriptions): the fields, their
    ``(field name, parameter name)`` pairs, the :class:`RuntimeContext` parameters
    (injected, hidden from the model), the positional-only ones, and what
    :func:`definition_problems` checks.

    Names pydantic would drop or misread (``_x``, ``model_config``, ``json``...) get an
    internal field name and keep their own name as the alias, which is what the schema
    and validation use.
    """
    sig = inspect.signature(fn)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # unresolved forward refs: say which tool
        raise TypeError(f"cannot read the type hints of tool {tool!r}: {exc}") from exc
    fields: dict[str, Any] = {}
    names: list[tuple[str, str]] = []  # (field name, parameter name)
    ctx_params: list[str] = []
    positional: list[str] = []
    checked: list[tuple[str, bool, Any, Any]] = []  # what the model will miss
    for index, (pname, param) in enumerate(sig.parameters.items()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            positional.append(pname)
        annotation = hints.get(pname, Any)
        if annotation is RuntimeContext or annotation == RuntimeContext | None:
            ctx_params.append(pname)
            continue
        default = ... if param.default is param.empty else param.default
        checked.append((pname, pname in hints, annotation, default))
        info: Any
        if isinstance(default, FieldInfo):
            if default.description is None and pname in docs:
                default.description = docs[pname]
            info = default
        elif pname in docs:
            info = Field(default, description=docs[pname])
        else:
            # Plain default: an Annotated[..., Field(...)] keeps its own metadata.
            info = default
        field = pname
        if reserved(pname):
            field = f"arg_{index}"
            while field in sig.parameters:
                field += "_"
            if not has_alias(annotation, info):
                alias = Field(alias=pname)
                info = (FieldInfo.merge_field_infos(info, alias)
                        if isinstance(info, FieldInfo) else Field(info, alias=pname))
        fields[field] = (annotation, info)
        names.append((field, pname))
    return fields, names, ctx_params, positional, checked
