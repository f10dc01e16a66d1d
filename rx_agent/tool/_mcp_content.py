"""An MCP ``CallToolResult`` as the output and state of a :class:`ToolResultBlock`.

Text stays text; images and audio become :class:`DataBlock` s with their media
type; an embedded resource becomes text (a text resource) or a ``DataBlock`` (a
blob), a resource link a line of text naming it. Only text: the output is one
``str``, as a local tool's. ``isError`` makes the state ERROR.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..message import ContentBlock, DataBlock, TextBlock, ToolResultState

if TYPE_CHECKING:
    from mcp import types

__all__ = ["result_output"]


def result_output(
    result: types.CallToolResult,
) -> tuple[str | list[ContentBlock], ToolResultState]:
    blocks: list[ContentBlock] = []
    for item in result.content:
        blocks.extend(_blocks(item))
    if not blocks and result.structured_content is not None:
        blocks.append(TextBlock(text=json.dumps(result.structured_content, ensure_ascii=False)))
    state = ToolResultState.ERROR if result.is_error else ToolResultState.SUCCESS
    if all(isinstance(b, TextBlock) for b in blocks):
        return "\n".join(b.text for b in blocks if isinstance(b, TextBlock)), state
    return blocks, state


def _blocks(item: Any) -> list[ContentBlock]:
    kind = getattr(item, "type", None)
    if kind == "text":
        return [TextBlock(text=item.text)]
    if kind in ("image", "audio"):
        return [DataBlock(media_type=item.mime_type, data=item.data)]
    if kind == "resource":
        resource = item.resource
        if hasattr(resource, "text"):
            return [TextBlock(text=resource.text)]
        return [DataBlock(media_type=resource.mime_type or "application/octet-stream",
                          data=resource.blob)]
    if kind == "resource_link":
        described = f": {item.description}" if item.description else ""
        return [TextBlock(text=f"[resource {item.name}] {item.uri}{described}")]
    # A content type newer than this adapter: its JSON, so nothing is lost silently.
    dump = item.model_dump(mode="json", by_alias=True, exclude_none=True)
    return [TextBlock(text=json.dumps(dump, ensure_ascii=False))]
