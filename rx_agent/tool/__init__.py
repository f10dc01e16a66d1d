"""Tools, the toolkit, and running one tool call (:func:`execute`)."""

from ._execute import execute
from .toolkit import Permission, Tool, ToolArgumentError, Toolkit, tool

__all__ = ["Permission", "Tool", "ToolArgumentError", "Toolkit", "execute", "tool"]
