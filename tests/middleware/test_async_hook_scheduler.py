"""An ``async def`` onion hook's returned stream gets the subscriber's scheduler, so a
``TestScheduler`` (the testing kit's harness) drives its timers in virtual time."""

from __future__ import annotations

import reactivex
import reactivex.operators as ops

from rx_agent import ExtensionPoint, MiddlewareBase
from rx_agent.testing import MiddlewareHarness, text_round


class AsyncDelay(MiddlewareBase):
    def active_points(self):  # type: ignore[no-untyped-def]
        return {ExtensionPoint.ON_MODEL_CALL}

    async def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def]
        # no scheduler given: the one of the subscription is used
        return reactivex.timer(5.0).pipe(ops.flat_map(lambda _: next(input)))


def test_timers_in_an_async_hooks_stream_run_on_the_subscribers_scheduler() -> None:
    result = MiddlewareHarness(AsyncDelay(), ExtensionPoint.ON_MODEL_CALL).run(
        text_round("hi"))
    assert result.error is None
    times = [t for t, _ in result.timeline]
    assert times and min(times) >= 5.0
