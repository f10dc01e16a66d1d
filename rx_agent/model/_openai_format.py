"""Conversion between rx_agent messages and the OpenAI chat-completions wire format.

Requests: :func:`to_openai_messages` turns ``Msg`` objects into the ``messages`` array,
:func:`to_openai_tools` / :func:`to_openai_tool_choice` the tool schemas and choice.
Responses: :func:`parse_completion` reads a non-streaming ``chat.completion`` body into
a :class:`ParsedCompletion`, which becomes stream chunks (:meth:`~ParsedCompletion.chunks`)
or an assistant ``Msg`` (:meth:`~ParsedCompletion.to_msg`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rx_agent.message import (
    ChatUsage,
    ContentBlock,
    DataBlock,
    HintBlock,
    Msg,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

from ._wire_cache import dumps, encode_json
from .base import FinishChunk, ModelChunk, TextChunk, ThinkingChunk, ToolCallChunk, UsageChunk

__all__ = [
    "OpenAIJSON",
    "OpenAIWire",
    "ParsedCompletion",
    "ParsedToolCall",
    "join_openai_json",
    "join_openai_messages",
    "openai_message",
    "openai_message_json",
    "parse_completion",
    "parse_usage",
    "to_openai_messages",
    "to_openai_tool_choice",
    "to_openai_tools",
]

JSONDict = dict[str, Any]

# OpenAI's input_audio part accepts these two formats only.
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


# --------------------------------------------------------------------------- requests


def to_openai_messages(messages: Iterable[Msg]) -> list[JSONDict]:
    """The ``messages`` array for ``messages``.

    * thinking blocks are dropped: providers reject or ignore echoed reasoning;
    * ``HintBlock`` becomes text (a hint is addressed to the model);
    * an assistant message with no text and no tool calls is skipped (an empty
      assistant turn is rejected by several providers and tells the model nothing);
    * each ``ToolResultBlock`` becomes its own ``role: "tool"`` message, whatever the
      role of the ``Msg`` that carries it. Tool messages only take text, so images a
      tool returned (and other non-result content of a tool ``Msg``) follow the run
      of tool messages as one user message: putting it between them would split the
      answers to one batch of calls, which the API rejects.
    """
    return join_openai_messages([openai_message(m) for m in messages])


OpenAIWire = tuple[Sequence[JSONDict], Sequence[JSONDict], bool, JSONDict | None]
"""One message's share of the ``messages`` array, which depends on that message alone
(the model keeps it, see ``_wire_cache``), read-only once made: its tool messages
(one per ``ToolResultBlock``), the user content parts that wait for the run of tool
messages to end, whether it is a tool ``Msg`` (the run goes on after it), and the
message itself (``None``: nothing the model needs). A plain tuple: one is made per
message encoded."""


def openai_message(msg: Msg) -> OpenAIWire:
    """``msg``'s :data:`OpenAIWire`."""
    content = msg.content
    results = [b for b in content if isinstance(b, ToolResultBlock)]
    if results:
        others: Sequence[ContentBlock] = [
            b for b in content if not isinstance(b, ToolResultBlock)]
        deferred: list[JSONDict] = []
        tool_messages: Sequence[JSONDict] = [_tool_message(r, deferred) for r in results]
    else:
        others, deferred, tool_messages = content, [], ()
    if msg.role is Role.TOOL:
        # Whatever else a tool Msg holds can only reach the model as user content.
        deferred.extend(_parts(others, images=True))
        return tool_messages, deferred, True, None
    return tool_messages, deferred or (), False, _plain_message(msg.role, others)


def join_openai_messages(wires: Iterable[OpenAIWire]) -> list[JSONDict]:
    """The ``messages`` array from each message's :data:`OpenAIWire`, in order (the
    entries are the wires' own dicts: the array is read-only too)."""
    out: list[JSONDict] = []
    deferred: list[JSONDict] = []  # user content parts waiting for the tool run to end
    for tool_messages, parts, is_tool, message in wires:
        if tool_messages:
            out.extend(tool_messages)
        if parts:
            deferred.extend(parts)
        if is_tool:
            continue
        if deferred:
            out.append({"role": "user", "content": _compact(deferred)})
            deferred = []
        if message is not None:
            out.append(message)
    if deferred:
        out.append({"role": "user", "content": _compact(deferred)})
    return out


OpenAIJSON = bytes | tuple[Sequence[bytes], Sequence[JSONDict], bool, bytes | None]
"""A message's :data:`OpenAIWire` as the model keeps it: the JSON of a plain message
(the usual case: no tool messages, nothing deferred), else its tool messages' and its
own JSON (the deferred parts stay dicts: they are sent joined with their
neighbours')."""


def openai_message_json(msg: Msg) -> OpenAIJSON:
    """``msg``'s :data:`OpenAIJSON`."""
    tool_messages, deferred, is_tool, message = openai_message(msg)
    own = None if message is None else encode_json(message)
    if own is not None and not tool_messages and not deferred and not is_tool:
        return own
    return [encode_json(m) for m in tool_messages], deferred, is_tool, own


def join_openai_json(wires: Iterable[OpenAIJSON]) -> list[bytes]:
    """The items of the ``messages`` array as JSON, from each message's
    :data:`OpenAIJSON`: what ``json.dumps`` makes of each of
    :func:`join_openai_messages`' entries."""
    out: list[bytes] = []
    append = out.append
    deferred: list[JSONDict] = []
    for wire in wires:
        if isinstance(wire, bytes):
            if deferred:
                append(encode_json({"role": "user", "content": _compact(deferred)}))
                deferred = []
            append(wire)
            continue
        tool_json, parts, is_tool, message_json = wire
        out.extend(tool_json)
        deferred.extend(parts)
        if is_tool:
            continue
        if deferred:
            append(encode_json({"role": "user", "content": _compact(deferred)}))
            deferred = []
        if message_json is not None:
            append(message_json)
    if deferred:
        append(encode_json({"role": "user", "content": _compact(deferred)}))
    return out


def _plain_message(role: Role, blocks: Sequence[ContentBlock]) -> JSONDict | None:
    if role is Role.ASSISTANT:
        calls = [b for b in blocks if isinstance(b, ToolUseBlock)]
        # Assistant content parts may only be text, so media the assistant produced
        # is not echoed back.
        text = "".join(p["text"] for p in _parts(blocks, images=False))
        if not text and not calls:
            return None
        message: JSONDict = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [_tool_call(c) for c in calls]
        return message
    if role is Role.SYSTEM:
        # System content is sent as one string: several compatible servers accept
        # nothing else there.
        text = "\n".join(p["text"] for p in _parts(blocks, images=False))
        return {"role": "system", "content": text} if text else None
    parts = _parts(blocks, images=True)
    if not parts:
        return None
    return {"role": "user", "content": _compact(parts)}


def _compact(parts: list[JSONDict]) -> str | list[JSONDict]:
    """Text-only content as a plain string (understood by every compatible server)."""
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return list(parts)


def _parts(blocks: Iterable[ContentBlock], *, images: bool) -> list[JSONDict]:
    parts: list[JSONDict] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            if block.text:
                parts.append({"type": "text", "text": block.text})
        elif isinstance(block, HintBlock):
            if block.hint:
                parts.append({"type": "text", "text": block.hint})
        elif isinstance(block, DataBlock) and images:
            part = _data_part(block)
            if part is not None:
                parts.append(part)
        # ThinkingBlock: dropped. ToolUseBlock: handled by the caller (assistant only).
    return parts


def _data_url(block: DataBlock) -> str | None:
    if block.data is not None:
        return f"data:{block.media_type};base64,{block.data}"
    return block.url


def _data_part(block: DataBlock) -> JSONDict | None:
    media = block.media_type.lower()
    url = _data_url(block)
    if url is None:
        return None
    if media.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": url}}
    audio_format = _AUDIO_FORMATS.get(media)
    if audio_format is not None and block.data is not None:
        return {"type": "input_audio", "input_audio": {"data": block.data, "format": audio_format}}
    if block.data is not None:
        return {"type": "file", "file": {"file_data": url}}
    # A remote non-image file: the chat API has no part for it, so the model gets
    # the link as text rather than nothing.
    return {"type": "text", "text": f"[{block.media_type}: {block.url}]"}


def _tool_call(block: ToolUseBlock) -> JSONDict:
    # raw_input holds argument text that was not a JSON object; echo it verbatim so
    # the model sees what it actually produced.
    arguments = block.raw_input if block.raw_input is not None else dumps(block.input)
    return {
        "id": block.id,
        "type": "function",
        "function": {"name": block.name, "arguments": arguments},
    }


def _tool_message(result: ToolResultBlock, deferred: list[JSONDict]) -> JSONDict:
    if isinstance(result.output, str):
        text = result.output
    else:
        text = "".join(p["text"] for p in _parts(result.output, images=False))
        media = [p for p in _parts(result.output, images=True) if p["type"] != "text"]
        if media:
            deferred.append(
                {"type": "text", "text": f"Attachments returned by tool call {result.id}:"}
            )
            deferred.extend(media)
    return {"role": "tool", "tool_call_id": result.id, "content": text}


def to_openai_tools(tools: Iterable[Mapping[str, Any]]) -> list[JSONDict]:
    """``{"name","description","parameters"}`` schemas as OpenAI function tools."""
    out: list[JSONDict] = []
    for schema in tools:
        if schema.get("type") == "function" and "function" in schema:
            out.append(dict(schema))  # already in wire form
            continue
        function: JSONDict = {"name": schema["name"]}
        if schema.get("description"):
            function["description"] = schema["description"]
        function["parameters"] = schema.get("parameters") or {"type": "object", "properties": {}}
        for key, value in schema.items():
            if key not in ("name", "description", "parameters"):
                function[key] = value  # e.g. "strict": True
        out.append({"type": "function", "function": function})
    return out


def to_openai_tool_choice(choice: str) -> str | JSONDict:
    """``"auto"``, ``"none"``, ``"required"`` as-is; any other value names one tool."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


# -------------------------------------------------------------------------- responses


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_usage(usage: Mapping[str, Any]) -> ChatUsage:
    """An OpenAI ``usage`` object as :class:`ChatUsage`."""
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    cached = (
        _int(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else None
    )
    reasoning = (
        _int(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, dict)
        else None
    )
    return ChatUsage(
        input_tokens=_int(usage.get("prompt_tokens")) or 0,
        output_tokens=_int(usage.get("completion_tokens")) or 0,
        cached_tokens=cached,
        reasoning_tokens=reasoning,
    )


def content_text(content: Any) -> str:
    """Message/delta ``content``: a string, or (some servers) a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def reasoning_text(source: Mapping[str, Any]) -> str:
    """Reasoning text: ``reasoning_content`` (DeepSeek, vLLM, DashScope) or ``reasoning``
    (OpenRouter, Ollama, newer vLLM). A server that sends both sends the same text."""
    value = source.get("reasoning_content")
    if not isinstance(value, str) or not value:
        value = source.get("reasoning")
    return value if isinstance(value, str) else ""


@dataclass(slots=True)
class ParsedToolCall:
    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class ParsedCompletion:
    """The first choice of a non-streaming response."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ParsedToolCall] = field(default_factory=list)
    usage: ChatUsage | None = None
    finish_reason: str | None = None

    def chunks(self) -> list[ModelChunk]:
        """The same chunks a streaming call would have produced."""
        out: list[ModelChunk] = []
        if self.reasoning:
            out.append(ThinkingChunk(self.reasoning))
        if self.text:
            out.append(TextChunk(self.text))
        for index, call in enumerate(self.tool_calls):
            out.append(ToolCallChunk(index, call.id, call.name, call.arguments, done=True))
        if self.usage is not None:
            out.append(UsageChunk(self.usage))
        if self.finish_reason is not None:
            out.append(FinishChunk(self.finish_reason))
        return out

    def to_msg(self) -> Msg:
        """The response as an assistant ``Msg`` (arguments that are not a JSON object
        are kept in ``ToolUseBlock.raw_input``)."""
        blocks: list[ContentBlock] = []
        if self.reasoning:
            blocks.append(ThinkingBlock(thinking=self.reasoning))
        if self.text:
            blocks.append(TextBlock(text=self.text))
        for call in self.tool_calls:
            try:
                parsed = json.loads(call.arguments) if call.arguments.strip() else {}
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                blocks.append(ToolUseBlock(id=call.id, name=call.name, input=parsed))
            else:
                blocks.append(
                    ToolUseBlock(id=call.id, name=call.name, input={}, raw_input=call.arguments)
                )
        return Msg(role=Role.ASSISTANT, content=blocks, usage=self.usage)


def parse_completion(body: Any) -> ParsedCompletion:
    """Read a ``chat.completion`` body. Raises ``ValueError`` when it is not one."""
    if not isinstance(body, dict):
        raise ValueError(f"expected a JSON object, got {type(body).__name__}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("the response has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ValueError("the first choice has no message")
    parsed = ParsedCompletion(
        text=content_text(message.get("content")),
        reasoning=reasoning_text(message),
        finish_reason=choice.get("finish_reason") if isinstance(
            choice.get("finish_reason"), str
        ) else None,
    )
    for i, call in enumerate(message.get("tool_calls") or []):
        if not isinstance(call, dict):
            raise ValueError(f"tool call #{i} is not an object")
        function = call.get("function") or {}
        arguments = function.get("arguments")
        parsed.tool_calls.append(
            ParsedToolCall(
                id=str(call.get("id") or f"call_{i}"),
                name=str(function.get("name") or ""),
                # Some servers send arguments as an object rather than a JSON string.
                arguments=arguments if isinstance(arguments, str) else json.dumps(
                    arguments if arguments is not None else {}
                ),
            )
        )
    usage = body.get("usage")
    if isinstance(usage, dict):
        parsed.usage = parse_usage(usage)
    return parsed
