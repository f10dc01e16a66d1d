"""The four ways to call an agent: ``stream``, ``call``, ``acall`` / ``astream`` and
``call_sync``; each subscription of ``stream`` is one :class:`Run`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

from pydantic import BaseModel
from reactivex import Observable
from reactivex import abc as rxabc

from .._rx import (
    DirectObservable,
    Inbox,
    aiter_observable,
    refuse_blocking_run,
    running_loop,
    subscribe_direct,
)
from ..context import RuntimeContext
from ..errors import RxAgentError
from ..event import AgentEvent, AgentResultEvent
from ..message import Msg
from ..middleware.types import Agent
from ._checks import AgentInputLike, check_ctx, normalize
from ._config import AgentConfig
from ._driver import Driver
from ._lifecycle import Run
from ._phase import Phase
from ._slots import SessionSlots
from ._structured import check_structured_model

__all__ = ["Calling", "NoResultError", "stream_driven"]


class NoResultError(RxAgentError, RuntimeError):
    """A call completed without an ``AgentResultEvent`` (a middleware dropped it)."""


class _Outcome(rxabc.ObserverBase[AgentEvent]):
    """The observer of :meth:`Calling.acall`: the result event's message, or the
    error. A future of the running loop is made only for a call that ends after its
    body returned (finish hooks, an async store) or under an ``on_agent`` layer."""

    __slots__ = ("ended", "error", "future", "name", "result")

    def __init__(self, name: str) -> None:
        self.name = name
        self.result: Msg | None = None
        self.error: Exception | None = None
        self.ended = False
        self.future: asyncio.Future[Msg] | None = None

    def on_next(self, event: AgentEvent) -> None:
        if _is_result(event):
            self.result = event.result  # type: ignore[attr-defined]

    def on_error(self, exc: Exception) -> None:
        if self.ended:
            return
        self.ended = True
        self.error = exc
        future = self.future
        if future is not None and not future.done():
            future.set_exception(exc)

    def on_completed(self) -> None:
        if self.ended:
            return
        if self.result is None:
            self.on_error(_no_result(self.name))
            return
        self.ended = True
        future = self.future
        if future is not None and not future.done():
            future.set_result(self.result)

    def outcome(self) -> Msg:
        """The ended call's message, or its error raised."""
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


# Per event class: whether it is a result event (isinstance against pydantic's ABC
# metaclass costs more than the dict lookup, on every event of a call).
_RESULT_KINDS: dict[type, bool] = {AgentResultEvent: True}


def _is_result(event: object) -> bool:
    kind = type(event)
    known = _RESULT_KINDS.get(kind)
    if known is None:
        known = _RESULT_KINDS[kind] = issubclass(kind, AgentResultEvent)
    return known


def _no_result(name: str) -> NoResultError:
    return NoResultError(f"agent {name!r} completed without an AgentResultEvent "
                         "(did an on_agent middleware drop it?)")


class Calling:
    """The calling half of :class:`ReActAgent` (it owns ``_config`` and ``_slots``)."""

    _config: AgentConfig
    _slots: SessionSlots

    @property
    def name(self) -> str:
        return self._config.name

    # -- calling -------------------------------------------------------------------

    def stream(
        self,
        msgs: AgentInputLike = None,
        ctx: RuntimeContext | None = None,
        *,
        structured_model: type[BaseModel] | None = None,
    ) -> Observable[AgentEvent]:
        """A cold Observable of the call's events; each subscription is one execution.

        Subscribe from any thread: inside a running asyncio loop the call runs on that
        loop; elsewhere on the runtime's own loop. With ``structured_model`` (a pydantic
        model class) the reply ends with a validated instance: the final message's
        ``structured``, with reason ``STRUCTURED_OUTPUT``.
        """
        return stream_driven(self, None, msgs, ctx, structured_model)

    def call(
        self,
        msgs: AgentInputLike = None,
        ctx: RuntimeContext | None = None,
        *,
        structured_model: type[BaseModel] | None = None,
    ) -> Observable[Msg]:
        """A cold Observable of the final message (one item); ``structured_model`` as
        for :meth:`stream`."""
        events = self.stream(msgs, ctx, structured_model=structured_model)

        def subscribe(observer: rxabc.ObserverBase[Msg], scheduler: Any = None) -> Any:
            refuse_blocking_run(scheduler)
            result: list[Msg] = []

            def on_next(event: AgentEvent) -> None:
                if _is_result(event):
                    result[:] = [event.result]  # type: ignore[attr-defined]

            def on_completed() -> None:
                if not result:
                    observer.on_error(_no_result(self.name))
                    return
                observer.on_next(result[0])
                observer.on_completed()

            return subscribe_direct(events, on_next, observer.on_error, on_completed)

        return DirectObservable(subscribe)

    async def acall(
        self,
        msgs: AgentInputLike = None,
        ctx: RuntimeContext | None = None,
        *,
        structured_model: type[BaseModel] | None = None,
    ) -> Msg:
        """Run one call on the running loop and return the final message.

        Cancelling the awaiting task disposes the call. ``structured_model`` as for
        :meth:`stream`."""
        inp = normalize(msgs)
        check_ctx(ctx)
        model = check_structured_model(structured_model)
        # One Run observed by one slotted object: no Observable, closure or
        # disposable of call()/stream() in between (they would be built and dropped).
        loop = asyncio.get_running_loop()
        outcome = _Outcome(self.name)
        # ``self`` is the ReActAgent this class is mixed into (no cast(): a call less).
        run = Run(self, self._config, self._slots, ctx, inp, model,  # type: ignore[arg-type]
                  quiet=True)
        del inp  # the call's body holds it until the context does
        body = run.body_here(outcome, loop)
        try:
            if body is not None:
                # The call's body in this task: cancelling it cancels the body.
                await body
            if not outcome.ended:
                future: asyncio.Future[Msg] = loop.create_future()
                outcome.future = future
                return await future
            return outcome.outcome()
        finally:
            if run.phase is not Phase.DONE:  # a finished call has nothing to dispose
                run.dispose()

    def astream(
        self,
        msgs: AgentInputLike = None,
        ctx: RuntimeContext | None = None,
        *,
        structured_model: type[BaseModel] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """``async for event in agent.astream(...)``; leaving the loop early disposes."""
        return aiter_observable(self.stream(msgs, ctx, structured_model=structured_model))

    def call_sync(
        self,
        msgs: AgentInputLike = None,
        ctx: RuntimeContext | None = None,
        *,
        structured_model: type[BaseModel] | None = None,
    ) -> Msg:
        """Block this thread until the call ends; not for use inside a running loop.
        ``structured_model`` as for :meth:`stream`."""
        if running_loop() is not None:
            raise RuntimeError(
                "call_sync() would block the running event loop; use `await agent.acall()`"
            )
        inbox = Inbox(self.call(msgs, ctx, structured_model=structured_model),
                      blocking=True)
        try:
            while not inbox.ended:
                inbox.wait_blocking(0.1)  # a timeout keeps Ctrl-C responsive
        except BaseException:
            inbox.dispose()
            raise
        if inbox.error is not None:
            raise inbox.error
        msg = inbox.items[-1]
        assert isinstance(msg, Msg)
        return msg


def stream_driven(
    agent: Calling,
    driver: Driver | None,
    msgs: AgentInputLike = None,
    ctx: RuntimeContext | None = None,
    structured_model: type[BaseModel] | None = None,
) -> Observable[AgentEvent]:
    """``agent.stream(...)`` whose steps ``driver`` runs (``None``: the default one).
    A second driver (the testing recorder, a workflow) calls agents through this."""
    inp = normalize(msgs)
    check_ctx(ctx)
    model = check_structured_model(structured_model)
    who = cast(Agent, agent)  # once per stream(), not per subscription

    def subscribe(
        observer: rxabc.ObserverBase[AgentEvent], scheduler: Any = None
    ) -> rxabc.DisposableBase:
        run = Run(who, agent._config, agent._slots, ctx, inp, model, driver=driver)
        return run.subscribe(observer, scheduler)

    return DirectObservable(subscribe)
