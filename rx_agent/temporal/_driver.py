"""The driver of a call inside a workflow: its two effects become activities.

The steps, every hook and the driver's checks run in the workflow (replayed from its
history); :meth:`TemporalDriver.model_stream` runs one model attempt and
:meth:`TemporalDriver.execute_tool` one tool call as activities, on whichever worker
takes them, and hand back what they produced, in order.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import reactivex
from reactivex import Observable
from reactivex import abc as rxabc
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from .._rx import cancelling
from ..agent._config import AgentConfig
from ..agent._driver import Driver
from ..agent._results import emit_result_events
from ..context import RuntimeContext
from ..message import ToolResultBlock, ToolResultState, ToolUseBlock
from ..middleware.inputs import ModelCallInput
from ..middleware.types import ModelLike
from ..model.errors import ModelError
from ..tool import execute
from ..tool._call import CallOwner
from ..tool._run import Emit, Starting
from ..tool.toolkit import Toolkit
from ._activities import MODEL_CALL, TOOL_CALL
from ._codec import (
    attributes_of,
    decode_block,
    decode_chunk,
    decode_event,
    encode_block,
    encode_msg,
    encode_options,
)

__all__ = ["TemporalDriver", "Timeouts"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long an activity may take, in seconds: ``heartbeat`` (a worker that stops
    heartbeating is taken for dead and its activity runs again elsewhere), ``model``
    (one model attempt), ``tool`` (a tool call without the agent's ``tool_timeout``)."""

    heartbeat: float = 10.0
    model: float = 600.0
    tool: float = 3600.0

    def to_json(self) -> dict[str, float]:
        return {"heartbeat": self.heartbeat, "model": self.model, "tool": self.tool}

    @classmethod
    def from_json(cls, data: dict[str, float]) -> Timeouts:
        return cls(**data)


def _model_error(exc: ActivityError) -> ModelError:
    """The model's failure as the agent's retry policy reads it (retryable,
    retry_after); a lost worker (a timeout) is retryable."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        details = cause.details[0] if cause.details else {}
        if isinstance(details, dict) and "type" in details:
            return ModelError(f"{details['type']}: {cause.message}",
                              retryable=bool(details.get("retryable", True)),
                              retry_after=details.get("retry_after"))
        return ModelError(cause.message, retryable=False)
    return ModelError(f"the model call's activity did not finish: {cause or exc}",
                      retryable=True)


class TemporalDriver(Driver):
    """Runs one workflow's call: model attempts and tool calls as activities."""

    __slots__ = ("agent", "config", "timeouts")

    def __init__(self, agent: str, config: AgentConfig, timeouts: Timeouts) -> None:
        self.agent = agent
        self.config = config
        self.timeouts = timeouts

    def _which(self, model: ModelLike) -> str:
        config = self.config
        if model is config.model:
            return "model"
        if model is config.fallback_model:
            return "fallback"
        return model.name

    def model_stream(self, model: ModelLike, mci: ModelCallInput) -> Observable[Any]:
        request = {
            "agent": self.agent,
            "model": self._which(model),
            "messages": [encode_msg(m) for m in mci.messages],
            "tools": list(mci.tools),
            "options": encode_options(mci.options),
        }
        timeouts = self.timeouts

        def subscribe(observer: rxabc.ObserverBase[Any], scheduler: Any = None) -> Any:
            async def attempt() -> None:
                try:
                    chunks = await workflow.execute_activity(
                        MODEL_CALL, request,
                        start_to_close_timeout=timedelta(seconds=timeouts.model),
                        heartbeat_timeout=timedelta(seconds=timeouts.heartbeat),
                        # The agent's retry policy retries (ModelAttempts, its backoff on
                        # the workflow's durable timers), never Temporal as well.
                        retry_policy=RetryPolicy(maximum_attempts=1))
                except ActivityError as exc:
                    observer.on_error(_model_error(exc))
                    return
                for chunk in chunks:
                    observer.on_next(decode_chunk(chunk))
                observer.on_completed()

            task = asyncio.get_running_loop().create_task(attempt())
            return cancelling(task)

        return reactivex.create(subscribe)

    async def execute_tool(self, toolkit: Toolkit, call: ToolUseBlock,
                           ctx: RuntimeContext | None, emit: Emit, source: str | None,
                           reply_id: str, timeout: float | None = None,
                           owner: CallOwner | None = None,
                           starting: Starting | None = None) -> ToolResultBlock:
        go: Any = True if starting is None else starting(call)  # decided in the workflow
        if go is not True and go is not False:
            go = await go
        if not go:  # refused (an interrupt): the runtime's own refusal, no activity
            return await execute(toolkit, call, ctx, emit, source, reply_id, timeout, owner,
                                 lambda c: False)
        retry = self.config.retry
        timeouts = self.timeouts
        request = {
            "agent": self.agent,
            "call": encode_block(call),
            "session_id": ctx.session_id if ctx is not None else None,
            "user_id": ctx.user_id if ctx is not None else None,
            "run_id": ctx.run_id if ctx is not None else None,
            "attributes": attributes_of(ctx),  # as the workflow's hooks left them
            "source": source,
            "reply_id": reply_id,
            "timeout": timeout,
        }
        try:
            out = await workflow.execute_activity(
                TOOL_CALL, request,
                # The tool's own timeout is enforced in the activity (an error result);
                # this one only bounds a worker that hangs.
                start_to_close_timeout=timedelta(
                    seconds=timeouts.tool if timeout is None else timeout + timeouts.heartbeat),
                heartbeat_timeout=timedelta(seconds=timeouts.heartbeat),
                # A tool's failure is its result; what fails the activity is a lost
                # worker, retried with the agent's retry policy.
                retry_policy=RetryPolicy(
                    maximum_attempts=retry.max_attempts,
                    initial_interval=timedelta(seconds=retry.initial_backoff),
                    maximum_interval=timedelta(seconds=max(retry.max_backoff,
                                                           retry.initial_backoff))))
        except ActivityError as exc:
            block = ToolResultBlock(id=call.id, name=call.name,
                                    output=f"Tool {call.name!r} did not finish: "
                                    f"{exc.cause or exc}", state=ToolResultState.ERROR)
            emit_result_events(emit, source or "", reply_id, block)
            return block
        for event in out["events"]:
            emit(decode_event(event))
        return decode_block(out["result"])
