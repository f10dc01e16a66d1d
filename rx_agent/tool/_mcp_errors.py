"""The error of an MCP connection, in a module of its own so that it imports without
the ``mcp`` extra (``rx_agent.errors`` re-exports it)."""

from __future__ import annotations

from ..errors import RxAgentError

__all__ = ["McpConnectionError"]


class McpConnectionError(RxAgentError, ConnectionError):
    """The MCP server could not be reached, or its connection closed."""
