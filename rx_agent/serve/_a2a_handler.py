"""The A2A methods on the server's machinery: an ``a2a-sdk`` ``RequestHandler`` whose
calls run through the server's :class:`CallRunner` (one call per session, runs,
metrics, disposal), with tasks kept per user in a :class:`TaskBook`.

The SDK's JSON-RPC dispatcher (in ``_a2a_server``) parses the requests, speaks both
protocol versions (1.0, and 0.3 through its adapter) and writes the answers; every
failure here is an A2A error with a message that names the problem.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, TypeVar

import anyio
from a2a.helpers import new_text_part
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    ExtendedAgentCardNotConfiguredError,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InternalError,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    PushNotificationNotSupportedError,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    UnsupportedOperationError,
)
from a2a.utils.errors import A2AError
from a2a.utils.proto_utils import validate_proto_required_fields

from ..session import ANONYMOUS_USER, SessionKey
from ._a2a_input import read_answer, read_message
from ._a2a_tasks import A2AEvent, TaskBook, TaskRecord, Updates, agent_message, state_name
from ._body import check_session_id
from ._calls import _ERROR, _NEXT, Call
from ._errors import HTTPError, from_exception
from ._service import Service

__all__ = ["RECEIVE", "USER", "A2AHandler"]

log = logging.getLogger("rx_agent.serve")

USER = "rx_agent.user"
"""``ServerCallContext.state`` key: the caller's user id (``None`` without auth)."""
RECEIVE = "rx_agent.receive"
"""``ServerCallContext.state`` key: the request's ASGI ``receive`` (its disconnect)."""

CANCEL_WAIT = 10.0
"""Seconds ``CancelTask`` waits for an interrupted call to end before answering."""

_F = TypeVar("_F", bound=Callable[..., Any])


def _rpc_error(error: HTTPError) -> A2AError:
    """A call the server refused to start, as the A2A error a client understands."""
    data = {"code": error.code}
    if error.status == 409 and error.code != "resume_rejected":
        return UnsupportedOperationError(error.message, data=data)
    if error.status >= 500:
        return InternalError(error.message, data=data)
    return InvalidParamsError(error.message, data=data)


def _crash(exc: Exception, what: str) -> A2AError:
    log.error("A2A %s failed", what, exc_info=exc)
    return InternalError(f"the server failed ({type(exc).__name__}); the server log has "
                         "the details")


def _guarded(method: _F) -> _F:
    """Every failure of ``method`` as an A2A error (never a traceback in the answer)."""
    @functools.wraps(method)
    async def run(self: A2AHandler, params: Any, context: ServerCallContext) -> Any:
        try:
            return await method(self, params, context)
        except A2AError:
            raise
        except HTTPError as exc:
            raise _rpc_error(exc) from None
        except Exception as exc:
            raise _crash(exc, method.__name__) from None
    return run  # type: ignore[return-value]


def _guarded_stream(method: _F) -> _F:
    @functools.wraps(method)
    async def run(self: A2AHandler, params: Any,
                  context: ServerCallContext) -> AsyncIterator[A2AEvent]:
        inner = method(self, params, context)
        try:
            async for item in inner:
                yield item
        except A2AError:
            raise
        except HTTPError as exc:
            raise _rpc_error(exc) from None
        except Exception as exc:
            raise _crash(exc, method.__name__) from None
        finally:
            await inner.aclose()
    return run  # type: ignore[return-value]


def _check(params: Any) -> None:
    try:
        validate_proto_required_fields(params)
    except InvalidParamsError as exc:
        problems = [f"{e['field']}: {str(e['message']).lower().rstrip('.')}"
                    for e in (exc.data or {}).get("errors", [])]
        raise InvalidParamsError("invalid params: " + "; ".join(problems), data=exc.data
                                 ) from None


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class A2AHandler(RequestHandler):
    def __init__(self, service: Service) -> None:
        self.service = service
        self.tasks = TaskBook()
        self._background: set[asyncio.Task[None]] = set()

    # -- identity and lookup -----------------------------------------------------------

    @staticmethod
    def _user(context: ServerCallContext) -> str | None:
        user: str | None = context.state.get(USER)
        return user

    def _record(self, task_id: str, context: ServerCallContext) -> TaskRecord:
        record = self.tasks.get(task_id, self._user(context) or ANONYMOUS_USER)
        if record is None:  # another user's task is as unknown as one never made
            raise TaskNotFoundError(f"there is no task {task_id!r}")
        return record

    # -- sending -----------------------------------------------------------------------

    async def _begin(self, params: SendMessageRequest, context: ServerCallContext
                     ) -> tuple[TaskRecord, Updates, Call]:
        """Start the call a message stands for: a new task, or the answer to a paused one."""
        _check(params)
        message = params.message
        user = self._user(context)
        record: TaskRecord | None = None
        if message.task_id:
            record = self._record(message.task_id, context)
            if message.context_id and message.context_id != record.context_id:
                raise InvalidParamsError(f"task {record.id} belongs to context "
                                         f"{record.context_id!r}, not {message.context_id!r}")
            if record.terminal:
                raise UnsupportedOperationError(
                    f"task {record.id} is {state_name(record.state)} and takes no more "
                    "messages: send a new message without taskId (the same contextId "
                    "continues the conversation)")
            if record.running or record.pause is None:
                raise UnsupportedOperationError(
                    f"task {record.id} is {state_name(record.state)}: wait until it asks "
                    "for input or ends, or cancel it")
            inp: Any = read_answer(message, record.pause, record.id)
            kind, key = record.pause.kind, record.key
        else:
            context_id = message.context_id or uuid.uuid4().hex
            try:
                check_session_id(context_id)
            except HTTPError as exc:
                raise InvalidParamsError(f"contextId: {exc.message}") from None
            key = SessionKey(user or ANONYMOUS_USER, context_id)
            inp, kind = [read_message(message)], "message"
        call = await self.service.calls.start(key, user, inp, kind)
        if record is None:
            record = self.tasks.new(key)
            for old in self.tasks.waiting(key):  # a new message closes an open pause
                if old is not record:
                    old.set_state(TaskState.TASK_STATE_CANCELED, agent_message(old, [
                        new_text_part("a new message on the context closed this task's pause")]))
        echo = Message()
        echo.CopyFrom(message)
        echo.task_id, echo.context_id = record.id, record.context_id
        record.history.append(echo)
        return record, Updates(record), call

    async def _events(self, record: TaskRecord, updates: Updates, call: Call
                      ) -> AsyncGenerator[A2AEvent]:
        """The task's updates as the call streams; a consumer that stops early (a client
        that went away) disposes the call, as the SSE route does."""
        try:
            yield record.snapshot()
            yield self._publish(record, updates.start())
            while True:
                signal = await call.pump.next()
                assert signal is not None
                kind, value = signal
                if kind == _NEXT:
                    call.note(value)
                    update = updates.on_event(value)
                    if update is not None:
                        yield self._publish(record, update)
                    continue
                failure = None
                if kind == _ERROR:
                    error = from_exception(value, record.context_id)
                    self.service.metrics.error(error.code, error.status)
                    await call.finish("failed", type(value).__name__)
                    failure = error.message
                else:
                    await call.finish("completed")
                for update in updates.end(failure):
                    yield self._publish(record, update)
                record.publish(None)
                return
        finally:
            if not call.finished:
                with anyio.CancelScope(shield=True):  # the lease is freed even so
                    await call.finish("disconnected")
                if record.running:
                    record.running = False
                    record.idle.set()
                    record.set_state(TaskState.TASK_STATE_CANCELED, agent_message(record, [
                        new_text_part("the client disconnected before the task ended")]))
                    record.publish(None)

    @staticmethod
    def _publish(record: TaskRecord, update: A2AEvent) -> A2AEvent:
        record.publish(update)
        return update

    @_guarded_stream
    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[A2AEvent]:
        record, updates, call = await self._begin(params, context)
        events = self._events(record, updates, call)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()

    @_guarded
    async def on_message_send(self, params: SendMessageRequest,
                              context: ServerCallContext) -> Task:
        record, updates, call = await self._begin(params, context)
        events = self._events(record, updates, call)
        config = params.configuration
        history = config.history_length if config.HasField("history_length") else None
        if config.return_immediately:  # the client polls GetTask: run on without it
            await anext(events)  # the task
            await anext(events)  # working
            task = asyncio.get_running_loop().create_task(_drain(events))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            return record.snapshot(history)
        receive = context.state.get(RECEIVE)
        work = asyncio.ensure_future(_drain(events))
        gone = asyncio.ensure_future(_disconnected(receive) if receive else asyncio.Event().wait())
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not work.done():  # the client went away: dispose the call now
                work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
        return record.snapshot(history)

    # -- tasks -------------------------------------------------------------------------

    @_guarded
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        _check(params)
        record = self._record(params.id, context)
        return record.snapshot(params.history_length if params.HasField("history_length")
                               else None)

    @_guarded
    async def on_list_tasks(self, params: ListTasksRequest,
                            context: ServerCallContext) -> ListTasksResponse:
        records = self.tasks.of_user(self._user(context) or ANONYMOUS_USER)
        if params.context_id:
            records = [r for r in records if r.context_id == params.context_id]
        if params.status:
            records = [r for r in records if r.state == params.status]
        if params.HasField("status_timestamp_after"):
            after = params.status_timestamp_after.ToMicroseconds() / 1e6
            records = [r for r in records if r.updated >= after]
        records.sort(key=lambda r: r.updated, reverse=True)
        size = params.page_size if params.HasField("page_size") else 50
        if not 1 <= size <= 100:
            raise InvalidParamsError(f"pageSize must be between 1 and 100, got {size}")
        token = params.page_token or "0"
        if not token.isdigit():
            raise InvalidParamsError(f"pageToken {token!r} is not one this server gave")
        start = int(token)
        page = records[start:start + size]
        history = params.history_length if params.HasField("history_length") else None
        more = start + size < len(records)
        return ListTasksResponse(tasks=[r.snapshot(history) for r in page],
                                 next_page_token=str(start + size) if more else "",
                                 page_size=size, total_size=len(records))

    @_guarded
    async def on_cancel_task(self, params: CancelTaskRequest,
                             context: ServerCallContext) -> Task:
        _check(params)
        record = self._record(params.id, context)
        if record.terminal:
            raise TaskNotCancelableError(f"task {record.id} is already "
                                         f"{state_name(record.state)}")
        ctx = self.service.calls.context(record.key, self._user(context))
        agent = self.service.agent
        if record.running:
            await asyncio.to_thread(agent.interrupt, ctx, None)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(record.idle.wait(), CANCEL_WAIT)
        else:  # paused: interrupting closes the pending calls
            await asyncio.to_thread(agent.interrupt, ctx, None)
            record.pause = None
            record.set_state(TaskState.TASK_STATE_CANCELED,
                             agent_message(record, [new_text_part("canceled by the client")]))
        return record.snapshot()

    @_guarded_stream
    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[A2AEvent]:
        _check(params)
        record = self._record(params.id, context)
        if record.terminal:
            raise UnsupportedOperationError(
                f"task {record.id} is {state_name(record.state)}: there is nothing more to "
                "stream (GetTask reads it)")
        queue: asyncio.Queue[A2AEvent | None] = asyncio.Queue()
        record.listeners.append(queue)
        try:
            yield record.snapshot()
            while record.running:
                update = await queue.get()
                if update is None:
                    return
                yield update
        finally:
            record.listeners.remove(queue)

    # -- what this server does not offer -----------------------------------------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise _no_push()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise _no_push()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise _no_push()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise _no_push()

    async def on_get_extended_agent_card(self, params: GetExtendedAgentCardRequest,
                                         context: ServerCallContext) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError(
            "this agent has no extended card: the public one at "
            "/.well-known/agent-card.json is all there is")


def _no_push() -> PushNotificationNotSupportedError:
    return PushNotificationNotSupportedError(
        "push notifications are not supported: stream the task (SendStreamingMessage, "
        "SubscribeToTask) or poll GetTask")


async def _drain(events: AsyncGenerator[A2AEvent]) -> None:
    try:
        async for _ in events:
            pass
    finally:
        await events.aclose()
