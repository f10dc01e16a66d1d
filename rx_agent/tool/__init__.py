"""Tools and the toolkit."""

from .toolkit import Permission, Tool, ToolArgumentError, Toolkit, tool

__all__ = ["Permission", "Tool", "ToolArgumentError", "Toolkit", "tool"]
