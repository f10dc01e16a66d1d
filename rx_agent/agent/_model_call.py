"""One model call below ``on_model_call``: retries, backoff and failover.

Only a failure before the first chunk is retried or failed over: once chunks reached
the caller, another attempt would duplicate them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol, cast

from reactivex import Observable
from reactivex import abc as rxabc

from .._rx import running_loop, subscribe_observer
from ..event import AgentEvent
from ..message import Msg
from ..middleware.inputs import ModelCallInput
from ..middleware.types import ModelLike
from ..model.base import ChatModel
from ._blocks import ChunkConverter, MessageAccumulator
from ._config import AgentConfig

__all__ = ["ModelAttempts"]

logger = logging.getLogger("rx_agent")


class _Round(Protocol):
    """Where a model call's message goes (the ReAct round's ``msg``)."""

    msg: Msg | None


class ModelAttempts(ChunkConverter, rxabc.DisposableBase):
    """Runs one model call: attempts on the primary, then the fallback model.

    A failure before the first chunk is retried (``max_retries`` attempts in all,
    exponential backoff with jitter, honouring ``retry_after``); when the primary is
    spent the fallback model gets its own attempts. A failure after the first chunk
    is not retried nor failed over.

    It is the model stream's observer and its own chunk converter (one object per
    call, and a chunk goes straight to :meth:`ChunkConverter.feed`).
    """

    __slots__ = (
        "attempt",
        "config",
        "handle",
        "into",
        "loop",
        "mci",
        "model",
        "observer",
        "on_fallback",
        "open_stream",
        "subscription",
    )

    def __init__(
        self,
        config: AgentConfig,
        source: str,
        loop: asyncio.AbstractEventLoop | None,
        mci: ModelCallInput,
        reply_id: str,
        observer: rxabc.ObserverBase[AgentEvent],
        acc: MessageAccumulator | None = None,
        emit: Callable[[AgentEvent], None] | None = None,
        silent: bool = False,
        into: _Round | None = None,
        open_stream: Callable[[ModelLike, ModelCallInput], Observable[Any]] | None = None,
    ) -> None:
        # ``emit`` and ``acc``: the events go straight on while ``acc`` builds the
        # message (no on_model_call layer), stored in ``into.msg`` at the end;
        # ``observer`` still gets the ending. ``silent``: nobody reads the events,
        # only ``acc`` is built. ``open_stream`` starts one attempt (the call's effect, which a
        # driver may run elsewhere; ``None``: the model's own stream, one call less).
        super().__init__(reply_id, source, None if silent else emit or observer.on_next, acc)
        self.into = into
        self.open_stream = open_stream
        self.config = config
        self.loop = loop
        self.mci = mci
        self.observer = observer
        self.model: ModelLike = mci.model
        self.on_fallback = False
        self.attempt = 0
        self.subscription: rxabc.DisposableBase | None = None
        self.handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if self.disposed:
            return
        self.handle = None  # a fired timer holds this method: no cycle left behind
        self.attempt += 1
        self.seen_chunk = False
        mci = self.mci
        try:
            open_stream = self.open_stream
            source = self.model.stream(mci.messages, mci.tools, mci.options) \
                if open_stream is None else open_stream(self.model, mci)
        except Exception as exc:
            self._failed(exc)
            return
        # This object is the model stream's observer (no wrapper per attempt).
        self.subscription = subscribe_observer(source, self)

    on_next = ChunkConverter.feed  # it ignores chunks once disposed

    def on_completed(self) -> None:
        if self.disposed:
            return
        self.subscription = None  # the model's subscription refers back to this object
        self.finish()
        into, acc = self.into, self._acc
        if into is not None and acc is not None:
            into.msg = acc.build(self._source) if not acc.empty else None
        self.observer.on_completed()

    def on_error(self, exc: Exception) -> None:
        self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        if self.disposed:
            return
        self.subscription = None
        if self.seen_chunk:
            self.observer.on_error(exc)
            return
        config = self.config
        retry = config.retry
        if retry.should_retry(self.attempt, exc):
            delay = retry.delay(self.attempt, getattr(exc, "retry_after", None))
            logger.info(
                "model %s failed (%s); retry %d/%d in %.2fs",
                self.model.name,
                exc,
                self.attempt + 1,
                retry.max_attempts,
                delay,
            )
            self._schedule(delay)
            return
        fallback = config.fallback_model
        if fallback is not None and not self.on_fallback and fallback is not self.model:
            listener = config.failover_listener
            if listener is not None:
                try:
                    # A middleware may have swapped in any ModelLike; usually a ChatModel.
                    listener(cast(ChatModel, self.model), exc)
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
        loop = running_loop() or self.loop
        assert loop is not None
        if delay <= 0:
            self.handle = None
            loop.call_soon(self.start)
        else:
            self.handle = loop.call_later(delay, self.start)

    def dispose(self) -> None:
        """Idempotent; stops the attempt in flight and any retry scheduled."""
        self.disposed = True
        handle, self.handle = self.handle, None
        if handle is not None:
            handle.cancel()
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            subscription.dispose()

