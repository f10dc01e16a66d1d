"""One MCP server (``MCPServer``, the SDK's high-level server API) with a tool per test
case: results of every content kind, a tool error, progress, a slow tool that records
its cancellation, a crash, a list change, and a tool that measures concurrency.

Run as a script it serves over stdio; ``tests/tool/mcp_servers/http.py`` serves the
same tools over streamable HTTP. ``RX_MCP_EVENTS`` names a file the server appends a
line to for each event a test checks from outside (``cancelled slow``, ``called X``).
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from collections.abc import Callable

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


def build(record: Callable[[str], None]) -> MCPServer:
    server = MCPServer("toolbox")
    in_flight = [0, 0]  # now, peak

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        record(f"called add {a} {b}")
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        record(f"called echo {text}")
        return text

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails with the reason."""
        raise ToolError(f"cannot do that: {reason}")

    @server.tool()
    def picture() -> list[types.ContentBlock]:
        """Text, an image, an embedded text resource and an embedded blob."""
        return [
            types.TextContent(text="a picture"),
            types.ImageContent(data=PIXEL, mime_type="image/png"),
            types.EmbeddedResource(resource=types.TextResourceContents(
                uri="file:///notes.txt", mime_type="text/plain", text="the notes")),
            types.EmbeddedResource(resource=types.BlobResourceContents(
                uri="file:///data.bin", mime_type="application/octet-stream", blob=PIXEL)),
        ]

    @server.tool()
    async def progress(steps: int, ctx: Context) -> str:
        """Report progress ``steps`` times, then answer."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
        return f"{steps} steps done"

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, recording whether the client cancelled the request."""
        record("started slow")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            record("cancelled slow")
            raise
        return "slept"

    @server.tool()
    def crash() -> str:
        """The server process dies mid-call."""
        record("crashing")
        os._exit(3)

    @server.tool()
    async def pause(seconds: float) -> int:
        """Sleep; answer how many calls were in flight at most so far."""
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        try:
            await asyncio.sleep(seconds)
        finally:
            in_flight[0] -= 1
        return in_flight[1]

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Add a tool named ``name`` and tell the client the list changed."""

        def added(text: str) -> str:
            return f"{name}: {text}"

        server.add_tool(added, name=name, description=f"added at run time as {name}")
        await ctx.request_context.session.send_tool_list_changed()
        return f"added {name}"

    return server


def file_recorder(path: str | None) -> Callable[[str], None]:
    def record(line: str) -> None:
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    return record


if __name__ == "__main__":
    build(file_recorder(os.environ.get("RX_MCP_EVENTS"))).run("stdio")
    sys.exit(0)
