"""An MCP server's tools in an agent: ``McpToolSource.stdio`` + ``toolkit.register_mcp``.

The example writes a tiny MCP server (the ``mcp`` SDK's ``MCPServer``) to a temporary
file, and the agent spawns it over stdio on its first call. The scripted model calls
two of its tools; the progress the server reports streams as tool-result deltas; a
permission rule denies the third; ``async with agent`` stops the server at the end.

Needs the mcp extra, from a checkout: pip install -e '.[mcp]'
Run: python examples/mcp_tools.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from rx_agent import (
    AgentResultEvent,
    McpToolSource,
    PermissionRule,
    ReActAgent,
    ScriptedModel,
    Toolkit,
    ToolResultEndEvent,
    ToolResultTextDeltaEvent,
    ToolUseBlock,
)

# --8<-- [start:server]
SERVER = '''
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("units")


@server.tool()
def to_celsius(fahrenheit: float) -> str:
    """Convert degrees Fahrenheit to Celsius."""
    return f"{(fahrenheit - 32) * 5 / 9:.1f} C"


@server.tool()
async def count_words(text: str, ctx: Context) -> int:
    """Count the words of a text, reporting progress."""
    words = text.split()
    for i in range(1, len(words) + 1):
        await ctx.report_progress(i, len(words))
    return len(words)


@server.tool()
def delete_everything() -> str:
    """Never called: a permission rule denies it."""
    return "gone"


server.run("stdio")
'''
# --8<-- [end:server]


async def main(folder: Path) -> None:
    script = folder / "units_server.py"
    script.write_text(SERVER, encoding="utf-8")
    # --8<-- [start:agent]
    toolkit = Toolkit()
    toolkit.register_mcp(McpToolSource.stdio(sys.executable, [str(script)], name="units"),
                         prefix="units")
    model = ScriptedModel([
        [ToolUseBlock(id="c1", name="units_to_celsius", input={"fahrenheit": 212}),
         ToolUseBlock(id="c2", name="units_count_words", input={"text": "one two three"}),
         ToolUseBlock(id="c3", name="units_delete_everything", input={})],
        "Water boils at 100 C; the text has 3 words.",
    ])
    agent = ReActAgent(
        name="assistant", model=model, toolkit=toolkit,
        permission_rules=[PermissionRule(pattern="units_delete_*", decision="deny")],
    )
    async with agent:  # closing the agent stops the server
        async for event in agent.astream("Convert 212 F and count my words."):
            if isinstance(event, ToolResultTextDeltaEvent):
                print(f"  {event.tool_call_name}: {event.delta.strip()}")
            elif isinstance(event, ToolResultEndEvent):
                print(f"  {event.tool_call_name} -> {event.state.value}")
            elif isinstance(event, AgentResultEvent):
                print("answer:", event.result.text)
        print("tools:", ", ".join(toolkit.names))
    # --8<-- [end:agent]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp)))
