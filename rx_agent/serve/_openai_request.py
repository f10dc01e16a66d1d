"""Reading an OpenAI ``chat.completions`` request: its messages as ``Msg`` objects, the
caller's tools, the parameters the endpoint honours, ignores or refuses; and OpenAI's
error shape, ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..message import ContentBlock, DataBlock, Msg, Role, TextBlock, ToolResultBlock, ToolUseBlock
from ..tool._caller import CallerTools
from ._errors import HTTPError

__all__ = [
    "IGNORED",
    "SESSION_HEADER",
    "TEMP_PREFIX",
    "ChatRequest",
    "OpenAIError",
    "as_openai",
    "bad_request",
    "image_block",
    "read_chat",
    "text_content",
    "tool_call",
    "user_content",
]

SESSION_HEADER = "X-Session-Id"
"""The request header that selects a stored session (absent: a stateless request)."""

TEMP_PREFIX = "openai-"
"""The start of the temporary sessions of stateless requests."""

# Accepted and ignored: the agent's model and its settings are the server's.
IGNORED = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "presence_penalty",
    "frequency_penalty", "logit_bias", "seed", "stop", "user", "metadata", "store",
    "service_tier", "parallel_tool_calls", "reasoning_effort", "verbosity",
    "prompt_cache_key", "safety_identifier",
})
# Accepted with their default value only; anything else is refused (400).
_DEFAULT_ONLY: dict[str, tuple[Any, ...]] = {
    "n": (None, 1), "logprobs": (None, False), "top_logprobs": (None, 0),
    "modalities": (None, ["text"]), "response_format": (None, {"type": "text"}),
}
# Refused whenever present: the endpoint cannot honour them.
_REFUSED = frozenset({"audio", "prediction", "functions", "function_call",
                      "web_search_options"})
_KNOWN = frozenset({"model", "messages", "stream", "stream_options", "tools", "tool_choice"})

_TYPES = {400: "invalid_request_error", 401: "authentication_error",
          403: "permission_error", 404: "invalid_request_error",
          409: "invalid_request_error", 413: "invalid_request_error",
          415: "invalid_request_error", 429: "rate_limit_error"}


class OpenAIError(HTTPError):
    """An :class:`HTTPError` in OpenAI's shape (``type`` and ``param`` besides ``code``)."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status, code, message, headers)
        self.param = param

    @property
    def type(self) -> str:
        return _TYPES.get(self.status, "server_error" if self.status >= 500 else
                          "invalid_request_error")

    def payload(self) -> dict[str, Any]:  # adds type and param
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def as_openai(error: HTTPError) -> OpenAIError:
    """The server's own error answer, reshaped for an OpenAI client."""
    if isinstance(error, OpenAIError):
        return error
    return OpenAIError(error.status, error.code, error.message, headers=error.headers)


def bad_request(message: str, param: str | None = None,
                code: str = "invalid_request") -> OpenAIError:
    return OpenAIError(400, code, message, param)


@dataclass
class ChatRequest:
    model: str
    messages: list[Msg]
    """Every message of the request, in order."""
    tail: list[Msg]
    """The messages after the last assistant message: what is new with a session."""
    tool_results: list[ToolResultBlock] = field(default_factory=list)
    """The tail's tool results, when the tail is tool messages (a tool round's answer)."""
    stream: bool = False
    include_usage: bool = False
    tools: CallerTools | None = None


def read_chat(data: Any) -> ChatRequest:
    if not isinstance(data, dict):
        raise bad_request("the body must be a JSON object (a chat completion request)")
    unknown = sorted(set(data) - _KNOWN - IGNORED - set(_DEFAULT_ONLY) - _REFUSED)
    if unknown:
        raise bad_request(f"unknown parameter(s) {', '.join(map(repr, unknown))}", unknown[0],
                          "unknown_parameter")
    refused = sorted(_REFUSED & set(data))
    if refused:
        raise bad_request(f"{refused[0]!r} is not supported by this endpoint (an rx_agent agent)",
                          refused[0], "unsupported_parameter")
    for name, allowed in _DEFAULT_ONLY.items():
        if name in data and data[name] not in allowed:
            raise bad_request(f"{name}={json.dumps(data[name])} is not supported: an agent "
                              "gives one text answer (leave it out)", name,
                              "unsupported_parameter")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request('"model" (the agent\'s name, see GET /v1/models) is required', "model")
    stream = data.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise bad_request('"stream" must be true or false', "stream")
    options = data.get("stream_options")
    include_usage = False
    if options is not None:
        if not isinstance(options, dict):
            raise bad_request('"stream_options" must be an object', "stream_options")
        include_usage = options.get("include_usage") is True
    messages = _messages(data.get("messages"))
    last = max((i for i, m in enumerate(messages) if m.role is Role.ASSISTANT), default=-1)
    tail = messages[last + 1:]
    if not tail:
        raise bad_request("the last message is the assistant's: send a user message (or the "
                          "results of its tool calls) after it", "messages")
    results: list[ToolResultBlock] = []
    if any(m.role is Role.TOOL for m in tail):
        if not all(m.role is Role.TOOL for m in tail):
            raise bad_request("tool results must be the only messages after the assistant's tool "
                              "calls (send the next user message in a request of its own)",
                              "messages")
        results = [b for m in tail for b in m.tool_results]
    tools = _tools(data.get("tools"), data.get("tool_choice"))
    return ChatRequest(model, messages, tail, results, bool(stream), include_usage, tools)


def _tools(raw: Any, choice: Any) -> CallerTools | None:
    if choice is not None and choice not in ("auto", "none"):
        raise bad_request(f"tool_choice={json.dumps(choice)} is not supported: the agent decides "
                          'which tools to call ("auto"); "none" offers it none of yours',
                          "tool_choice", "unsupported_parameter")
    if raw is None or raw == []:
        return None
    if not isinstance(raw, list):
        raise bad_request('"tools" must be a list of function tools', "tools")
    schemas = []
    for i, item in enumerate(raw):
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(item, dict) or item.get("type") != "function" or \
                not isinstance(function, dict):
            raise bad_request(f'tools[{i}] must be {{"type": "function", "function": {{...}}}}',
                              f"tools[{i}]")
        name = function.get("name")
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise bad_request(f"tools[{i}].function.parameters must be a JSON Schema object",
                              f"tools[{i}].function.parameters")
        schemas.append({"name": name, "description": function.get("description"),
                        "parameters": parameters})
    try:
        tools = CallerTools(schemas)
    except (ValueError, TypeError) as exc:
        raise bad_request(f"tools: {exc}", "tools") from None
    return None if choice == "none" else tools


def _messages(raw: Any) -> list[Msg]:
    if not isinstance(raw, list) or not raw:
        raise bad_request('"messages" must be a non-empty list', "messages")
    out: list[Msg] = []
    names: dict[str, str] = {}  # tool call id -> tool name, for the tool messages
    for i, item in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(item, dict):
            raise bad_request(f"{where} must be an object", where)
        role = item.get("role")
        if role in ("system", "developer"):
            out.append(Msg(Role.SYSTEM, text_content(item.get("content"), where)))
        elif role == "user":
            out.append(Msg(Role.USER, user_content(item.get("content"), where)))
        elif role == "assistant":
            blocks: list[ContentBlock] = []
            text = text_content(item.get("content"), where, optional=True)
            if text:
                blocks.append(TextBlock(text))
            for j, call in enumerate(item.get("tool_calls") or ()):
                use = tool_call(call, f"{where}.tool_calls[{j}]")
                names[use.id] = use.name
                blocks.append(use)
            out.append(Msg(Role.ASSISTANT, blocks))
        elif role == "tool":
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise bad_request(f"{where}.tool_call_id is required (the id of the tool call this "
                                  "answers)", f"{where}.tool_call_id")
            output = text_content(item.get("content"), where)
            out.append(Msg(Role.TOOL, [ToolResultBlock(call_id, names.get(call_id, ""),
                                                       output)]))
        else:
            raise bad_request(f"{where}.role must be system, developer, user, assistant or tool, "
                              f"not {json.dumps(role)}", f"{where}.role")
    return out


def tool_call(call: Any, where: str) -> ToolUseBlock:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(call.get("id"), str) or \
            not isinstance(function.get("name"), str):
        raise bad_request(f'{where} must be {{"id", "type": "function", "function": {{"name", '
                          '"arguments"}}}}', where)
    arguments = function.get("arguments") or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return ToolUseBlock(call["id"], function["name"], {}, raw_input=str(arguments))
    return ToolUseBlock(call["id"], function["name"], parsed)


def text_content(content: Any, where: str, *, optional: bool = False) -> str:
    if content is None and optional:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in ("text", "refusal"):
                raise bad_request(f"{where}.content[{j}] must be a text part here",
                                  f"{where}.content")
            parts.append(str(part.get("text", part.get("refusal", ""))))
        return "".join(parts)
    raise bad_request(f"{where}.content must be a string or a list of text parts",
                      f"{where}.content")


def user_content(content: Any, where: str) -> str | list[ContentBlock]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise bad_request(f"{where}.content must be a string or a non-empty list of parts",
                          f"{where}.content")
    blocks: list[ContentBlock] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            blocks.append(TextBlock(str(part.get("text", ""))))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else None
            if not isinstance(url, str) or not url:
                raise bad_request(f"{where}.content[{j}].image_url.url is required",
                                  f"{where}.content")
            blocks.append(image_block(url, f"{where}.content[{j}]"))
        else:
            raise bad_request(f"{where}.content[{j}] has type {json.dumps(kind)}; this endpoint "
                              'takes "text" and "image_url" parts', f"{where}.content")
    return blocks


def image_block(url: str, where: str) -> DataBlock:
    if not url.startswith("data:"):
        return DataBlock("image/*", url=url)
    head, _, data = url.partition(",")
    media = head[5:].removesuffix(";base64")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"{where} is a data URL whose data is not base64", where) from None
    return DataBlock(media or "application/octet-stream", data=data)
