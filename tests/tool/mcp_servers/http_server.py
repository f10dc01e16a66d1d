"""The toolbox server over streamable HTTP on 127.0.0.1: ``python http_server.py PORT``.

A subprocess (not a thread of the test process) so that ``crash`` kills only it.
It also has ``header(name)``, answering a request header it received.
"""

from __future__ import annotations

import os
import sys

import uvicorn
from mcp.server.mcpserver import Context

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from toolbox import build, file_recorder


def main(port: int) -> None:
    server = build(file_recorder(os.environ.get("RX_MCP_EVENTS")))

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """The value of request header ``name`` ("" when absent)."""
        return (ctx.headers or {}).get(name.lower(), "")

    app = server.streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]))
