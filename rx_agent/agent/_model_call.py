"""One model call below ``on_model_call``: retries, backoff and failover.

Only a failure before the first chunk is retried or failed over: once chunks reached
the caller, another attempt would duplicate them.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING, Any, Protocol

from reactivex import abc as rxabc

from .._rx import running_loop, subscribe_direct
from ..event import AgentEvent
from ..middleware.inputs import ModelCallInput
from ..model.base import ChatModel
from ._blocks import ChunkConverter

if TYPE_CHECKING:
    from .react import ReActAgent

__all__ = ["MAX_RETRY_AFTER", "ModelAttempts", "backoff_delay"]

logger = logging.getLogger("rx_agent")

MAX_RETRY_AFTER = 60.0
"""Seconds: a ``retry_after`` longer than this fails the attempt instead of waiting."""


class RunLike(Protocol):
    """What a model call needs from its run."""

    agent: ReActAgent
    source: str
    loop: asyncio.AbstractEventLoop | None


class ModelAttempts:
    """Runs one model call: attempts on the primary, then the fallback model.

    A failure before the first chunk is retried (``max_retries`` attempts in all,
    exponential backoff with jitter, honouring ``retry_after``); when the primary is
    spent the fallback model gets its own attempts. A failure after the first chunk
    is not retried nor failed over.
    """

    __slots__ = (
        "attempt",
        "converter",
        "disposed",
        "handle",
        "mci",
        "model",
        "observer",
        "on_fallback",
        "reply_id",
        "run",
        "subscription",
    )

    def __init__(
        self,
        run: RunLike,
        mci: ModelCallInput,
        reply_id: str,
        observer: rxabc.ObserverBase[AgentEvent],
    ) -> None:
        self.run = run
        self.mci = mci
        self.reply_id = reply_id
        self.observer = observer
        self.model: ChatModel = mci.model
        self.on_fallback = False
        self.attempt = 0
        self.disposed = False
        self.subscription: rxabc.DisposableBase | None = None
        self.handle: asyncio.TimerHandle | None = None
        self.converter = ChunkConverter(reply_id, run.source, observer.on_next)

    def start(self) -> None:
        if self.disposed:
            return
        self.attempt += 1
        self.converter.seen_chunk = False
        mci = self.mci
        try:
            source = self.model.stream(mci.messages, mci.tools, mci.options)
        except Exception as exc:
            self._failed(exc)
            return
        self.subscription = subscribe_direct(source, self._on_chunk, self._failed, self._done)

    def _on_chunk(self, chunk: Any) -> None:
        if not self.disposed:
            self.converter.feed(chunk)

    def _done(self) -> None:
        if self.disposed:
            return
        self.converter.finish()
        self.observer.on_completed()

    def _failed(self, exc: Exception) -> None:
        if self.disposed:
            return
        if self.converter.seen_chunk:
            self.observer.on_error(exc)
            return
        agent = self.run.agent
        retry_after = getattr(exc, "retry_after", None)
        # A server asking for a long wait is not retried (the fallback may serve).
        too_long = retry_after is not None and retry_after > MAX_RETRY_AFTER
        if self.attempt < agent.max_retries and getattr(exc, "retryable", True) and not too_long:
            delay = agent._backoff(self.attempt, retry_after)
            logger.info(
                "model %s failed (%s); retry %d/%d in %.2fs",
                self.model.name,
                exc,
                self.attempt + 1,
                agent.max_retries,
                delay,
            )
            self._schedule(delay)
            return
        fallback = agent.fallback_model
        if fallback is not None and not self.on_fallback and fallback is not self.model:
            listener = agent.failover_listener
            if listener is not None:
                try:
                    listener(self.model, exc)
                except Exception:
                    logger.exception("failover_listener raised; ignored")
            logger.warning(
                "model %s failed (%s); switching to fallback %s",
                self.model.name,
                exc,
                fallback.name,
            )
            self.on_fallback = True
            self.model = fallback
            self.attempt = 0
            self._schedule(0.0)
            return
        self.observer.on_error(exc)

    def _schedule(self, delay: float) -> None:
        loop = running_loop() or self.run.loop
        assert loop is not None
        if delay <= 0:
            self.handle = None
            loop.call_soon(self.start)
        else:
            self.handle = loop.call_later(delay, self.start)

    def dispose(self) -> None:
        self.disposed = True
        if self.handle is not None:
            self.handle.cancel()
        if self.subscription is not None:
            self.subscription.dispose()


def backoff_delay(attempt: int, initial: float, maximum: float, retry_after: float | None) -> float:
    """Exponential backoff with jitter; a server's ``retry_after`` wins when larger."""
    if initial <= 0 and retry_after is None:
        return 0.0
    base = min(maximum, initial * (2 ** (attempt - 1)))
    delay: float = base * (0.5 + random.random() / 2)
    if retry_after is not None:
        delay = max(delay, float(retry_after))
    return delay
