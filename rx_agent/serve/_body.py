"""Reading request bodies: the size limit, JSON, and the records each endpoint takes."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request

from ..event import ExternalExecutionResultEvent, UserConfirmResultEvent
from ..message import Msg, Role
from ..tool._schema import validation_problems
from ._errors import HTTPError

__all__ = [
    "DEFAULT_MAX_BODY",
    "check_session_id",
    "read_json",
    "read_messages",
    "read_note",
    "read_resume",
]

DEFAULT_MAX_BODY = 1 << 20
"""Bytes a request body may hold (1 MiB) unless ``create_app(max_body=...)`` says."""

# "/" is never part of an id: the server's own lease keys use it (see _guard).
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@~-]{0,127}")


def check_session_id(session_id: str) -> str:
    if not _SESSION_ID.fullmatch(session_id):
        raise HTTPError(400, "bad_session_id",
                        f"session id {session_id[:140]!r} is not valid: 1 to 128 characters "
                        "of letters, digits and . _ : @ ~ -, starting with a letter or digit")
    return session_id


async def _read_bytes(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise HTTPError(400, "bad_content_length", "Content-Length is not a number")
        if int(declared) > limit:
            raise HTTPError(413, "body_too_large",
                            f"the request body has {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():  # a chunked body has no Content-Length
        size += len(chunk)
        if size > limit:
            raise HTTPError(413, "body_too_large",
                            f"the request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limit: int, *, optional: bool = False) -> Any:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = await _read_bytes(request, limit)
    if not raw.strip():
        if optional:
            return {}
        raise HTTPError(400, "empty_body", "the request needs a JSON body")
    if kind and kind != "application/json" and not kind.endswith("+json"):
        raise HTTPError(415, "unsupported_media_type",
                        f"the body must be application/json, not {kind!r}")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HTTPError(400, "bad_json", f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise HTTPError(400, "bad_json", "the body's JSON is nested too deeply (at most "
                        f"{MAX_DEPTH} levels)") from None
    except ValueError as exc:  # an integer of more digits than int() converts
        raise HTTPError(400, "bad_json", "the body's JSON has an integer with too many "
                        f"digits: {str(exc).split(';')[0].lower()}") from None
    _check_tree(data)
    return data


MAX_DEPTH = 100
"""How deeply arrays and objects may nest in a request body."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_tree(data: Any) -> None:
    """Refuse what JSON allows but the rest of the server cannot hold: nesting deeper
    than ``MAX_DEPTH`` and strings with a lone UTF-16 surrogate (``"\\ud800"``, which
    no UTF-8 text, so no model or store, can carry)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, str):
            found = _SURROGATE.search(value)
            if found is not None:
                raise HTTPError(400, "bad_json",
                                f"the string at {where or '(root)'} has a lone surrogate "
                                f"({found.group().encode('unicode_escape').decode()}); JSON "
                                "text must be valid Unicode (pair it or drop it)")
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth >= MAX_DEPTH:
            raise HTTPError(400, "bad_json", f"the body's JSON is nested too deeply at "
                            f"{where}: at most {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                path = f"{where}.{key}" if where else str(key)
                stack.append((key, f"{where or '(root)'} (a key)", depth + 1))
                stack.append((item, path, depth + 1))
        else:
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))


def _object(data: Any, allowed: set[str], what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise HTTPError(400, "bad_body", f"{what} must be a JSON object, not {_kind(data)}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise HTTPError(400, "unknown_field",
                        f"{what} has unknown field(s) {', '.join(map(repr, unknown))}; "
                        f"expected {', '.join(map(repr, sorted(allowed)))}")
    return data


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _problems(exc: ValidationError) -> str:
    return validation_problems(exc, "(root)", limit=3)


# Blocks only the agent writes. A posted tool result would answer no call the model
# made (OpenAI then refuses every later request of the session), a posted tool call
# would wait forever for its result, and posted thinking would pass for the model's own.
_AGENTS_BLOCKS = {
    "tool_use": "tool calls are the model's; a paused call is answered at .../confirm",
    "tool_result": "tool results answer the model's calls: post them to "
                   ".../external-results when the reply waits for them",
    "thinking": "thinking is the model's own reasoning",
}
_CLIENTS_BLOCKS = ("text", "data", "hint")


def read_messages(data: Any) -> list[Msg]:
    """``{"message": "text"}`` or ``{"messages": [<Msg JSON>, ...]}`` (user messages)."""
    body = _object(data, {"message", "messages"}, "the body")
    if ("message" in body) == ("messages" in body):
        raise HTTPError(400, "bad_body",
                        'the body needs exactly one of "message" (text) or "messages" '
                        "(a list of Msg JSON)")
    if "message" in body:
        text = body["message"]
        if not isinstance(text, str) or not text.strip():
            raise HTTPError(400, "bad_body", '"message" must be a non-empty string')
        return [Msg(Role.USER, text)]
    items = body["messages"]
    if not isinstance(items, list) or not items:
        raise HTTPError(400, "bad_body", '"messages" must be a non-empty list of Msg JSON')
    out: list[Msg] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise HTTPError(400, "bad_message", f"messages[{i}] must be an object")
        # Ids are the server's: a client-chosen id could collide with a stored one.
        fields = {k: v for k, v in item.items() if k not in ("id", "created_at")}
        try:
            msg = Msg.model_validate(fields)
        except ValidationError as exc:
            raise HTTPError(400, "bad_message", f"messages[{i}] is not a Msg: "
                            f"{_problems(exc)}") from None
        if msg.role is not Role.USER:
            raise HTTPError(400, "bad_message",
                            f"messages[{i}] has role {msg.role.value!r}; only user messages "
                            "may be posted (the agent writes the others)")
        for j, block in enumerate(msg.content):
            if block.type in _AGENTS_BLOCKS:
                raise HTTPError(400, "bad_message",
                                f"messages[{i}].content[{j}] is a {block.type!r} block; a "
                                f"posted message holds {', '.join(_CLIENTS_BLOCKS)} blocks "
                                f"only ({_AGENTS_BLOCKS[block.type]})")
        out.append(msg)
    return out


_RESUME: dict[str, tuple[type[UserConfirmResultEvent] | type[ExternalExecutionResultEvent],
                         str, str]] = {
    "confirm": (UserConfirmResultEvent, "user_confirm_result", "confirm_results"),
    "external": (ExternalExecutionResultEvent, "external_execution_result", "tool_results"),
}


def read_resume(data: Any, kind: str) -> UserConfirmResultEvent | ExternalExecutionResultEvent:
    """The library's resume record: the event's JSON, ``type`` optional."""
    cls, type_name, field = _RESUME[kind]
    body = _object(data, {"type", "reply_id", field, "metadata"}, "the body")
    given = body.get("type", type_name)
    if given != type_name:
        raise HTTPError(400, "unknown_event_type",
                        f"event type {given!r} cannot be posted here; this endpoint takes "
                        f"{type_name!r} ({cls.__name__})")
    if not isinstance(body.get("reply_id"), str) or not body["reply_id"]:
        raise HTTPError(400, "bad_body", '"reply_id" (the paused reply\'s id) is required')
    try:
        event: UserConfirmResultEvent | ExternalExecutionResultEvent = cls.model_validate(
            {**body, "type": type_name})
    except ValidationError as exc:
        raise HTTPError(400, "bad_body",
                        f"the body is not a {cls.__name__}: {_problems(exc)}") from None
    return event


def read_note(data: Any) -> str | None:
    """``POST .../interrupt`` takes ``{}`` or ``{"message": "why"}``."""
    body = _object(data, {"message"}, "the body")
    note = body.get("message")
    if note is not None and (not isinstance(note, str) or not note.strip()):
        raise HTTPError(400, "bad_body", '"message" must be a non-empty string when given')
    return note
