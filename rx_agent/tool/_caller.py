"""Tools the caller runs: one call's external tools, known by their schema only.

A protocol client brings tools of its own (an AG-UI front end's tools, the ``tools`` of
an OpenAI-style request). For that call the model sees them next to the agent's, and
calling one pauses the reply for external execution
(``RequireExternalExecutionEvent``); the caller answers with an
``ExternalExecutionResultEvent`` on the next call, as for a tool registered with
``external=True``. Put them in the call's context::

    ctx.put(CallerTools, CallerTools([{"name": "confirm_date", "description": "...",
                                       "parameters": {...}}]))
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import Executor
from typing import Any

from ..context import RuntimeContext
from ..permissions import Permission
from .toolkit import _NAME_RE, Tool, ToolArgumentError, Toolkit

__all__ = ["CallerTool", "CallerTools"]


class CallerTool(Tool):
    """A tool the caller runs: its schema is all the agent knows (always external)."""

    def __init__(self, name: str, description: str = "",
                 parameters: Mapping[str, Any] | None = None) -> None:
        # Not Tool.__init__: there is no Python function to read a schema from.
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"tool name {name!r} is invalid: use 1-64 letters, digits, "
                             "'_', '.' or '-'")
        if not isinstance(description, str):
            raise TypeError(f"the description of tool {name!r} must be a str, "
                            f"not {type(description).__name__}")
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        if not isinstance(parameters, Mapping):
            raise TypeError(f"the parameters of tool {name!r} must be a JSON Schema object, "
                            f"not {type(parameters).__name__}")
        self.name = name
        self.description = description
        self.parameters = dict(parameters)
        self.permission = Permission.ALLOW  # the caller decides when it runs it
        self.rules = ()
        self.external = True
        self.concurrency_safe = False
        self.timeout = None
        self.source = "the caller"
        self.context_params = ()
        self._positional = ()
        self.is_async_gen = False
        self.is_async = True
        self.fn = self._elsewhere

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments as given: the caller validates them against its schema."""
        if not isinstance(arguments, dict):
            raise ToolArgumentError(f"arguments of tool {self.name!r} must be a JSON object, "
                                    f"got {type(arguments).__name__}")
        return arguments

    def invoke(self, kwargs: dict[str, Any], ctx: RuntimeContext | None,
               executor: Executor | None = None) -> Any:
        return self._elsewhere()

    async def _elsewhere(self, **_: Any) -> Any:
        raise RuntimeError(f"tool {self.name!r} runs at the caller, not in the agent")

    def __repr__(self) -> str:
        return f"CallerTool(name={self.name!r})"


class CallerTools:
    """The caller's tools for one call: ``ctx.put(CallerTools, CallerTools([...]))``.

    Each item is a :class:`CallerTool` or a schema mapping with ``name``, optional
    ``description`` and ``parameters`` (a JSON Schema object). A name the agent's own
    toolkit has, or a name given twice, is a ``ValueError``.
    """

    __slots__ = ("tools",)

    def __init__(self, tools: Iterable[CallerTool | Mapping[str, Any]]) -> None:
        made: dict[str, CallerTool] = {}
        for i, given in enumerate(tools):
            if isinstance(given, CallerTool):
                item = given
            elif isinstance(given, Mapping):
                unknown = sorted(set(given) - {"name", "description", "parameters"})
                if unknown:
                    raise ValueError(f"caller tool #{i} has unknown key(s) {unknown}; expected "
                                     "name, description and parameters")
                item = CallerTool(given.get("name", ""), given.get("description") or "",
                                  given.get("parameters"))
            else:
                raise TypeError(f"caller tool #{i} must be a CallerTool or a schema mapping, "
                                f"not {type(given).__name__}")
            if item.name in made:
                raise ValueError(f"the caller's tools name {item.name!r} twice")
            made[item.name] = item
        self.tools: tuple[CallerTool, ...] = tuple(made.values())

    def clashes(self, toolkit: Toolkit) -> list[str]:
        """The names the caller's tools share with ``toolkit``'s."""
        return [t.name for t in self.tools if t.name in toolkit]

    def overlay(self, toolkit: Toolkit) -> Toolkit:
        """``toolkit`` plus these tools, for one call (``toolkit`` is left unchanged)."""
        if not self.tools:
            return toolkit
        clash = self.clashes(toolkit)
        if clash:
            raise ValueError(f"the caller's tool(s) {', '.join(map(repr, clash))} have the "
                             "name of one of the agent's own tools; rename them")
        kit = toolkit.copy()
        for item in self.tools:
            kit._put(item)  # a runtime tool: no registration, no source
        return kit

    def __len__(self) -> int:
        return len(self.tools)

    def __repr__(self) -> str:
        return f"CallerTools({[t.name for t in self.tools]!r})"
