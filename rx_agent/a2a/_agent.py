"""``A2AAgent``: an agent served elsewhere over the A2A protocol, used as a sub-agent.

It has what a sub-agent needs of an agent (``name``, ``stream``, ``call``,
``interrupt``, ``as_tool``) and nothing of a local one's (no model, tools or
middlewares: those run on the peer). Each subscription of ``stream`` is one A2A
``SendMessage``: a fresh HTTP client on the subscriber's loop, the peer's card (read
once and kept), the message, and the task's updates as events.

Per session (``ctx.session_id``, or the agent's name) it remembers the peer's context
id, so later calls continue the remote conversation, and the id of a task that asks
for input, so the next message answers it (``"yes"`` approves a paused rx_agent
peer). Interrupting (``interrupt(ctx)``) or disposing the stream cancels the remote
task (``CancelTask``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from reactivex import Observable, abc

from .._record import new_id
from .._rx import DirectObservable, from_coroutine, on_some_loop, refuse_blocking_run
from ..agent._checks import check_ctx
from ..agent._subagent import agent_tool
from ..context import RuntimeContext
from ..event import AgentEndEvent, AgentEvent, AgentResultEvent, AgentStartEvent
from ..message import Msg, Role
from ..session import ANONYMOUS_USER, SessionKey
from ..tool.toolkit import Tool
from ._errors import RemoteAgentError

if TYPE_CHECKING:
    from ._remote import AgentCard, Exchange

__all__ = ["A2AAgent"]

_SESSIONS_KEPT = 1000
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_background: set[asyncio.Task[None]] = set()


def _ignore(event: AgentEvent) -> None:
    pass


def _tool_name(name: str) -> str:
    cleaned = _TOOL_NAME.sub("_", name.strip()).strip("_")[:64]
    return cleaned or "remote_agent"


@dataclass
class _Session:
    context_id: str | None = None
    asking_task: str | None = None
    """A task of the peer that waits for input: the next message answers it."""


@dataclass(eq=False)
class _Running:
    loop: asyncio.AbstractEventLoop
    progress: Exchange
    client: Any = None
    interrupted: bool = False
    reader: asyncio.Future[None] | None = None
    cancels: list[asyncio.Task[None]] = field(default_factory=list)


def _inputs(msgs: Any) -> list[Msg]:
    if isinstance(msgs, str):
        return [Msg(Role.USER, msgs)]
    if isinstance(msgs, Msg):
        return [msgs]
    if isinstance(msgs, list | tuple) and msgs and all(isinstance(m, Msg) for m in msgs):
        return list(msgs)
    raise TypeError("a remote agent takes a str, a Msg or a non-empty list of Msg, got "
                    f"{type(msgs).__name__}")


class A2AAgent:
    """An agent reached over A2A at ``url`` (the peer's base URL; its card is at
    ``{url}/.well-known/agent-card.json``).

    Args:
        url: the peer's base URL, ``http://`` or ``https://``.
        name: the agent's name (and its tool's, sanitised). Without it the card is read
            now, which needs a thread without a running event loop; inside one, pass
            ``name=`` or use ``await A2AAgent.connect(url)``.
        description: what ``as_tool`` tells the parent's model (default: the card's
            description and skills).
        headers: sent with every request, e.g. ``{"Authorization": "Bearer ..."}``.
        timeout: seconds to connect, and the longest the peer may stay silent (a
            streaming peer sends keep-alives); ``None`` waits forever.
        card: the peer's card (an ``a2a.types.AgentCard``) when it is known already;
            otherwise it is read on first use (or now, without ``name``).
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        description: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = 60.0,
        card: AgentCard | None = None,
    ) -> None:
        from . import _remote  # the a2a extra, or an ImportError saying how to get it

        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http:// or https:// URL, got {url!r}")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError("name must be a non-empty str")
        if description is not None and (not isinstance(description, str)
                                        or not description.strip()):
            raise ValueError("description must be a non-empty str")
        if headers is not None and not (isinstance(headers, Mapping) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in headers.items())):
            raise TypeError("headers must be a mapping of str to str")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(
                timeout, int | float) or timeout <= 0):
            raise ValueError(f"timeout must be a positive number of seconds or None, got "
                             f"{timeout!r}")
        self._url = url.rstrip("/")
        self._headers = dict(headers or {})
        self._timeout = None if timeout is None else float(timeout)
        self._card = card
        self._description = description
        self._sessions: OrderedDict[SessionKey, _Session] = OrderedDict()
        self._running: dict[SessionKey, _Running] = {}
        self._lock = threading.Lock()
        if name is None and card is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                self._card = asyncio.run(self._fetch_card())
            else:
                raise ValueError(
                    f"A2AAgent({url!r}) without name= reads the agent card, which cannot "
                    "block a running event loop: pass name=..., or use "
                    "`await A2AAgent.connect(url)`")
        assert name is not None or self._card is not None
        self._name = name if name is not None else (self._card.name or "remote agent")  # type: ignore[union-attr]
        self._remote = _remote

    @classmethod
    async def connect(cls, url: str, *, name: str | None = None, **kwargs: Any) -> A2AAgent:
        """Read the peer's card first (its name and description), then return the
        agent; the keyword arguments are the constructor's."""
        agent = cls(url, name=name or "remote", **kwargs)
        if agent._card is None:
            agent._card = await agent._fetch_card()
        if name is None:
            agent._name = agent._card.name or "remote agent"
        return agent

    async def _fetch_card(self) -> AgentCard:
        from . import _remote

        async with _remote.http_client(self._headers, self._timeout) as http:
            return await _remote.fetch_card(http, self._url, f"the agent at {self._url}")

    # -- what a sub-agent shows --------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def url(self) -> str:
        return self._url

    @property
    def card(self) -> AgentCard | None:
        """The peer's agent card, once read."""
        return self._card

    @property
    def description(self) -> str:
        if self._description is not None:
            return self._description
        card = self._card
        if card is None:
            return (f"Ask the remote agent {self._name!r} at {self._url} to carry out a "
                    "task; it answers with its final reply.")
        skills = "; ".join(f"{s.name} ({s.description.strip().rstrip('.')})"
                           if s.description.strip() else s.name for s in card.skills)
        about = card.description.strip() or f"The remote agent {self._name!r}."
        return (about + (f" Skills: {skills}." if skills else ""))[:1000]

    def __repr__(self) -> str:
        return f"A2AAgent(url={self._url!r}, name={self._name!r})"

    # -- calling -----------------------------------------------------------------------

    def stream(self, msgs: Any = None, ctx: RuntimeContext | None = None
               ) -> Observable[AgentEvent]:
        """A cold Observable of the remote call's events; each subscription sends one
        message. Subscribe from any thread, as with a local agent."""
        parts = self._remote.to_parts(_inputs(msgs))
        if not parts:
            raise ValueError("the input has no text or data for the remote agent")
        check_ctx(ctx)
        async def body(observer: abc.ObserverBase[AgentEvent]) -> None:
            await self._run(observer, parts, ctx)

        direct = cast(DirectObservable[AgentEvent], from_coroutine(body)).direct

        def subscribe(observer: abc.ObserverBase[AgentEvent], scheduler: Any = None
                      ) -> abc.DisposableBase:
            return on_some_loop(direct, observer, scheduler)

        return DirectObservable(subscribe)

    def call(self, msgs: Any = None, ctx: RuntimeContext | None = None) -> Observable[Msg]:
        """A cold Observable of the final message (one item)."""
        events = self.stream(msgs, ctx)

        def subscribe(observer: abc.ObserverBase[Msg], scheduler: Any = None
                      ) -> abc.DisposableBase:
            refuse_blocking_run(scheduler)

            def on_next(event: AgentEvent) -> None:
                if isinstance(event, AgentResultEvent):
                    observer.on_next(event.result)

            return events.subscribe(on_next, observer.on_error, observer.on_completed)

        return Observable(subscribe)

    def _key(self, ctx: RuntimeContext | None) -> SessionKey:
        session = (ctx.session_id if ctx is not None else None) or self._name
        user = (ctx.user_id if ctx is not None else None) or ANONYMOUS_USER
        return SessionKey(user, session)

    async def _run(self, observer: abc.ObserverBase[AgentEvent], parts: list[Any],
                   ctx: RuntimeContext | None) -> None:
        remote = self._remote
        key = self._key(ctx)
        reply_id = new_id()
        progress = remote.Exchange(self._name, reply_id, observer.on_next)
        observer.on_next(AgentStartEvent(session_id=ctx.session_id if ctx else None,
                                         reply_id=reply_id, name=self._name,
                                         user_id=ctx.user_id if ctx else None,
                                         source=self._name))
        running = _Running(asyncio.get_running_loop(), progress)
        with self._lock:
            self._running[key] = running
            session = self._sessions.setdefault(key, _Session())
            self._sessions.move_to_end(key)
            while len(self._sessions) > _SESSIONS_KEPT:
                self._sessions.popitem(last=False)
        what = f"the remote agent {self._name!r}"
        http = remote.http_client(self._headers, self._timeout)
        handed_over = False
        try:
            if self._card is None:
                self._card = await remote.fetch_card(http, self._url, what)
            client = running.client = remote.open_client(http, self._card, self._url, what)
            message = remote.to_message(parts, session.context_id, session.asking_task)
            running.reader = asyncio.ensure_future(self._read(client, message, running))
            try:
                # shielded: a disposed call may still need the reader (see _abandon)
                await asyncio.shield(running.reader)
            except asyncio.CancelledError:
                me = asyncio.current_task()
                if not running.interrupted or (me is not None and me.cancelling()):
                    raise
                progress.state = remote.TaskState.TASK_STATE_CANCELED
            finally:
                for task in running.cancels:  # the remote cancel, before the client closes
                    with contextlib.suppress(Exception):
                        await task
            result = progress.result(self._url)
        except asyncio.CancelledError:
            handed_over = self._abandon(running, http)
            raise
        except RemoteAgentError:
            raise
        except Exception as exc:
            raise remote.remote_error(exc, self._url, what) from exc
        finally:
            with self._lock:
                if self._running.get(key) is running:
                    del self._running[key]
            if not handed_over:
                await http.aclose()
        session.context_id = progress.context_id or session.context_id
        asking = result.metadata is not None and result.metadata["a2a"]["state"] in (
            "input-required", "auth-required")
        session.asking_task = progress.task_id if asking else None
        observer.on_next(AgentResultEvent(result=result, source=self._name))
        observer.on_next(AgentEndEvent(reply_id=reply_id, source=self._name))

    async def _read(self, client: Any, message: Any, running: _Running) -> None:
        async for _ in self._remote.exchange_events(client, message, running.progress):
            if running.interrupted and running.progress.task_id and not running.cancels:
                self._request_cancel(running)

    # -- interrupting ------------------------------------------------------------------

    def interrupt(self, ctx: RuntimeContext | None = None, msg: Any = None) -> bool:
        """Cancel the remote task of ``ctx``'s running call (``CancelTask``); the call
        ends ``INTERRUPTED``. Thread-safe. Returns whether a call was running. ``msg``
        is taken for the same signature as ``ReActAgent.interrupt`` (A2A's cancel
        carries no note)."""
        check_ctx(ctx)
        with self._lock:
            running = self._running.get(self._key(ctx))
        if running is None:
            return False
        running.loop.call_soon_threadsafe(self._interrupt, running)
        return True

    def _interrupt(self, running: _Running) -> None:
        if running.interrupted:
            return
        running.interrupted = True
        if running.progress.task_id is not None:
            self._request_cancel(running)
        # else: the first answer names the task; _read asks to cancel it then

    def _request_cancel(self, running: _Running) -> None:
        remote = self._remote
        task_id = running.progress.task_id
        assert task_id is not None

        async def cancel() -> None:
            await remote.cancel_task(running.client, task_id)
            if running.reader is not None:
                running.reader.cancel()

        running.cancels.append(asyncio.ensure_future(cancel()))

    def _abandon(self, running: _Running, http: Any) -> bool:
        """A disposed call: cancel its remote task, and emit nothing more. Before the
        peer named the task, the reader goes on (silently, on the call's client) until
        it does, then cancels it; returns whether it took the client over."""
        progress = running.progress
        progress.emit = _ignore
        reader = running.reader
        if reader is None or reader.done() or progress.finished or running.cancels:
            if reader is not None:
                reader.cancel()
            return False
        running.interrupted = True
        if progress.task_id is not None:
            self._request_cancel(running)
        timeout = self._timeout or 60.0

        async def finish() -> None:
            try:
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(reader, timeout)
                for task in running.cancels:
                    with contextlib.suppress(BaseException):
                        await task
            finally:
                await http.aclose()

        task = asyncio.ensure_future(finish())
        _background.add(task)
        task.add_done_callback(_background.discard)
        return True

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This remote agent as a tool of another (``task: str`` in, its final reply
        out), with the sub-agent rules of ``ReActAgent.as_tool``: each call is a fresh
        remote conversation, its events reach the parent as ``NestedEvent``, interrupt
        and disposal cancel the remote task, a failure is an ERROR result."""
        tool_name = name if name is not None else _tool_name(self._name)
        return agent_tool(self, tool_name, description if description is not None
                          else self.description, False)
