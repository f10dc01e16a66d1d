"""The stored form of an :class:`~rx_agent.AgentState`: versioned JSON, migrated on load.

Schema versions
---------------
1. The plain ``AgentState.model_dump_json()`` a hand-written store may have kept
   (no envelope; the messages inline under ``"context"``).
2. (current) An envelope ``{"schema": 2, "format": "rx_agent.session", "state": {...}}``.
   Durable stores keep the envelope *without* ``context`` as the session's small
   head record and each message as its own row / list item (``Msg`` JSON, in
   order); :func:`encode_state` writes the whole state, messages inline, for
   exports and imports.

A record of an older schema is migrated on load (:data:`MIGRATIONS`, one step per
version) and written back in the current schema by the next save. A record that is
not JSON, not an object, of an unknown or newer schema, of another format, or that
does not validate raises :class:`~rx_agent.session.SessionCorruptError` naming the
session and the problem; it is never answered with an empty session.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from ..context import AgentState
from ..message import Msg
from ._base import SessionCorruptError, SessionKey

__all__ = ["FORMAT", "MIGRATIONS", "SCHEMA_VERSION", "decode_state", "decode_stored",
           "encode_head", "encode_state"]

SCHEMA_VERSION = 2
FORMAT = "rx_agent.session"
_PREFIX = f'{{"schema":{SCHEMA_VERSION},"format":"{FORMAT}","state":'

_MESSAGES: TypeAdapter[list[Msg]] = TypeAdapter(list[Msg])


def _v1_to_v2(record: dict[str, Any]) -> dict[str, Any]:
    return {"schema": 2, "format": FORMAT, "state": record}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}
"""``MIGRATIONS[n]`` turns a whole schema-``n`` record (messages inline) into schema ``n+1``."""


def _dump(state: AgentState, exclude: set[str] | None) -> str:
    try:
        return state.model_dump_json(exclude=exclude)
    except PydanticSerializationError as exc:
        raise TypeError(
            f"the state of session {state.session_id!r} is not JSON-serialisable (keep only "
            f"JSON values in AgentState.data): {exc}"
        ) from None


def encode_head(state: AgentState) -> str:
    """The current-schema envelope of ``state`` without its messages."""
    return f"{_PREFIX}{_dump(state, {'context'})}}}"


def encode_state(state: AgentState) -> str:
    """The current-schema envelope of the whole ``state`` (messages inline)."""
    return f"{_PREFIX}{_dump(state, None)}}}"


class _Corrupt(Exception):
    """A problem found while decoding; the store adds who and where."""


def _text(raw: str | bytes) -> str:
    if isinstance(raw, bytes):
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Corrupt(f"the record is not UTF-8 text ({exc.reason} at byte {exc.start})")\
                from None
    return raw


def _envelope(raw: str | bytes) -> tuple[int, dict[str, Any]]:
    text = _text(raw)
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Corrupt(f"the record is not valid JSON ({exc.msg} at line {exc.lineno} "
                       f"column {exc.colno})") from None
    if not isinstance(record, dict):
        raise _Corrupt(f"the record is a JSON {type(record).__name__}, not an object")
    if "schema" not in record:
        if "session_id" in record and "context" in record:
            return 1, record  # a plain AgentState dump
        keys = ", ".join(sorted(record)[:6]) or "none"
        raise _Corrupt(f"not an rx_agent session record (no 'schema'; keys: {keys})")
    schema = record["schema"]
    if isinstance(schema, bool) or not isinstance(schema, int):
        raise _Corrupt(f"'schema' must be an integer, got a {type(schema).__name__}")
    if schema > SCHEMA_VERSION:
        raise _Corrupt(f"schema {schema} is newer than this rx_agent reads (up to "
                       f"{SCHEMA_VERSION}): upgrade rx_agent")
    if schema < 2:
        raise _Corrupt(f"unknown schema {schema} (schema-1 records have no envelope)")
    if record.get("format") != FORMAT:
        raise _Corrupt(f"foreign record format {record.get('format')!r} (expected {FORMAT!r})")
    if not isinstance(record.get("state"), dict):
        raise _Corrupt("the record has no 'state' object")
    return schema, record


def _validation_summary(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first.get('msg')}{more}"


def _messages(bodies: Sequence[str | bytes]) -> list[Msg]:
    texts = [_text(b) for b in bodies]
    try:
        return _MESSAGES.validate_json("[" + ",".join(texts) + "]")
    except ValidationError:
        pass
    for i, text in enumerate(texts):  # only on failure: find the culprit
        try:
            Msg.model_validate_json(text)
        except ValidationError as exc:
            raise _Corrupt(f"stored message {i} is invalid: {_validation_summary(exc)}") from None
    raise _Corrupt("the stored messages do not form a valid list")


def _build(fields: dict[str, Any], context: list[Any]) -> AgentState:
    try:
        return AgentState.model_validate({**fields, "context": context})
    except ValidationError as exc:
        raise _Corrupt(f"the state does not validate: {_validation_summary(exc)}") from None


def _migrate(schema: int, record: dict[str, Any]) -> dict[str, Any]:
    while schema < SCHEMA_VERSION:
        record = MIGRATIONS[schema](record)
        schema += 1
    return record


def _decode(head: str | bytes, bodies: Sequence[str | bytes]) -> AgentState:
    schema, record = _envelope(head)
    if schema < SCHEMA_VERSION:
        if bodies:
            raise _Corrupt(f"a schema-{schema} record keeps its messages inline, but "
                           f"{len(bodies)} message rows exist beside it")
        record = _migrate(schema, record)
    fields = dict(record["state"])
    inline = fields.pop("context", None)
    if inline is not None:
        if bodies:
            raise _Corrupt(f"the record has inline messages and {len(bodies)} message rows")
        if not isinstance(inline, list):
            raise _Corrupt(f"'context' must be a list, got {type(inline).__name__}")
        return _build(fields, inline)
    return _build(fields, _messages(bodies))


def decode_stored(
    head: str | bytes,
    bodies: Sequence[str | bytes],
    key: SessionKey,
    where: str,
) -> AgentState:
    """The state from a stored head record and its message rows (in order)."""
    try:
        return _decode(head, bodies)
    except _Corrupt as exc:
        raise SessionCorruptError(key.session_id, str(exc), user_id=key.user_id,
                                  where=where) from None


def decode_state(record: str | bytes, key: SessionKey | None = None) -> AgentState:
    """A whole state from :func:`encode_state` JSON, or from a schema-1 plain dump.

    Use it to import sessions a hand-written store kept as
    ``AgentState.model_dump_json()``: ``store.save(key, decode_state(text, key))``.
    """
    try:
        return _decode(record, ())
    except _Corrupt as exc:
        name = key.session_id if key is not None else "(unnamed)"
        raise SessionCorruptError(name, str(exc), user_id=key.user_id if key else None)\
            from None


def corrupt(key: SessionKey, problem: str, where: str) -> SessionCorruptError:
    return SessionCorruptError(key.session_id, problem, user_id=key.user_id, where=where)
