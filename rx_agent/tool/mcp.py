"""MCP servers as tool sources, through the official ``mcp`` SDK (``rx-agent[mcp]``).

``toolkit.register_mcp(McpToolSource.stdio("python", ["server.py"]))`` adds a
server's tools to a toolkit. The connection opens on first use and lives on the
runtime's loop (see ``_mcp_connection``); the tools are listed once per connection
and again after ``notifications/tools/list_changed``; a call's progress
notifications become tool-result deltas; a closed connection turns the call into an
error result and the next call reconnects. ``agent.close()`` closes it.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, TextIO

from .._rx import running_loop, runtime_loop
from ..context import RuntimeContext
from ..event import ToolResultTextDeltaEvent
from ..message import ContentBlock, ToolResultBlock, ToolResultState
from ..permissions import Permission, PermissionLike, PermissionRule
from ._call import ToolCallHandle, current_tool_call
from ._values import InterruptMode, check_interrupt, check_side_effect
from ._values import check_timeout as _check_timeout
from .toolkit import _NAME_RE, _PERMISSIONS, Tool, ToolArgumentError

if TYPE_CHECKING:
    from ._mcp_connection import Connection, Opener, types

__all__ = ["McpTool", "McpToolSource"]

log = logging.getLogger("rx_agent.mcp")


def _sdk() -> Any:
    """The connection module (it imports the SDK, or names the extra to install)."""
    from . import _mcp_connection

    return _mcp_connection


class McpToolSource:
    """The tools of one MCP server, reached over stdio or streamable HTTP.

    Make one with :meth:`stdio` or :meth:`http` and register it with
    :meth:`Toolkit.register_mcp <rx_agent.Toolkit.register_mcp>`. One source is one
    connection, shared by every toolkit it is registered in and by concurrent calls;
    it opens on first use. :meth:`aclose` (or the agent's ``close()``) closes it; a
    closed source opens again if it is used again.
    """

    def __init__(self, opener: Opener, label: str, *, connect_timeout: float = 30.0) -> None:
        self._opener = opener
        self.label = label
        self.connect_timeout = _check_timeout(connect_timeout)
        self._conn: Connection | None = None
        self._lock: asyncio.Lock | None = None  # made on the runtime's loop
        self._stale = True
        self._listing: list[types.Tool] = []
        self.version = 0  # bumped by each listing

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        cwd: str | None = None,
        errlog: TextIO | None = None,
        name: str | None = None,
        connect_timeout: float = 30.0,
    ) -> McpToolSource:
        """A server spawned as ``command *args`` speaking MCP on its stdin/stdout.

        ``env`` is added to the SDK's default environment (``PATH``, ``HOME``...); the
        server's stderr goes to ``errlog`` (default ``sys.stderr``). ``name`` labels
        the server in messages and in its tools' ``source`` (default: the command)."""
        if not isinstance(command, str) or not command:
            raise ValueError(f"McpToolSource.stdio() needs a command, got {command!r}")
        if isinstance(args, str):
            raise TypeError(f"args must be a list of strings, got the string {args!r}")
        args = [str(a) for a in args]
        opener = _sdk().stdio_opener(command, args, env, cwd, errlog)
        label = name or " ".join(["stdio:" + command, *args])
        return cls(opener, label, connect_timeout=connect_timeout)

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        connect_timeout: float = 30.0,
    ) -> McpToolSource:
        """A server at ``url`` speaking MCP's streamable HTTP transport; ``headers``
        go with every request (an ``Authorization`` header, say). ``name`` labels the
        server in messages (default: the URL)."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"McpToolSource.http() needs an http(s) URL, got {url!r}")
        opener = _sdk().http_opener(url, headers)
        return cls(opener, name or url, connect_timeout=connect_timeout)

    def __repr__(self) -> str:
        return f"McpToolSource({self.label!r})"

    @property
    def connected(self) -> bool:
        """Whether a connection is open now."""
        return self._conn is not None and not self._conn.dead

    @property
    def needs_listing(self) -> bool:
        """Read from any thread: no connection yet, a closed one, or a changed list."""
        return self._stale or self._conn is None or self._conn.dead

    def bind(self, **options: Any) -> _Binding:
        """What :meth:`Toolkit.register_mcp` stores (checks its options)."""
        return _Binding(self, **options)

    async def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools as listed (``name``, ``description``, ``parameters``),
        connecting and listing if needed."""
        await self._call_on_runtime(self._refresh())
        return [{"name": t.name, "description": t.description or "",
                 "parameters": t.input_schema} for t in self._listing]

    async def aclose(self) -> None:
        """Close the connection (a stdio server's process exits); safe to repeat."""
        if self._conn is not None:
            await self._call_on_runtime(self._close())

    def close(self) -> None:
        """:meth:`aclose` for code without a running loop (it waits for the close)."""
        if self._conn is None:
            return
        if running_loop() is not None:
            raise RuntimeError("close() would block the running event loop; use "
                               "`await source.aclose()`")
        asyncio.run_coroutine_threadsafe(self._close(), runtime_loop()).result()

    # -- on the runtime's loop -----------------------------------------------------

    async def _call_on_runtime(self, coro: Any) -> Any:
        return await _sdk().on_runtime(coro)

    def _mark_stale(self) -> None:
        self._stale = True

    async def _connection(self) -> Connection:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            conn = self._conn
            if conn is None or conn.dead:
                if conn is not None:
                    await conn.close()
                conn = _sdk().Connection(self._opener, self.label, self._mark_stale)
                await conn.open(self.connect_timeout)
                self._conn = conn
                self._stale = True  # listed once per connection
            assert conn is not None
            return conn

    async def _refresh(self) -> None:
        conn = await self._connection()
        if not self._stale:
            return
        assert self._lock is not None
        async with self._lock:
            if not self._stale:
                return
            self._stale = False  # a change announced while listing lists again next time
            try:
                self._listing = await conn.list_tools()
            except BaseException:
                self._stale = True
                raise
            self.version += 1

    async def _call(self, name: str, arguments: dict[str, Any], on_progress: Any) -> Any:
        conn = await self._connection()
        return await conn.call_tool(name, arguments, on_progress)

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
        self._stale = True


class _Binding:
    """One registration of a source in a toolkit: prefix, filters, tool options, and
    the tools made from the source's latest listing."""

    def __init__(
        self,
        source: McpToolSource,
        *,
        prefix: str | None,
        include: Sequence[str] | None,
        exclude: Sequence[str] | None,
        permission: PermissionLike,
        rules: Sequence[PermissionRule],
        timeout: float | None,
        concurrency_safe: bool | None,
        side_effect: bool = False,
        interrupt: InterruptMode = "cancel",
    ) -> None:
        if prefix is not None and (not isinstance(prefix, str) or not _NAME_RE.match(prefix)):
            raise ValueError(f"an MCP tool prefix is 1-64 letters, digits, '_', '.' or '-', "
                             f"got {prefix!r}")
        if permission not in _PERMISSIONS:
            raise ValueError(f"permission must be one of {_PERMISSIONS}, got {permission!r}")
        for rule in rules:
            if not isinstance(rule, PermissionRule):
                raise TypeError(f"rules must be PermissionRule, got {type(rule).__name__}")
        if concurrency_safe is not None and not isinstance(concurrency_safe, bool):
            raise TypeError(f"concurrency_safe must be a bool or None, got {concurrency_safe!r}")
        self.source = source
        self.prefix = prefix
        self.include = _patterns("include", include)
        self.exclude = _patterns("exclude", exclude)
        self.permission = Permission(permission)
        self.rules = tuple(rules)
        self.timeout = _check_timeout(timeout)
        self.concurrency_safe = concurrency_safe
        self.side_effect = check_side_effect(None, side_effect)
        self.interrupt = check_interrupt(None, interrupt)
        self.version = 0
        self.tools: list[McpTool] = []

    async def refresh(self) -> None:
        source = self.source
        if source.needs_listing:
            try:
                await source._call_on_runtime(source._refresh())
            except _sdk().McpConnectionError as exc:
                if not source.version:
                    raise  # never listed: the agent cannot know the server's tools
                # Listed before: keep those tools; their calls fail and reconnect.
                log.warning("%s; keeping the tools listed before", exc)
        if self.version != source.version:
            self.tools = [t for spec in source._listing if (t := self._tool(spec)) is not None]
            self.version = source.version

    def _tool(self, spec: types.Tool) -> McpTool | None:
        remote = spec.name
        if self.include is not None and not _matches(remote, self.include):
            return None
        if self.exclude and _matches(remote, self.exclude):
            return None
        name = f"{self.prefix}_{remote}" if self.prefix else remote
        if not _NAME_RE.match(name):
            log.warning("MCP server %s: tool %r skipped: a tool name is 1-64 letters, digits, "
                        "'_', '.' or '-'", self.source.label, name)
            return None
        return McpTool(self, spec, name)

    def install(self, tools: dict[str, Tool]) -> dict[str, Tool]:
        """``tools`` with this binding's earlier tools replaced by the current ones."""
        kept = {n: t for n, t in tools.items()
                if not (isinstance(t, McpTool) and t.binding is self)}
        for tool in self.tools:
            taken = kept.get(tool.name)
            if taken is not None:
                raise ValueError(
                    f"tool name {tool.name!r} is provided twice: by {taken.source} and by "
                    f"{tool.source}; use register_mcp(prefix=...) or exclude=[...]")
            kept[tool.name] = tool
        return kept


class McpTool(Tool):
    """A tool of an MCP server: the server's schema unchanged, calls sent over the
    source's connection. Made by :meth:`Toolkit.register_mcp`, not by hand."""

    def __init__(self, binding: _Binding, spec: types.Tool, name: str) -> None:
        # Not Tool.__init__: there is no Python function to read a schema from.
        self.binding = binding
        self.remote_name = spec.name
        self.name = name
        self.description = spec.description or ""
        self.parameters = spec.input_schema
        self.permission = binding.permission
        self.rules = binding.rules
        self.timeout = binding.timeout
        self.external = False
        hints = spec.annotations
        self.concurrency_safe = (binding.concurrency_safe if binding.concurrency_safe is not None
                                 else bool(hints is not None and hints.read_only_hint))
        self.side_effect = binding.side_effect
        self.interrupt = binding.interrupt
        self.source = f"mcp {binding.source.label}"
        self.context_params = ()
        self._positional = ()
        self.is_async_gen = False
        self.is_async = True
        self.fn = self._direct

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments as given: the server validates them against its schema."""
        if not isinstance(arguments, dict):
            raise ToolArgumentError(f"arguments of tool {self.name!r} must be a JSON object, "
                                    f"got {type(arguments).__name__}")
        return arguments

    def invoke(
        self, kwargs: dict[str, Any], ctx: RuntimeContext | None, executor: Executor | None = None
    ) -> Any:
        return self._call(kwargs, current_tool_call())

    async def _direct(self, **arguments: Any) -> str | list[ContentBlock]:
        """``await tool.fn(**arguments)`` outside an agent: the result's output."""
        return (await self._call(arguments, None)).output

    async def _call(self, arguments: dict[str, Any], handle: ToolCallHandle | None
                    ) -> ToolResultBlock:
        """One ``tools/call``; its progress notifications become text deltas of the
        call (``metadata["progress"]`` holds the numbers). Cancelling it (dispose,
        timeout) cancels the request: the SDK tells the server."""
        source = self.binding.source
        on_progress = _progress_sink(handle)
        output: str | list[ContentBlock]
        try:
            result = await source._call_on_runtime(
                source._call(self.remote_name, arguments, on_progress))
        except Exception as exc:
            output, state = self._failure(exc)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # Cancelled on the runtime's side: the connection is going away.
            output, state = (f"Error: the connection to MCP server {source.label} closed "
                             f"during the call of tool {self.remote_name!r}. The next call "
                             "reconnects.", ToolResultState.ERROR)
        else:
            from ._mcp_content import result_output

            output, state = result_output(result)
        return ToolResultBlock(id=handle.id if handle is not None else "", name=self.name,
                               output=output, state=state)

    def _failure(self, exc: Exception) -> tuple[str, ToolResultState]:
        sdk = _sdk()
        label = self.binding.source.label
        if isinstance(exc, sdk.McpConnectionError):
            return f"Error: {exc}. The next call reconnects.", ToolResultState.ERROR
        if isinstance(exc, sdk.MCPError):
            return (f"Error: MCP server {label} refused the call of tool "
                    f"{self.remote_name!r}: {exc.message} (code {exc.code})",
                    ToolResultState.ERROR)
        raise exc

    def __repr__(self) -> str:
        return f"McpTool(name={self.name!r}, source={self.binding.source.label!r})"


def _progress_sink(handle: ToolCallHandle | None) -> Any:
    """``notifications/progress`` (on the runtime's loop) → a text delta of the call
    (``emit`` hops to the call's loop)."""

    def on_progress(value: float, total: float | None, message: str | None) -> None:
        if handle is None:
            return
        amount = f"{value:g}" + (f"/{total:g}" if total is not None else "")
        handle.emit(ToolResultTextDeltaEvent.make(
            handle.source, reply_id=handle.reply_id, tool_call_id=handle.id,
            tool_call_name=handle.name, delta=f"[{amount}] {message or ''}".rstrip() + "\n",
            metadata={"progress": {"progress": value, "total": total, "message": message}}))

    return on_progress


def _patterns(label: str, value: Sequence[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"{label} takes a list of tool names, got the string {value!r}")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{label} takes tool names (or globs), got {name!r}")
    return names


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)

