"""Reading a Responses API request (``POST /v1/responses``): its parameters, its
``input`` items as ``Msg`` objects, its function tools, and the session a
``previous_response_id`` names."""

from __future__ import annotations

import json
from typing import Any

from ..message import ContentBlock, Msg, Role, TextBlock, ToolResultBlock, ToolUseBlock
from ..tool._caller import CallerTools
from ._body import check_session_id
from ._openai_request import IGNORED, OpenAIError, bad_request, image_block, text_content

__all__ = ["read_input", "read_request", "read_tools", "session_of"]

_IGNORED = (IGNORED - {"max_tokens", "max_completion_tokens", "stop", "logit_bias",
                       "seed", "presence_penalty", "frequency_penalty"}) | {
    "max_output_tokens", "reasoning", "truncation", "include", "max_tool_calls",
    "top_logprobs", "background", "text", "prompt", "stream_options"}
_KNOWN = frozenset({"model", "input", "instructions", "stream", "tools", "tool_choice",
                    "previous_response_id"})


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def read_request(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise bad_request("the body must be a JSON object (a response request)")
    unknown = sorted(set(data) - _KNOWN - _IGNORED)
    if unknown:
        raise bad_request(f"unknown parameter(s) {', '.join(map(repr, unknown))}", unknown[0],
                          "unknown_parameter")
    text = data.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if fmt is not None and fmt != {"type": "text"}:
        raise bad_request(f"text.format={_dumps(fmt)} is not supported: an agent gives a text "
                          "answer", "text.format", "unsupported_parameter")
    if data.get("background"):
        raise bad_request("background responses are not supported", "background",
                          "unsupported_parameter")
    if not isinstance(data.get("model"), str) or not data["model"]:
        raise bad_request('"model" (the agent\'s name, see GET /v1/models) is required', "model")
    return data


def read_tools(raw: Any, choice: Any) -> CallerTools | None:
    if choice is not None and choice not in ("auto", "none"):
        raise bad_request(f"tool_choice={_dumps(choice)} is not supported: the agent decides "
                          'which tools to call ("auto"); "none" offers it none of yours',
                          "tool_choice", "unsupported_parameter")
    if not raw:
        return None
    if not isinstance(raw, list):
        raise bad_request('"tools" must be a list of function tools', "tools")
    schemas = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or item.get("type") != "function":
            kind = item.get("type") if isinstance(item, dict) else None
            raise bad_request(f"tools[{i}] has type {_dumps(kind)}; only function tools (the "
                              "client's own) are supported", f"tools[{i}]",
                              "unsupported_parameter")
        schemas.append({"name": item.get("name"), "description": item.get("description"),
                        "parameters": item.get("parameters")})
    try:
        tools = CallerTools(schemas)
    except (ValueError, TypeError) as exc:
        raise bad_request(f"tools: {exc}", "tools") from None
    return None if choice == "none" else tools


def _content(content: Any, where: str) -> str | list[ContentBlock]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise bad_request(f"{where}.content must be a string or a non-empty list of parts",
                          f"{where}.content")
    blocks: list[ContentBlock] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            blocks.append(TextBlock(str(part.get("text", ""))))
        elif kind == "refusal":
            blocks.append(TextBlock(str(part.get("refusal", ""))))
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            blocks.append(image_block(part["image_url"], f"{where}.content[{j}]"))
        else:
            raise bad_request(f"{where}.content[{j}] has type {_dumps(kind)}; this endpoint "
                              'takes "input_text" and "input_image" (image_url) parts',
                              f"{where}.content")
    return blocks


def read_input(raw: Any) -> list[Msg]:
    if isinstance(raw, str):
        if not raw:
            raise bad_request('"input" must not be empty', "input")
        return [Msg(Role.USER, raw)]
    if not isinstance(raw, list) or not raw:
        raise bad_request('"input" must be a string or a non-empty list of items', "input")
    out: list[Msg] = []
    names: dict[str, str] = {}
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message":
            role = item.get("role")
            if role in ("system", "developer"):
                out.append(Msg(Role.SYSTEM, text_content(_plain(item.get("content")), where)))
            elif role in ("user", "assistant"):
                out.append(Msg(Role(role), _content(item.get("content"), where)))
            else:
                raise bad_request(f"{where}.role must be user, assistant, system or developer, "
                                  f"not {_dumps(role)}", f"{where}.role")
        elif kind == "function_call":
            call = _call(item, where)
            names[call.id] = call.name
            last = out[-1] if out else None
            if last is not None and last.role is Role.ASSISTANT:
                last.content = [*last.content, call]  # one turn's calls in one message
            else:
                out.append(Msg(Role.ASSISTANT, [call]))
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise bad_request(f"{where}.call_id is required", f"{where}.call_id")
            output = text_content(_plain(item.get("output")), where)
            out.append(Msg(Role.TOOL, [ToolResultBlock(call_id, names.get(call_id, ""),
                                                       output)]))
        elif kind == "reasoning":
            continue  # the agent's own earlier thinking: models get none back
        else:
            raise bad_request(f"{where} has type {_dumps(kind)}; this endpoint takes message, "
                              "function_call and function_call_output items", where)
    return out


def _plain(content: Any) -> Any:
    """``input_text`` / ``output_text`` parts as the text parts ``text_content`` reads."""
    if isinstance(content, list):
        return [{**p, "type": "text"} if isinstance(p, dict) and p.get("type") in (
            "input_text", "output_text") else p for p in content]
    return content


def _call(item: dict[str, Any], where: str) -> ToolUseBlock:
    call_id, name = item.get("call_id"), item.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise bad_request(f"{where} needs call_id and name", where)
    arguments = item.get("arguments") or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return ToolUseBlock(call_id, name, {}, raw_input=str(arguments))
    return ToolUseBlock(call_id, name, parsed)


def session_of(response_id: str) -> str:
    """The session a response id names."""
    head, _, session = response_id.partition(".")
    if not head.startswith("resp_") or not session:
        raise OpenAIError(404, "previous_response_not_found",
                          f"previous_response_id {response_id!r} is not a response of this "
                          "server", "previous_response_id")
    return check_session_id(session)
