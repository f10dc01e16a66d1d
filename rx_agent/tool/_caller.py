"""Tools the caller of one call runs itself: :class:`CallerTools`.

A protocol front end (the OpenAI-compatible endpoint, AG-UI) receives, with each
request, tools that live on the client. They join that call's toolkit as *external*
tools: the model sees them, and a call to one pauses the reply with a
``RequireExternalExecutionEvent`` that the client answers with an
``ExternalExecutionResultEvent``, as for any ``external=True`` tool. The agent's own
toolkit is never changed: put the tools in the call's context,
``ctx.put(CallerTools, CallerTools([...]))``, and the agent overlays them for that
call only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..permissions import Permission
from .toolkit import _NAME_RE, Tool, ToolArgumentError, Toolkit

__all__ = ["CallerTool", "CallerTools"]


class CallerTool(Tool):
    """A tool known only by its schema; the caller runs it (always ``external``)."""

    def __init__(self, name: str, description: str, parameters: Mapping[str, Any]) -> None:
        # Not Tool.__init__: there is no function, the schema is the client's.
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"tool name {name!r} is invalid: use 1-64 letters, digits, "
                             "'_', '.' or '-'")
        self.fn = self._never
        self.name = name
        self.description = description
        self.parameters = dict(parameters)
        self.permission = Permission.ALLOW
        self.rules = ()
        self.external = True
        self.concurrency_safe = False
        self.timeout = None
        self.source = "caller"
        self.context_params = ()
        self._positional = ()
        self.is_async_gen = False
        self.is_async = False

    @staticmethod
    def _never(**kwargs: Any) -> Any:  # pragma: no cover - external tools never run here
        raise RuntimeError("a caller's tool runs on the caller's side, not in the agent")

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise ToolArgumentError(f"arguments of tool {self.name!r} must be a JSON object, "
                                    f"got {type(arguments).__name__}")
        return arguments  # the caller checks its own schema


class CallerTools:
    """The caller's tools for one call: ``{"name", "description", "parameters"}``
    schemas, each becoming an external :class:`CallerTool`."""

    __slots__ = ("tools",)

    def __init__(self, schemas: Iterable[Mapping[str, Any]]) -> None:
        tools: dict[str, CallerTool] = {}
        for schema in schemas:
            tool = CallerTool(schema["name"], str(schema.get("description") or ""),
                              schema.get("parameters") or {"type": "object", "properties": {}})
            if tool.name in tools:
                raise ValueError(f"the caller's tools name {tool.name!r} twice")
            tools[tool.name] = tool
        self.tools: tuple[CallerTool, ...] = tuple(tools.values())

    def clashes(self, toolkit: Toolkit) -> list[str]:
        """Names of the caller's tools that the toolkit has already."""
        return [t.name for t in self.tools if toolkit.get(t.name) is not None]

    def overlay(self, toolkit: Toolkit) -> Toolkit:
        """The call's toolkit: ``toolkit``'s tools plus these (``toolkit`` is unchanged)."""
        if not self.tools:
            return toolkit
        clashes = self.clashes(toolkit)
        if clashes:
            raise ValueError(f"the caller's tool(s) {', '.join(map(repr, clashes))} have the "
                             "name of one of the agent's own tools; rename them")
        overlay = toolkit.copy()
        for tool in self.tools:
            overlay._tools[tool.name] = tool
        return overlay

    def __repr__(self) -> str:
        return f"CallerTools({[t.name for t in self.tools]!r})"
