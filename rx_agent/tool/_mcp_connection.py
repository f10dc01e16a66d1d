"""One MCP connection: a task on the runtime's loop that owns a transport and its
``ClientSession`` from the handshake to the close.

The SDK is anyio-based and its sessions live in task groups whose scopes must be
entered and left by one task; calls come from whatever loop an agent call runs on.
So every connection lives on the runtime's own loop (``_rx.runtime_loop()``), which
outlives single calls, and callers reach it with :func:`on_runtime`; cancelling the
caller cancels the request there, and the SDK then sends ``notifications/cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TextIO, TypeVar

from .._rx import running_loop, runtime_loop
from ._mcp_errors import McpConnectionError

try:
    import anyio
    import httpx2
    from mcp import ClientSession, StdioServerParameters, stdio_client, types
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # only without the extra
    raise ImportError(
        "MCP tools need the MCP SDK: pip install 'rx-agent[mcp]' (from a checkout: "
        "pip install -e '.[mcp]')"
    ) from exc

__all__ = ["Connection", "McpConnectionError", "Opener", "http_opener", "on_runtime",
           "stdio_opener", "types"]

log = logging.getLogger("rx_agent.mcp")

T = TypeVar("T")
Streams = tuple[Any, Any]
Opener = Callable[[], AbstractAsyncContextManager[Streams]]
Progress = Callable[[float, float | None, str | None], None]

# JSON-RPC code the SDK answers pending requests with when the transport closed.
_CONNECTION_CLOSED = -32000
# What a transport raises when its peer went away (the SDK mostly answers with
# CONNECTION_CLOSED instead; these are the ones that escape it).
_TRANSPORT_ERRORS = (OSError, EOFError, anyio.BrokenResourceError, anyio.ClosedResourceError,
                     anyio.EndOfStream, httpx2.TransportError)


async def on_runtime(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the runtime's loop from any loop; cancelling the awaiting
    task cancels it there."""
    loop = runtime_loop()
    if running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


def stdio_opener(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    errlog: TextIO | None,
) -> Opener:
    params = StdioServerParameters(command=command, args=list(args),
                                   env=dict(env) if env is not None else None, cwd=cwd)

    def open_() -> AbstractAsyncContextManager[Streams]:
        return stdio_client(params, errlog=errlog if errlog is not None else sys.stderr)

    return open_


def http_opener(url: str, headers: Mapping[str, str] | None) -> Opener:
    @contextlib.asynccontextmanager
    async def open_() -> Any:
        async with (
            create_mcp_http_client(headers=dict(headers or {})) as client,
            streamable_http_client(url, http_client=client) as streams,
        ):
            yield streams

    return open_


class Connection:
    """A live session (on the runtime's loop). ``dead`` once it closed for any reason."""

    def __init__(self, opener: Opener, label: str, on_list_changed: Callable[[], None]) -> None:
        self._opener = opener
        self.label = label
        self._on_list_changed = on_list_changed
        self.session: ClientSession | None = None
        self.dead = False
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def open(self, timeout: float) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._serve(ready), name=f"mcp {self.label}")
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(ready)
        except TimeoutError:
            await self.close()
            raise McpConnectionError(
                f"MCP server {self.label} did not complete the handshake within {timeout:g} s"
            ) from None
        except BaseException:
            await self.close()
            raise

    async def _serve(self, ready: asyncio.Future[None]) -> None:
        try:
            async with (
                self._opener() as (read, write),
                ClientSession(read, write, message_handler=self._on_message) as session,
            ):
                await session.initialize()
                self.session = session
                ready.set_result(None)
                await self._stop.wait()
        except asyncio.CancelledError:
            ready.cancel()  # closed while connecting (no-op once connected)
            raise
        except BaseException as exc:  # the task ends here: nothing else may escape it
            if not ready.done():
                ready.set_exception(McpConnectionError(
                    f"cannot connect to MCP server {self.label}: {_reason(exc)}"))
            else:
                log.debug("MCP connection %s ended: %r", self.label, exc)
        finally:
            self.dead = True
            self.session = None

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._on_list_changed()
        elif isinstance(message, Exception):
            log.debug("MCP transport error from %s: %r", self.label, message)

    async def list_tools(self) -> list[types.Tool]:
        session = self._live()
        found: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._guard(session.list_tools(params=params), "listing tools")
            found.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return found

    async def call_tool(
        self, name: str, arguments: dict[str, Any], on_progress: Progress
    ) -> types.CallToolResult:
        session = self._live()

        async def report(progress: float, total: float | None, message: str | None) -> None:
            on_progress(progress, total, message)

        result = await self._guard(
            session.call_tool(name, arguments, progress_callback=report),
            f"calling tool {name!r}",
        )
        assert isinstance(result, types.CallToolResult)  # no input-required or claims asked
        return result

    def _live(self) -> ClientSession:
        if self.dead or self.session is None:
            raise McpConnectionError(f"the connection to MCP server {self.label} is closed")
        return self.session

    async def _guard(self, request: Coroutine[Any, Any, T], doing: str) -> T:
        """Await ``request``; a closed transport marks the connection dead."""
        try:
            return await request
        except MCPError as exc:
            if exc.code != _CONNECTION_CLOSED:
                raise
            failure: BaseException = exc
        except _TRANSPORT_ERRORS as exc:
            failure = exc
        self.dead = True
        self._stop.set()
        raise McpConnectionError(
            f"MCP server {self.label} closed the connection while {doing}: {_reason(failure)}"
        ) from failure

    async def close(self) -> None:
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            if self.session is None:
                task.cancel()  # still connecting: a handshake that hangs is not waited for
            await asyncio.wait({task})  # the transport's own shutdown (the process exits)
        self.dead = True


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
