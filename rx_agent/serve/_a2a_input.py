"""What an A2A client sends, as the library's records: a user message as a ``Msg``,
and the answer to a paused task as the resume event it stands for.

An answer approves or denies every pending call at once: a data part
``{"approved": true | false}`` (``confirmed`` is accepted as an alias, with an
optional ``"reason"``), or a text reply ``yes`` / ``approve`` or ``no`` / ``deny``.
A task waiting for external tools takes their results as a data part
``{"tool_results": [{"id": ..., "output": ...}, ...]}``, or ``{"approved": false}``
to decline them.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from a2a.helpers import get_data_parts, get_text_parts
from a2a.types import InvalidParamsError, Message, Part, Role
from pydantic import ValidationError

from ..event import ExternalExecutionResultEvent, UserConfirmResultEvent
from ..message import ContentBlock, DataBlock, Msg, TextBlock, ToolResultBlock, ToolResultState
from ..message import Role as MsgRole
from ..permissions import ConfirmResult
from ..tool._schema import validation_problems
from ._a2a_tasks import Pause

__all__ = ["read_answer", "read_message"]

_YES = frozenset({"yes", "y", "approve", "approved"})
_NO = frozenset({"no", "n", "deny", "denied"})


def _block(part: Part, index: int) -> ContentBlock:
    which = part.WhichOneof("content")
    media = part.media_type
    if which == "text":
        return TextBlock(part.text)
    if which == "data":
        return TextBlock(json.dumps(get_data_parts([part])[0], ensure_ascii=False))
    if which == "raw":
        return DataBlock(media or "application/octet-stream",
                         data=base64.b64encode(part.raw).decode("ascii"))
    if which == "url":
        return DataBlock(media or "application/octet-stream", url=part.url)
    raise InvalidParamsError(f"message.parts[{index}] is empty: a part needs text, data, "
                             "raw or url")


def read_message(message: Message) -> Msg:
    """A client's message as a user ``Msg`` (text and data parts as text, files as
    data blocks)."""
    if message.role == Role.ROLE_AGENT:
        raise InvalidParamsError("message.role is ROLE_AGENT; a client sends ROLE_USER "
                                 "messages (the agent writes the others)")
    if not message.parts:
        raise InvalidParamsError("the message has no parts: send at least one text part")
    return Msg(MsgRole.USER, [_block(part, i) for i, part in enumerate(message.parts)])


def _flag(data: dict[str, Any]) -> bool | None:
    for name in ("approved", "confirmed"):
        if name in data:
            value = data[name]
            if not isinstance(value, bool):
                raise InvalidParamsError(f'"{name}" must be true or false, got '
                                         f"{json.dumps(value)}")
            return value
    return None


def _word(message: Message) -> bool | None:
    text = " ".join(get_text_parts(message.parts)).strip().lower().rstrip(".!")
    if text in _YES:
        return True
    if text in _NO:
        return False
    return None


def _reason(data: dict[str, Any]) -> str | None:
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise InvalidParamsError('"reason" must be a string')
    return reason


def read_answer(message: Message, pause: Pause, task_id: str
                ) -> UserConfirmResultEvent | ExternalExecutionResultEvent:
    """The resume event a reply to the paused task stands for, or a clear error."""
    data: dict[str, Any] = {}
    for value in get_data_parts(message.parts):
        if isinstance(value, dict):
            data.update(value)
    approved = _flag(data)
    if approved is None and "tool_results" not in data:
        approved = _word(message)
    reason = _reason(data)
    if pause.kind == "confirm":
        if approved is None:
            raise InvalidParamsError(
                f"task {task_id} waits for approval of "
                f"{', '.join(c.name for c in pause.tool_calls)}: answer yes or no, or send a "
                'data part {"approved": true} or {"approved": false}')
        return UserConfirmResultEvent(pause.reply_id, [
            ConfirmResult(call, approved, reason=reason) for call in pause.tool_calls])
    if "tool_results" in data:
        return ExternalExecutionResultEvent(pause.reply_id, _results(data["tool_results"],
                                                                     pause))
    if approved is False:
        why = reason or "the user declined to run it"
        return ExternalExecutionResultEvent(pause.reply_id, [
            ToolResultBlock(c.id, c.name, why, ToolResultState.DENIED)
            for c in pause.tool_calls])
    raise InvalidParamsError(
        f"task {task_id} waits for the results of external tools "
        f"({', '.join(f'{c.name} id {c.id}' for c in pause.tool_calls)}): send a data part "
        '{"tool_results": [{"id": "<call id>", "output": "<result>"}, ...]}, or '
        '{"approved": false} to decline them')


def _results(raw: Any, pause: Pause) -> list[ToolResultBlock]:
    if not isinstance(raw, list) or not raw:
        raise InvalidParamsError('"tool_results" must be a non-empty list of '
                                 '{"id": ..., "output": ...} objects')
    names = {c.id: c.name for c in pause.tool_calls}
    out: list[ToolResultBlock] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InvalidParamsError(f"tool_results[{i}] must be an object")
        fields = {"name": names.get(str(item.get("id")), ""), **item, "type": "tool_result"}
        try:
            out.append(ToolResultBlock.model_validate(fields))
        except ValidationError as exc:
            raise InvalidParamsError(f"tool_results[{i}] is not a tool result: "
                                     f"{validation_problems(exc, '(root)', limit=3)}") from None
    return out
