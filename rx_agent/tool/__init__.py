"""Tools, the toolkit, and running one tool call (:func:`execute`)."""

from ._call import ToolCallHandle, current_tool_call
from ._execute import execute
from ._schema import ToolDefinitionWarning
from .toolkit import Permission, Tool, ToolArgumentError, Toolkit, tool

__all__ = [
    "Permission",
    "Tool",
    "ToolArgumentError",
    "ToolCallHandle",
    "ToolDefinitionWarning",
    "Toolkit",
    "current_tool_call",
    "execute",
    "tool",
]
