"""Tools, the toolkit, their middlewares, and running one tool call (:func:`execute`)."""

from ._call import ToolCallHandle, current_tool_call
from ._caller import CallerTool, CallerTools
from ._execute import execute
from ._middleware import ToolMiddleware, ToolMiddlewareError, ToolNext, answer
from ._schema import ToolDefinitionWarning
from .toolkit import Permission, Tool, ToolArgumentError, Toolkit, tool

__all__ = [
    "CallerTool",
    "CallerTools",
    "Permission",
    "Tool",
    "ToolArgumentError",
    "ToolCallHandle",
    "ToolDefinitionWarning",
    "ToolMiddleware",
    "ToolMiddlewareError",
    "ToolNext",
    "Toolkit",
    "answer",
    "current_tool_call",
    "execute",
    "tool",
]
