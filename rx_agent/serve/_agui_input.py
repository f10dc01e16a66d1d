"""AG-UI input: a ``RunAgentInput`` read, checked and turned into the agent's input.

The thread is the session (per user), so the server already holds the conversation:

* a thread the server has never stored takes the request's whole history (user,
  assistant, tool and system messages) as the start of its context;
* a stored thread takes only what follows the request's last assistant message: new
  user messages, or the tool messages answering the calls the thread waits on (an
  ``ExternalExecutionResultEvent``), or with ``resume`` the answer to an approval (a
  ``UserConfirmResultEvent``); nothing new is a run that only reports the state.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from ag_ui.core import (
    AssistantMessage,
    DataSource,
    DeveloperMessage,
    ResumeEntry,
    RunAgentInput,
    SystemMessage,
    TextPart,
    ToolMessage,
    UrlSource,
    UserMessage,
)
from pydantic import ValidationError

from ..context import AgentState, PendingToolCalls
from ..event import ExternalExecutionResultEvent, UserConfirmResultEvent
from ..message import (
    ContentBlock,
    DataBlock,
    Msg,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolResultState,
    ToolUseBlock,
)
from ..permissions import ConfirmResult
from ..tool import CallerTools, Toolkit
from ..tool._schema import validation_problems
from ._body import check_session_id
from ._errors import HTTPError

__all__ = ["AgentInputs", "caller_tools", "plan_input", "read_run_input"]

AgentInputs: TypeAlias = "list[Msg] | UserConfirmResultEvent | ExternalExecutionResultEvent | None"

_MAX_RUN_ID = 256


def _bad(message: str) -> HTTPError:
    return HTTPError(400, "bad_run_input", message)


def read_run_input(data: Any) -> RunAgentInput:
    """The body as an AG-UI ``RunAgentInput`` (camelCase keys), or a 400 naming the
    problem; ``threadId`` must be a valid session id."""
    if not isinstance(data, dict):
        raise _bad("the body must be an AG-UI RunAgentInput JSON object (threadId, runId, "
                   "messages, tools, state, context, forwardedProps)")
    try:
        run = RunAgentInput.model_validate(data)
    except ValidationError as exc:
        raise _bad(f"the body is not a RunAgentInput: {validation_problems(exc, '(root)', 3)}"
                   ) from None
    try:
        check_session_id(run.thread_id)
    except HTTPError as exc:
        raise _bad(f"threadId is the session id: {exc.message}") from None
    if not run.run_id or len(run.run_id) > _MAX_RUN_ID:
        raise _bad(f"runId must be 1 to {_MAX_RUN_ID} characters")
    return run


def caller_tools(run: RunAgentInput, toolkit: Toolkit) -> CallerTools | None:
    """The front end's tools, which the client runs (a 400 for a bad or clashing one)."""
    if not run.tools:
        return None
    try:
        tools = CallerTools({"name": t.name, "description": t.description,
                             "parameters": t.parameters} for t in run.tools)
    except (TypeError, ValueError) as exc:
        raise _bad(f"tools: {exc}") from None
    clash = tools.clashes(toolkit)
    if clash:
        raise _bad(f"tools: {', '.join(map(repr, clash))} is the name of one of the agent's "
                   "own tools (which run on the server); give the front-end tool another name")
    return tools


# -- messages ---------------------------------------------------------------------------


def _blocks(content: Any, where: str) -> list[ContentBlock]:
    if isinstance(content, str):
        return [TextBlock(content)] if content else []
    out: list[ContentBlock] = []
    for i, part in enumerate(content):
        if isinstance(part, TextPart):
            out.append(TextBlock(part.text))
            continue
        source = part.source
        if isinstance(source, DataSource):
            out.append(DataBlock(source.mime_type, data=source.value))
        elif isinstance(source, UrlSource):
            out.append(DataBlock(source.mime_type or _default_type(part.type), url=source.value))
        else:
            raise _bad(f"{where}.content[{i}]: a {part.type} part with a file source (a "
                       "provider's file handle) cannot be used here; send the bytes (a data "
                       "source) or a URL")
    return out


def _said(msg: Any, where: str) -> Msg:
    """A user, system or developer message; it must say something."""
    blocks = _blocks(msg.content, where)
    if not blocks:
        raise _bad(f"{where} ({msg.role}) has no content")
    return Msg(Role.USER if isinstance(msg, UserMessage) else Role.SYSTEM, blocks)


def _default_type(kind: str) -> str:
    return {"image": "image/*", "audio": "audio/*", "video": "video/*"}.get(
        kind, "application/octet-stream")


def _tool_use(call: Any) -> ToolUseBlock:
    raw = call.function.arguments
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return ToolUseBlock(call.id, call.function.name, value)
    return ToolUseBlock(call.id, call.function.name, {}, raw_input=raw)


def _result(msg: ToolMessage, name: str, where: str) -> ToolResultBlock:
    blocks = _blocks(msg.content, where)
    output: str | list[ContentBlock]
    if all(isinstance(b, TextBlock) for b in blocks):
        output = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    else:
        output = blocks
    if msg.error is not None:
        return ToolResultBlock(msg.tool_call_id, name, output or msg.error, ToolResultState.ERROR)
    return ToolResultBlock(msg.tool_call_id, name, output)


def _history(messages: Sequence[Any]) -> list[Msg]:
    """A new thread's history as the agent's messages; every tool call needs a result."""
    out: list[Msg] = []
    open_calls: dict[str, str] = {}  # id -> name, waiting for a tool message
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if isinstance(msg, (UserMessage, SystemMessage, DeveloperMessage)):
            out.append(_said(msg, where))
        elif isinstance(msg, AssistantMessage):
            blocks: list[ContentBlock] = _blocks(msg.content or "", where)
            for call in msg.tool_calls or ():
                blocks.append(_tool_use(call))
                open_calls[call.id] = call.function.name
            if blocks:
                out.append(Msg(Role.ASSISTANT, blocks))
        elif isinstance(msg, ToolMessage):
            name = open_calls.pop(msg.tool_call_id, None)
            if name is None:
                raise _bad(f"{where} answers tool call {msg.tool_call_id!r}, which no earlier "
                           "assistant message made (or another tool message answered)")
            out.append(Msg(Role.TOOL, [_result(msg, name, where)], name))
        # activity and reasoning messages are the UI's own: not part of the context
    if open_calls:
        raise _bad(f"tool call(s) {', '.join(map(repr, open_calls))} have no tool message with "
                   "their result; a new thread's history must answer every tool call")
    return out


def _trailing(messages: Sequence[Any]) -> list[tuple[int, Any]]:
    """The messages after the last assistant message, with their index."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)),
               default=-1)
    return [(i, m) for i, m in enumerate(messages) if i > last]


# -- resuming ---------------------------------------------------------------------------


def _legacy_resume(props: Any) -> list[ResumeEntry] | None:
    """``forwardedProps.command.resume``: how clients before AG-UI 1.0's ``resume`` field
    answered an interrupt (the LangGraph convention); it answers the pending approval."""
    if not isinstance(props, Mapping):
        return None
    command = props.get("command")
    if not isinstance(command, Mapping) or "resume" not in command:
        return None
    return [ResumeEntry(interrupt_id="", status="resolved", payload=command["resume"])]


def _flag(payload: Mapping[str, Any], where: str) -> bool:
    names = [k for k in ("approved", "confirmed") if k in payload]
    if len(names) != 1 or not isinstance(payload[names[0]], bool):
        raise _bad(f'{where} must be an object with "approved": true or false ("confirmed" '
                   "is accepted too), got " + json.dumps(payload)[:200])
    return bool(payload[names[0]])


def _confirm(entries: list[ResumeEntry], pending: PendingToolCalls,
             legacy: bool) -> UserConfirmResultEvent:
    if len(entries) != 1 or (not legacy and entries[0].interrupt_id != pending.reply_id):
        got = ", ".join(repr(e.interrupt_id) for e in entries) or "none"
        raise _bad(f"resume must hold one entry answering interrupt {pending.reply_id!r} (the "
                   f"pending approval), got {got}")
    entry = entries[0]
    where = "forwardedProps.command.resume" if legacy else "resume[0].payload"
    calls = pending.tool_calls
    if entry.status == "cancelled":
        return UserConfirmResultEvent(pending.reply_id, [
            ConfirmResult(c, False, "The user cancelled the approval.") for c in calls])
    payload = entry.payload
    if not isinstance(payload, Mapping):
        raise _bad(f'{where} must be an object like {{"approved": true}}, got '
                   + json.dumps(payload)[:200])
    unknown = sorted(set(payload) - {"approved", "confirmed", "reason", "calls"})
    if unknown:
        raise _bad(f"{where} has unknown field(s) {', '.join(map(repr, unknown))}; expected "
                   '"approved" (or "confirmed"), "reason" and "calls"')
    approved = _flag(payload, where)
    reason = payload.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise _bad(f'{where}.reason must be a string')
    each = payload.get("calls") or {}
    ids = {c.id for c in calls}
    if not isinstance(each, Mapping) or not all(isinstance(v, bool) for v in each.values()):
        raise _bad(f'{where}.calls must map tool call ids to true or false')
    strangers = sorted(set(each) - ids)
    if strangers:
        raise _bad(f"{where}.calls names tool call(s) {', '.join(map(repr, strangers))} that "
                   f"are not pending (pending: {', '.join(sorted(ids))})")
    results = []
    for call in calls:
        ok = bool(each.get(call.id, approved))
        results.append(ConfirmResult(call, ok, None if ok else reason))
    return UserConfirmResultEvent(pending.reply_id, results)


def _external(tools: list[tuple[int, ToolMessage]], pending: PendingToolCalls
              ) -> ExternalExecutionResultEvent:
    names = {c.id: c.name for c in pending.tool_calls}
    results: list[ToolResultBlock] = []
    for i, msg in tools:
        if msg.tool_call_id not in names:
            raise HTTPError(409, "not_paused",
                            f"messages[{i}] answers tool call {msg.tool_call_id!r}, which the "
                            f"thread is not waiting on (it waits on {', '.join(names)})")
        results.append(_result(msg, names[msg.tool_call_id], f"messages[{i}]"))
    seen = [r.id for r in results]
    missing = [c for c in names if c not in seen]
    if missing or len(set(seen)) != len(seen):
        raise _bad(f"the tool messages must answer each pending call once; pending: "
                   f"{', '.join(names)}, answered: {', '.join(seen)}")
    return ExternalExecutionResultEvent(pending.reply_id, results)


def plan_input(run: RunAgentInput, state: AgentState | None) -> AgentInputs:
    """What the run gives the agent: messages, a resume event, or ``None`` (nothing
    new: the run only reports the thread's state)."""
    legacy = run.resume is None and (found := _legacy_resume(run.forwarded_props)) is not None
    resume = found if legacy else run.resume
    pending = state.pending if state is not None else None
    if state is None or not state.context:
        if resume:
            raise HTTPError(409, "not_paused", f"thread {run.thread_id!r} has no pending "
                            "interrupt to resume")
        history = _history(run.messages)
        if not history:
            raise _bad("messages holds nothing to run on: a new thread needs a user message")
        if history[-1].role is Role.ASSISTANT:
            raise _bad("the last message is the assistant's: a run needs a user message (or "
                       "tool results) after it")
        return history
    new = [(i, m) for i, m in _trailing(run.messages)
           if isinstance(m, (UserMessage, SystemMessage, DeveloperMessage, ToolMessage))]
    said = [(i, m) for i, m in new if not isinstance(m, ToolMessage)]
    tools = [(i, m) for i, m in new if isinstance(m, ToolMessage)]
    if resume:
        if pending is None or pending.kind != "confirm":
            raise HTTPError(409, "not_paused", f"thread {run.thread_id!r} has no pending "
                            "approval to resume")
        if new:
            raise _bad(f"a run that resumes an interrupt cannot add messages (messages"
                       f"[{new[0][0]}] follows the last assistant message; a client's history "
                       "keeps the assistant's tool calls); send new ones in the next run")
        return _confirm(list(resume), pending, legacy)
    if tools:
        if pending is None or pending.kind != "external":
            raise HTTPError(409, "not_paused",
                            f"thread {run.thread_id!r} is not waiting for tool results "
                            f"(messages[{tools[0][0]}] is a tool message after the last "
                            "assistant message)")
        if said:
            raise _bad(f"a run that answers tool calls cannot add new messages as well "
                       f"(messages[{said[0][0]}]); send them in the next run")
        return _external(tools, pending)
    if said:
        return [_said(m, f"messages[{i}]") for i, m in said]
    return None
