"""The endpoint handlers: one :class:`Service` per app, holding the agent and its store."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from ..agent import ReActAgent
from ..context import AgentState
from ..event import ExternalExecutionResultEvent, UserConfirmResultEvent
from ..middleware.base import OPT_IN, ExtensionPoint
from ..session import ANONYMOUS_USER, AsyncSessionStore, RunJournal, SessionKey, SessionStore
from ..session._journal import journal_of
from ..session._journal_memory import MemoryRunJournal
from ._body import check_session_id, read_json, read_messages, read_note, read_resume
from ._calls import KEEPALIVE, Call, CallResponse, CallRunner
from ._errors import HTTPError
from ._guard import SessionGuard
from ._metrics import Metrics
from ._resume import events_after, run_events, run_summary, session_events
from ._runs import RunLog
from ._spans import SpanFeed

__all__ = ["Service"]


class _Started(Response):
    """A :class:`CallResponse` in Starlette's ``Response`` clothes (routing wants one)."""

    def __init__(self, call: Call, *, as_json: bool) -> None:
        self.status_code = 200
        self.background = None
        self._answer = CallResponse(call, as_json=as_json)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._answer(scope, receive, send)


def _wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/event-stream" not in accept


class Service:
    def __init__(
        self,
        agent: ReActAgent,
        store: SessionStore,
        auth: Callable[[str], str | None] | None,
        *,
        queue: bool,
        max_body: int,
        feed: SpanFeed | None,
        journal: RunJournal | bool | None = None,
        keep_running: bool = False,
    ) -> None:
        self.agent = agent
        self.store = store
        self.auth = auth
        self.max_body = max_body
        self.feed = feed
        self.metrics = Metrics()
        self.runs = RunLog()
        self.journal = _journal(store, journal)
        self.guard = SessionGuard(store, agent.config.session_lease_ttl, queue=queue,
                                  wait=agent.config.session_wait)
        self.calls = CallRunner(agent, self.guard, self.runs, self.metrics, self.journal,
                                keep_running=keep_running)

    # -- identity --------------------------------------------------------------------

    def user(self, request: Request) -> str | None:
        """The caller's user id, from the bearer token only (``None``: no auth)."""
        if self.auth is None:
            return None
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPError(401, "unauthorized",
                            "missing bearer token: send Authorization: Bearer <token>",
                            {"WWW-Authenticate": 'Bearer realm="rx-agent"'})
        user = self.auth(token.strip())
        if user is None:
            raise HTTPError(401, "unauthorized", "the bearer token is not valid",
                            {"WWW-Authenticate": 'Bearer realm="rx-agent", '
                             'error="invalid_token"'})
        return user

    def key(self, request: Request) -> tuple[SessionKey, str | None]:
        user = self.user(request)
        session_id = check_session_id(request.path_params["session_id"])
        return SessionKey(user or ANONYMOUS_USER, session_id), user

    # -- store access (sync stores run off the loop) ----------------------------------

    async def _store_call(self, name: str, *args: Any) -> Any:
        store: Any = self.store
        if isinstance(store, AsyncSessionStore):
            return await getattr(store, "a" + name)(*args)
        method = getattr(store, name, None)
        if method is None:
            raise HTTPError(501, "not_supported",
                            f"the session store {type(store).__name__} has no {name}()")
        value = await asyncio.to_thread(method, *args)
        if inspect.isawaitable(value):
            value = await value
        return value

    async def load(self, key: SessionKey) -> AgentState | None:
        state: AgentState | None = await self._store_call("load", key)
        return state

    # -- calls -----------------------------------------------------------------------

    async def post_messages(self, request: Request) -> Response:
        key, user = self.key(request)
        msgs = read_messages(await read_json(request, self.max_body))
        return await self._run(request, key, user, msgs, "message")

    async def post_confirm(self, request: Request) -> Response:
        key, user = self.key(request)
        event = read_resume(await read_json(request, self.max_body), "confirm")
        return await self._run(request, key, user, event, "confirm")

    async def post_external(self, request: Request) -> Response:
        key, user = self.key(request)
        event = read_resume(await read_json(request, self.max_body), "external")
        return await self._run(request, key, user, event, "external")

    async def _run(self, request: Request, key: SessionKey, user: str | None, inp: Any,
                   kind: str) -> Response:
        if isinstance(inp, (UserConfirmResultEvent, ExternalExecutionResultEvent)):
            await self._check_paused(key, inp)
        call = await self.calls.start(key, user, inp, kind)
        return _Started(call, as_json=_wants_json(request))

    async def _check_paused(
        self, key: SessionKey, event: UserConfirmResultEvent | ExternalExecutionResultEvent
    ) -> None:
        # The agent checks the answer too; this names the usual mistakes before a call
        # (and its lease) starts.
        state = await self.load(key)
        pending = state.pending if state is not None else None
        want = "confirm" if isinstance(event, UserConfirmResultEvent) else "external"
        if pending is None:
            raise HTTPError(409, "not_paused",
                            f"session {key.session_id!r} is not waiting for an answer")
        if pending.kind != want:
            what, where = (("a confirmation", "confirm") if pending.kind == "confirm"
                           else ("external results", "external-results"))
            raise HTTPError(409, "not_paused", f"session {key.session_id!r} waits for {what}; "
                            f"post to .../{where}")
        if event.reply_id != pending.reply_id:
            raise HTTPError(409, "wrong_reply_id",
                            f"reply_id {event.reply_id!r} is not the paused reply of session "
                            f"{key.session_id!r} (it waits on {pending.reply_id!r})")

    async def interrupt(self, request: Request) -> Response:
        key, user = self.key(request)
        note = read_note(await read_json(request, self.max_body, optional=True))
        ctx = self.calls.context(key, user)
        done = await asyncio.to_thread(self.agent.interrupt, ctx, note)
        if not done and self.guard.local(key) is None:
            done = await self.guard.request_interrupt(key)
        return JSONResponse({"interrupted": done})

    # -- sessions --------------------------------------------------------------------

    async def get_session(self, request: Request) -> Response:
        key, _ = self.key(request)
        state = await self.load(key)
        running = await self.guard.running(key)
        if state is None and not running:
            raise HTTPError(404, "no_session", f"there is no session {key.session_id!r}")
        dumped = state.model_dump(mode="json") if state is not None else {}
        status = "running" if running else "paused" if dumped.get("pending") else "idle"
        return JSONResponse({
            "session_id": key.session_id,
            "user_id": key.user_id,
            "status": status,
            "messages": dumped.get("context", []),
            "pending": dumped.get("pending"),
            "runs": [r.summary() for r in self.runs.of_session(key)],
        })

    async def delete_session(self, request: Request) -> Response:
        key, _ = self.key(request)
        try:
            async with self.guard.exclusive(key):  # no call starts while it goes
                deleted = await self._store_call("delete", key)
        except HTTPError as exc:
            if exc.code != "session_busy":
                raise
            raise HTTPError(409, "session_busy",
                            f"session {key.session_id!r} is running a call; interrupt it "
                            "first", exc.headers) from None
        if not deleted:
            raise HTTPError(404, "no_session", f"there is no session {key.session_id!r}")
        return Response(status_code=204)

    async def list_sessions(self, request: Request) -> Response:
        user = self.user(request)
        keys = await self._store_call("list_sessions", user or ANONYMOUS_USER)
        return JSONResponse({"sessions": sorted(k.session_id for k in keys)})

    async def get_run(self, request: Request) -> Response:
        key, _ = self.key(request)
        run_id = request.path_params["run_id"]
        record = self.runs.get(run_id, key)
        found = None
        if record is None and self.journal is not None:  # another worker's run
            found = await run_summary(self.journal, key, run_id)
        if record is None and found is None:
            raise HTTPError(404, "no_run", f"there is no run {run_id!r} of session "
                            f"{key.session_id!r} on this worker (the last 200 runs) or in the "
                            "run journal")
        after = _after(request, run_id)
        if found is not None:
            summary, entries = found
            return JSONResponse({**summary, "events_after": events_after(entries, after),
                                 "spans": None})
        assert record is not None
        events = [{"id": f"{run_id}.{i}", "time": t, "type": kind, "event": json.loads(data)}
                  for i, (t, kind, data) in enumerate(record.events) if i > after]
        spans = self.feed.of_run(run_id) if self.feed is not None else None
        return JSONResponse({**record.summary(), "events_after": events, "spans": spans})

    async def get_run_events(self, request: Request) -> Response:
        key, _ = self.key(request)
        return await run_events(self._journal(), self.guard, key, request,
                                request.path_params["run_id"], KEEPALIVE)

    async def get_session_events(self, request: Request) -> Response:
        key, _ = self.key(request)
        return await session_events(self._journal(), key, request, KEEPALIVE)

    def _journal(self) -> RunJournal:
        if self.journal is None:
            raise HTTPError(501, "no_journal", "this server keeps no run journal "
                            "(create_app(journal=False))")
        return self.journal

    # -- the agent and the server ----------------------------------------------------

    async def plan(self, request: Request) -> Response:
        self.user(request)
        plan = self.agent.plan
        points = [{
            "point": point.value,
            "kind": point.kind,
            "participants": [{"label": label, "order": order}
                             for label, order in zip(plan.labels(point), plan.orders(point),
                                                     strict=True)],
        } for point in ExtensionPoint
            # as describe() shows it: an opt-in point only when somebody takes part
            if point not in OPT_IN or plan.is_active(point)]
        return JSONResponse({"agent": self.agent.name, "model": self.agent.model.name,
                             "tools": [s["name"] for s in self.agent.toolkit.schemas()],
                             "describe": plan.describe(), "mermaid": plan.to_mermaid(),
                             "points": points})

    async def metrics_text(self, request: Request) -> Response:
        self.user(request)
        # Off the loop: in multiprocess mode this reads every worker's file.
        text = await asyncio.to_thread(self.metrics.render)
        return PlainTextResponse(text,
                                 media_type="text/plain; version=0.0.4; charset=utf-8")


def _journal(store: SessionStore, journal: RunJournal | bool | None) -> RunJournal | None:
    """The app's journal: the store's own (shared with the other workers), or one in this
    worker's memory for a store without one; ``False``: none."""
    if isinstance(journal, RunJournal):
        return journal
    if journal is False:
        return None
    if journal is not None and journal is not True:
        raise TypeError(f"journal must be True, False, None or a RunJournal, not {journal!r}")
    return journal_of(store) or MemoryRunJournal()


def _after(request: Request, run_id: str) -> int:
    """The last event the client has: ``?after=N`` or SSE's ``Last-Event-ID: <run>.<N>``."""
    raw = request.query_params.get("after")
    if raw is None:
        last = request.headers.get("last-event-id", "")
        prefix, _, raw = last.rpartition(".")
        if not last or prefix != run_id:
            return -1
    if not raw.lstrip("-").isdigit():
        raise HTTPError(400, "bad_query", f"after must be an event number, got {raw!r}")
    return int(raw)
