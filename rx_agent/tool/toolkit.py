"""Tools: ``@tool`` functions, their JSON schemas, validation and execution.

A tool is a plain or ``async`` function (or an async generator that streams text).
Its JSON Schema comes from the type hints through pydantic; a parameter annotated
:class:`RuntimeContext` is injected by the runtime and hidden from the model.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from typing import Any, overload

from pydantic import ConfigDict, ValidationError, create_model

from ..context import RuntimeContext
from ..errors import RxAgentError
from ..permissions import Permission, PermissionLike, PermissionRule
from ._call import may_start
from ._codes import remember_code
from ._middleware import ToolMiddleware, check_middlewares, execute_tool, with_middleware
from ._run import NOT_STARTED, SyncAwaitable
from ._schema import (
    argument_fields,
    definition_problems,
    schema_error,
    split_docstring,
    strip_titles,
    validation_problems,
    warn_definition,
)
from ._threads import tool_threads
from ._values import InterruptMode, check_interrupt, check_side_effect
from ._values import check_timeout as _check_timeout

__all__ = ["Permission", "Tool", "ToolArgumentError", "Toolkit", "tool"]


_PERMISSIONS = ("allow", "ask", "deny")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class ToolArgumentError(RxAgentError, ValueError):
    """A tool call's arguments do not match the tool's schema."""


class Tool:
    """A function exposed to the model, with its schema and execution policy."""

    # Its own middlewares, outermost first (docs/concepts/tool-middleware.md).
    middlewares: tuple[ToolMiddleware, ...] = ()
    # Declared by @tool (docs/concepts/tool-middleware.md, "Side effects and interrupts").
    side_effect: bool = False
    interrupt: InterruptMode = "cancel"
    with_middleware = with_middleware
    execute = execute_tool

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        permission: PermissionLike = "allow",
        external: bool = False,
        concurrency_safe: bool = False,
        rules: Sequence[PermissionRule] = (),
        timeout: float | None = None,
        middlewares: Sequence[ToolMiddleware] = (),
        side_effect: bool = False,
        interrupt: InterruptMode = "cancel",
    ) -> None:
        if not callable(fn):
            raise TypeError(f"a tool must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not _NAME_RE.match(self.name):
            raise ValueError(
                f"tool name {self.name!r} is invalid: use 1-64 letters, digits, '_', '.' or '-'"
            )
        if permission not in _PERMISSIONS:
            raise ValueError(f"permission must be one of {_PERMISSIONS}, got {permission!r}")
        self.permission = Permission(permission)
        self.external = external
        self.concurrency_safe = concurrency_safe
        self.timeout = _check_timeout(timeout)
        self.side_effect = check_side_effect(self.name, side_effect)
        self.interrupt = check_interrupt(self.name, interrupt)
        self.rules: tuple[PermissionRule, ...] = tuple(rules)
        if middlewares:
            self.middlewares = check_middlewares(self.name, middlewares)
        # Where the agent got it ("toolkit", "built-in", "middleware X", "plugin p"),
        # for messages naming a clash; the agent sets it when it merges its tools.
        self.source = "toolkit"
        for rule in self.rules:
            if not isinstance(rule, PermissionRule):
                raise TypeError(f"tool rules must be PermissionRule, got {type(rule).__name__}")
        summary, param_docs = split_docstring(inspect.getdoc(fn))
        self.description = description if description is not None else summary
        self._build_model(fn, param_docs)
        self.is_async_gen = inspect.isasyncgenfunction(fn)
        self.is_async = inspect.iscoroutinefunction(fn) or (
            not inspect.isfunction(fn) and inspect.iscoroutinefunction(type(fn).__call__)
        )
        functools.update_wrapper(self, fn)
        remember_code(fn, self.name)

    def _build_model(self, fn: Callable[..., Any], docs: dict[str, str]) -> None:
        """Set the arguments model, the JSON schema and how arguments reach ``fn``.

        Every parameter the model fills is a field (:func:`argument_fields`).
        """
        fields, names, ctx_params, positional, checked = argument_fields(self.name, fn, docs)
        try:
            model = create_model(
                f"{self.name}_arguments",
                __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
                **fields,
            )
            schema = model.model_json_schema()
        except Exception as exc:
            raise schema_error(self.name, fields, dict(names), exc) from exc
        self.definition_problems = definition_problems(self.name, self.description, checked)
        self._args_model = model
        self._fields: tuple[tuple[str, str], ...] = tuple(names)
        self.context_params: tuple[str, ...] = tuple(ctx_params)
        # Positional-only parameters are passed by position, in signature order.
        self._positional: tuple[str, ...] = tuple(positional)
        self.parameters: dict[str, Any] = strip_titles(schema)
        self.parameters.setdefault("properties", {})

    # -- descriptor: ``@tool`` on a method binds like a method ----------------------

    def __get__(self, obj: Any, objtype: Any = None) -> Tool:
        if obj is None:
            return self
        bound = Tool.__new__(Tool)
        bound.__dict__.update(self.__dict__)
        bound.fn = self.fn.__get__(obj, objtype)
        return bound

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def schema(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}`` as sent to the model."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments for the function, or :class:`ToolArgumentError`."""
        if not isinstance(arguments, dict):
            raise ToolArgumentError(
                f"arguments of tool {self.name!r} must be a JSON object, "
                f"got {type(arguments).__name__}"
            )
        try:
            parsed = self._args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = validation_problems(exc)
            raise ToolArgumentError(
                f"invalid arguments for tool {self.name!r}: {problems}"
            ) from None
        return {pname: getattr(parsed, field) for field, pname in self._fields}

    def invoke(
        self,
        kwargs: dict[str, Any],
        ctx: RuntimeContext | None,
        executor: Executor | None = None,
    ) -> Any:
        """Start the tool: an awaitable of its result, or an async iterator of chunks.

        Must be called on the event loop. Synchronous functions run on ``executor``
        (the runtime's tool threads when ``None``) with the caller's contextvars, so
        the loop never blocks.
        """
        call_kwargs = dict(kwargs)
        for pname in self.context_params:
            call_kwargs[pname] = ctx
        args: tuple[Any, ...] = ()
        if self._positional:
            # Absent names are skipped: a bound method's ``self`` is not passed.
            args = tuple(call_kwargs.pop(p) for p in self._positional if p in call_kwargs)
        if self.is_async_gen or self.is_async:
            return self.fn(*args, **call_kwargs)
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        if executor is None:
            # The runtime's warm tool threads: one queue hop, one future of the loop.
            return tool_threads().run(loop, context, self._run_sync, args, call_kwargs)
        runner = functools.partial(context.run, self._run_sync, args, call_kwargs)
        return loop.run_in_executor(executor, runner)

    def _run_sync(self, args: tuple[Any, ...], call_kwargs: dict[str, Any]) -> Any:
        if not may_start():  # the reply was interrupted while the call waited for a thread
            return NOT_STARTED
        result = self.fn(*args, **call_kwargs)
        if inspect.isgenerator(result):
            return list(result)  # a sync generator: drained off-loop
        if inspect.isawaitable(result):
            return SyncAwaitable(result)
        return result

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, permission={self.permission!r})"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    permission: PermissionLike = "allow",
    external: bool = False,
    concurrency_safe: bool = False,
    rules: Sequence[PermissionRule] = (),
    timeout: float | None = None,
    middlewares: Sequence[ToolMiddleware] = (),
    side_effect: bool = False,
    interrupt: InterruptMode = "cancel",
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    permission: PermissionLike = "allow",
    external: bool = False,
    concurrency_safe: bool = False,
    rules: Sequence[PermissionRule] = (),
    timeout: float | None = None,
    middlewares: Sequence[ToolMiddleware] = (),
    side_effect: bool = False,
    interrupt: InterruptMode = "cancel",
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a tool: ``@tool`` or ``@tool(name=..., description=...)``.

    The decorated function stays callable. Its name is the function's ``__name__``
    unless given; its description is the docstring's summary; parameter descriptions
    come from the docstring's ``Args:`` section or ``Annotated[..., Field(...)]``.
    ``timeout`` (seconds) bounds one call: past it the call is cancelled and the model
    gets an error result (the agent's ``tool_timeout`` applies when it is ``None``).
    ``middlewares`` wrap each call of the tool, wherever it runs (the first is the
    outermost; see :meth:`Tool.with_middleware`).

    ``side_effect=True``: its effect must not happen twice; in a durable session a
    call is journaled and never run again after a crash (its result says it may have
    run). ``interrupt``: ``agent.interrupt()`` cancels a running call (``"cancel"``,
    the default) or lets it ``"finish"`` and keeps its result.
    """
    check_side_effect(name, side_effect)  # at decoration time, before the function
    check_interrupt(name, interrupt)

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(
            f,
            name=name,
            description=description,
            permission=permission,
            external=external,
            concurrency_safe=concurrency_safe,
            rules=rules,
            timeout=timeout,
            middlewares=middlewares,
            side_effect=side_effect,
            interrupt=interrupt,
        )

    return wrap(fn) if fn is not None else wrap


class Toolkit:
    """The tools an agent may call, by name."""

    def __init__(
        self, tools: list[Callable[..., Any]] | None = None, *, executor: Executor | None = None
    ) -> None:
        self._tools: dict[str, Tool] = {}
        self.executor = executor
        # MCP servers (register_mcp): their tools join _tools when listed; _installed
        # says which listing of each binding _tools holds.
        self._sources: list[Any] = []
        self._installed: dict[int, int] = {}
        for fn in tools or ():
            self.register_tool(fn)

    def register_tool(
        self,
        fn: Callable[..., Any] | object,
        permission: PermissionLike | None = None,
        external: bool | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        concurrency_safe: bool | None = None,
        rules: Sequence[PermissionRule] | None = None,
        timeout: float | None = None,
        side_effect: bool | None = None,
        interrupt: InterruptMode | None = None,
    ) -> Tool:
        """Register a function (or ``@tool``) — or every ``@tool`` method of an object.

        ``permission`` (``"allow"``, ``"ask"`` or ``"deny"``; default allow) is the
        tool's default decision; ``external=True`` means the tool runs outside the
        agent (the agent asks the caller to run it); ``rules`` are permission rules
        for this tool only (predicates over its arguments, usually); ``timeout``
        bounds one call in seconds (default: the tool's own, else the agent's);
        ``side_effect`` and ``interrupt`` are :func:`tool`'s (default: the tool's own).
        """
        if permission is not None and permission not in _PERMISSIONS:
            raise ValueError(f"permission must be one of {_PERMISSIONS}, got {permission!r}")
        if not callable(fn) or (not isinstance(fn, Tool) and _tool_methods(fn)):
            methods = _tool_methods(fn)
            if not methods:
                raise TypeError(
                    f"cannot register {type(fn).__name__}: not callable and has no @tool methods"
                )
            last: Tool | None = None
            for method in methods:
                last = self.register_tool(
                    method, permission, external, concurrency_safe=concurrency_safe,
                    side_effect=side_effect, interrupt=interrupt,
                )
            assert last is not None
            return last
        base = fn if isinstance(fn, Tool) else None
        spec = Tool(
            base.fn if base else fn,
            name=name or (base.name if base else None),
            description=description if description is not None
            else (base.description if base else None),
            permission=permission or (base.permission if base else "allow"),
            external=external if external is not None else (base.external if base else False),
            concurrency_safe=concurrency_safe if concurrency_safe is not None
            else (base.concurrency_safe if base else False),
            rules=rules if rules is not None else (base.rules if base else ()),
            timeout=timeout if timeout is not None else (base.timeout if base else None),
            middlewares=base.middlewares if base else (),
            side_effect=side_effect if side_effect is not None
            else (base.side_effect if base else False),
            interrupt=interrupt if interrupt is not None
            else (base.interrupt if base else "cancel"),
        )
        if spec.name in self._tools:
            raise ValueError(f"a tool named {spec.name!r} is already registered")
        warn_definition(spec.name, spec.definition_problems)
        self._tools[spec.name] = spec
        return spec

    def register_mcp(
        self,
        source: Any,
        prefix: str | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        *,
        permission: PermissionLike = "allow",
        rules: Sequence[PermissionRule] = (),
        timeout: float | None = None,
        concurrency_safe: bool | None = None,
        side_effect: bool = False,
        interrupt: InterruptMode = "cancel",
    ) -> None:
        """Add the tools of an MCP server (an :class:`~rx_agent.McpToolSource`).

        Nothing connects here: the tools are listed on the connection's first use (an
        agent call, or :meth:`refresh`) and again after the server says its list
        changed. A tool keeps the server's name, or gets ``f"{prefix}_{name}"``;
        ``include`` / ``exclude`` are server tool names or globs. ``permission``,
        ``rules`` and ``timeout`` apply to each of its tools as to a local tool's;
        ``concurrency_safe`` defaults to the server's ``readOnlyHint``; ``side_effect``
        and ``interrupt`` are :func:`tool`'s, for each of its tools.
        """
        if not callable(getattr(source, "bind", None)):
            raise TypeError("register_mcp takes an McpToolSource (McpToolSource.stdio(...) or "
                            f".http(...)), got {type(source).__name__} {source!r}")
        bound = source.bind(prefix=prefix, include=include, exclude=exclude,
                            permission=permission, rules=rules, timeout=timeout,
                            concurrency_safe=concurrency_safe, side_effect=side_effect,
                            interrupt=interrupt)
        for other in self._sources:
            if other.source is source and other.prefix == bound.prefix:
                raise ValueError(f"{source!r} is registered already with prefix {prefix!r}")
        self._sources.append(bound)

    @property
    def has_sources(self) -> bool:
        """Whether MCP servers are registered (their tools need :meth:`refresh`)."""
        return bool(self._sources)

    async def refresh(self) -> None:
        """List the tools of each MCP server not listed on its connection yet (or whose
        list changed), connecting if needed; the agent does it before each call."""
        for bound in self._sources:
            await bound.refresh()
            if self._installed.get(id(bound)) != bound.version:
                self._tools = bound.install(self._tools)  # a new dict: readers never see a half
                self._installed[id(bound)] = bound.version

    def tool(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Decorator form of :meth:`register_tool` (``@toolkit.tool`` or with options)."""
        if fn is not None:
            self.register_tool(fn)
            return fn

        def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
            self.register_tool(f, **options)
            return f

        return wrap

    def copy(self) -> Toolkit:
        """A new toolkit with the same tools (the same ``Tool`` objects), executor and
        MCP sources; adding to it leaves this one unchanged."""
        kit = Toolkit(executor=self.executor)
        kit._tools = dict(self._tools)
        kit._sources = list(self._sources)  # MCP servers, listed on use
        kit._installed = dict(self._installed)  # which listing its MCP tools are from
        return kit

    def remove_tool(self, name: str) -> None:
        if name not in self._tools:
            raise KeyError(f"no tool named {name!r}")
        del self._tools[name]

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """One ``{"name", "description", "parameters"}`` dict per tool."""
        return [t.schema for t in self._tools.values()]

    def __repr__(self) -> str:
        return f"Toolkit({self.names!r})"


def _tool_methods(obj: object) -> list[Tool]:
    found = []
    for attr in dir(type(obj)):
        if isinstance(inspect.getattr_static(type(obj), attr, None), Tool):
            found.append(getattr(obj, attr))
    return found
