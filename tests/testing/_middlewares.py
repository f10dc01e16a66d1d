"""Small hand-written middlewares the kit's tests run (and deliberately broken ones)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

import reactivex
from reactivex import Observable
from reactivex import operators as ops

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallInput,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
)
from rx_agent.model.errors import ModelTimeoutError

MODEL_CALL = {ExtensionPoint.ON_MODEL_CALL}


class Spaced(MiddlewareBase):
    """A rate limiter: model calls start at least ``interval`` seconds apart (the first
    undelayed), timed on the scheduler the stream is subscribed with."""

    def __init__(self, interval: float) -> None:
        self.interval = timedelta(seconds=interval)
        self.free: datetime | None = None

    def active_points(self) -> Collection[ExtensionPoint]:
        return MODEL_CALL

    def on_model_call(self, agent: Any, ctx: Any, input: ModelCallInput,
                      next: Any) -> Observable[AgentEvent]:
        def start(scheduler: Any) -> Observable[AgentEvent]:
            now = scheduler.now
            slot = now if self.free is None or self.free <= now else self.free
            self.free = slot + self.interval
            if slot == now:
                return next(input)
            return reactivex.timer(slot - now).pipe(ops.flat_map(lambda _: next(input)))

        return reactivex.defer(start)


class NotSpaced(Spaced):
    """A broken rate limiter: it books the slots but never waits for them."""

    def on_model_call(self, agent: Any, ctx: Any, input: ModelCallInput,
                      next: Any) -> Observable[AgentEvent]:
        return next(input)


class IdleTimeout(MiddlewareBase):
    """Fails a model call that goes ``seconds`` without an event."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def active_points(self) -> Collection[ExtensionPoint]:
        return MODEL_CALL

    def on_model_call(self, agent: Any, ctx: Any, input: ModelCallInput,
                      next: Any) -> Observable[AgentEvent]:
        stalled = reactivex.defer(lambda _s: reactivex.throw(
            ModelTimeoutError(f"no event for {self.seconds} s")))
        return next(input).pipe(ops.timeout(self.seconds, stalled))


class Retry(MiddlewareBase):
    """Retries a failed model call: ``attempts`` in all, waiting ``base * 2**n`` seconds
    before retry ``n + 1``."""

    def __init__(self, attempts: int, base: float) -> None:
        self.attempts = attempts
        self.base = base

    def active_points(self) -> Collection[ExtensionPoint]:
        return MODEL_CALL

    def on_model_call(self, agent: Any, ctx: Any, input: ModelCallInput,
                      next: Any) -> Observable[AgentEvent]:
        def attempt(n: int) -> Observable[AgentEvent]:
            def again(error: Exception, _source: Any) -> Observable[AgentEvent]:
                if n + 1 >= self.attempts:
                    return reactivex.throw(error)
                return reactivex.timer(self.base * 2 ** n).pipe(
                    ops.flat_map(lambda _: attempt(n + 1)))

            return next(input).pipe(ops.catch(again))

        return reactivex.defer(lambda _s: attempt(0))


class Shout(MiddlewareBase):
    """Upper-cases text deltas."""

    def active_points(self) -> Collection[ExtensionPoint]:
        return MODEL_CALL

    def on_model_call(self, agent: Any, ctx: Any, input: ModelCallInput,
                      next: Any) -> Observable[AgentEvent]:
        def shout(event: AgentEvent) -> AgentEvent:
            if isinstance(event, TextBlockDeltaEvent):
                return event.model_copy(update={"delta": event.delta.upper()})
            return event

        return next(input).pipe(ops.map(shout))


class DropsTextEnd(Shout):
    """Broken: loses every TextBlockEndEvent (the block never closes)."""

    def on_model_call(self, agent: Any, ctx: Any, input: ModelCallInput,
                      next: Any) -> Observable[AgentEvent]:
        return super().on_model_call(agent, ctx, input, next).pipe(
            ops.filter(lambda e: not isinstance(e, TextBlockEndEvent)))
