"""Streams read from the run journal, so a client resumes on any worker.

``GET /v1/sessions/{id}/runs/{run}/events`` streams a run's events after the client's
``Last-Event-ID`` (``<run id>.<n>``, the id of the last frame it got) or ``?after=N``,
live while the run goes on, and ends after the run's ``run_end`` frame.
``GET /v1/sessions/{id}/events`` follows the whole session: every run's events and
ends, from a ``Last-Event-ID``, from the oldest kept (``?from=start``) or from now.

The ids are the ones the call's own stream sent, so a client can drop and reconnect
to any worker sharing the store. A point the journal no longer holds (trimmed by its
retention, or never sent) is ``410 events_gone``: never a silent restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..session import JournalEntry, JournalExpiredError, RunJournal, SessionKey
from ._calls import RAW_SEND
from ._errors import HTTPError
from ._guard import SessionGuard

__all__ = ["JournalStream", "events_after", "run_events", "run_summary", "session_events"]

APPEAR = 2.0
"""Seconds a reconnect waits for a running run's first entries to reach the journal."""


def sse(event_id: str | None, event: str, data: str) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n".encode()


def _frame(entry: JournalEntry) -> bytes:
    if entry.is_end:
        end = json.loads(entry.data)
        return sse(entry.id, "run_end", json.dumps({"run_id": entry.run_id, **end}))
    return sse(entry.id, entry.type, entry.data)


def _error_frame(code: str, message: str) -> bytes:
    return sse(None, "error", json.dumps({"error": {"code": code, "message": message}}))


def gone(key: SessionKey, point: str, journal: RunJournal) -> HTTPError:
    return HTTPError(
        410, "events_gone",
        f"the run journal of session {key.session_id!r} holds no event {point!r}: it is older "
        f"than the retention ({journal.max_events} events per session, {journal.max_age:g} s) "
        "or was never sent; GET the session for its state")


def parse_point(raw: str, what: str) -> tuple[str, int]:
    """``<run id>.<n>`` -> ``(run id, n)``, or the 400 naming the problem."""
    run_id, dot, number = raw.strip().rpartition(".")
    if not dot or not run_id or not number.isdigit():
        raise HTTPError(400, "bad_last_event_id",
                        f"{what} must be an event id '<run id>.<n>' as the stream sent it, "
                        f"got {raw!r}")
    return run_id, int(number)


def _run_point(request: Request, run_id: str) -> int | None:
    """The index in ``run_id`` of the last event the client has (``None``: none)."""
    raw = request.query_params.get("after")
    if raw is not None:
        if not raw.lstrip("-").isdigit():
            raise HTTPError(400, "bad_query", f"after must be an event number, got {raw!r}")
        return int(raw) if int(raw) >= 0 else None
    last = request.headers.get("last-event-id", "").strip()
    if not last:
        return None
    named, index = parse_point(last, "Last-Event-ID")
    if named != run_id:
        raise HTTPError(400, "bad_last_event_id",
                        f"Last-Event-ID {last!r} names run {named!r}, not {run_id!r}")
    return index


async def _alive(guard: SessionGuard, key: SessionKey, run_id: str) -> bool:
    """Whether ``run_id`` runs in this worker or holds the serving lease elsewhere."""
    hold = guard.local(key)
    if hold is not None:
        return hold.run_id == run_id
    holder = await guard.holder(key)
    return holder is not None and holder.startswith(f"serve:{run_id}:")


async def run_events(journal: RunJournal, guard: SessionGuard, key: SessionKey,
                     request: Request, run_id: str, keepalive: float) -> Response:
    """The answer of ``GET .../runs/{run}/events``, or the 404 / 410 before it starts."""
    index = _run_point(request, run_id)
    after = None if index is None else await journal.locate(key, run_id, index)
    skip = -1 if index is None else index
    if after is None:
        first = await journal.locate(key, run_id, 0)
        if first is None and await _alive(guard, key, run_id):
            # A client that reconnects at once can be ahead of the run's first append.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + APPEAR
            while first is None and loop.time() < deadline:
                await asyncio.sleep(0.05)
                first = await journal.locate(key, run_id, 0)
        if first is None:
            if index is None:
                raise HTTPError(404, "no_run", f"the run journal of session "
                                f"{key.session_id!r} holds no run {run_id!r}")
            raise gone(key, f"{run_id}.{index}", journal)
        # The point itself is not there yet: the run goes on, or the id is past its end.
        after = first - 1
    else:
        skip = -1  # located: everything after it is new
        try:
            point = await journal.read(key, after - 1, 1)
        except JournalExpiredError:  # trimmed since it was located
            raise gone(key, f"{run_id}.{index}", journal) from None
        if point and point[0].is_end:  # the client saw the run's end: nothing follows
            return Response(status_code=204, headers={"x-run-id": run_id})

    async def frames() -> AsyncIterator[bytes | None]:
        last, lost = after, False
        try:
            async with contextlib.aclosing(journal.follow_idle(
                    key, after, run_id=run_id, idle=keepalive)) as entries:
                async for entry in entries:
                    if entry is None:
                        yield None
                        if not await _alive(guard, key, run_id):
                            lost = True  # its worker is gone: read what is left, say so
                            break
                        continue
                    last = entry.seq
                    if entry.index > skip or entry.is_end:  # the end, whatever the point
                        yield _frame(entry)
                    if entry.is_end:
                        return
            if not lost:
                return
            async for entry in journal.follow(key, last, run_id=run_id, live=False):
                if entry.index > skip or entry.is_end:
                    yield _frame(entry)
                if entry.is_end:
                    return
            yield _error_frame("run_lost", f"run {run_id!r} stopped without an end (its "
                               "worker went away); GET the session for its state")
        except JournalExpiredError as exc:
            yield _error_frame("events_gone", str(exc))

    return JournalStream(frames(), run_id)


async def session_events(journal: RunJournal, key: SessionKey, request: Request,
                         keepalive: float) -> JournalStream:
    """The answer of ``GET /v1/sessions/{id}/events``."""
    raw = request.query_params.get("after") or request.headers.get("last-event-id", "")
    start = request.query_params.get("from", "now")
    if raw.strip():
        run_id, index = parse_point(raw, "Last-Event-ID" if "after" not in
                                    request.query_params else "after")
        after = await journal.locate(key, run_id, index)
        if after is None:
            raise gone(key, raw.strip(), journal)
    elif start == "start":
        after = 0
    elif start == "now":
        after = await journal.head(key)
    else:
        raise HTTPError(400, "bad_query", f"from must be 'start' or 'now', got {start!r}")

    async def frames() -> AsyncIterator[bytes | None]:
        try:
            async for entry in journal.follow_idle(key, after, idle=keepalive):
                yield None if entry is None else _frame(entry)
        except JournalExpiredError as exc:
            yield _error_frame("events_gone", str(exc))

    return JournalStream(frames(), None)


class JournalStream(Response):
    """An SSE answer of frames (``None``: a keepalive is due) that ends when they do or
    when the client leaves (in Starlette's ``Response`` clothes, as routing wants)."""

    def __init__(self, frames: AsyncIterator[bytes | None], run_id: str | None) -> None:
        self.frames = frames
        self.run_id = run_id
        self.status_code = 200
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        work = asyncio.ensure_future(self._stream(send, scope.get(RAW_SEND, send)))
        gone_ = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({work, gone_}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (work, gone_):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await task

    async def _stream(self, send: Send, body: Send) -> None:
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"),
                   (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
        if self.run_id is not None:
            headers.append((b"x-run-id", self.run_id.encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        send = body  # past the middleware once started (RAW_SEND)
        try:
            async for frame in self.frames:
                await send({"type": "http.response.body", "more_body": True,
                            "body": b": keepalive\n\n" if frame is None else frame})
        finally:
            aclose = getattr(self.frames, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def run_summary(journal: RunJournal, key: SessionKey,
                      run_id: str) -> tuple[dict[str, Any], list[JournalEntry]] | None:
    """``GET .../runs/{run}`` for a run of another worker, from the journal: its summary
    and its events (``None``: the journal holds none of it)."""
    first = await journal.locate(key, run_id, 0)
    if first is None:
        return None
    entries = [e async for e in journal.follow(key, first - 1, run_id=run_id, live=False)]
    events = [e for e in entries if not e.is_end]
    end = entries[-1] if entries and entries[-1].is_end else None
    tokens = {"input": 0, "output": 0}
    model_calls = tool_calls = 0
    for entry in events:
        if entry.type == "model_call_end":
            model_calls += 1
            usage = json.loads(entry.data).get("usage") or {}
            tokens["input"] += int(usage.get("input_tokens") or 0)
            tokens["output"] += int(usage.get("output_tokens") or 0)
        elif entry.type == "tool_result_end":
            tool_calls += 1
    ended = None if end is None else end.time
    finished = json.loads(end.data) if end is not None else {}
    started = entries[0].time if entries else None
    return {"run_id": run_id, "session_id": key.session_id, "kind": None,
            "status": finished.get("status", "running"), "started": started, "ended": ended,
            "duration": None if ended is None or started is None else ended - started,
            "error": finished.get("error"), "events": len(events), "truncated": False,
            "tokens": tokens, "model_calls": model_calls, "tool_calls": tool_calls,
            "from_journal": True}, events


def events_after(events: list[JournalEntry], after: int) -> list[dict[str, Any]]:
    return [{"id": e.id, "time": e.time, "type": e.type, "event": json.loads(e.data)}
            for e in events if e.index > after]
