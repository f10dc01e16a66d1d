"""Helpers for people who test middlewares and agents.

Everything runs offline. :class:`MiddlewareHarness` runs one hook of a middleware
against a scripted upstream on virtual time; :func:`verify` checks a stream step by
step (Reactor's ``StepVerifier``); :func:`text_round`, :func:`tool_round` and
:func:`thinking_round` build the events a model call streams; :class:`RecordingModel` and
:class:`ReplayModel` turn a conversation with a real model into an offline test;
:class:`StepRecorder` runs a call and records each step of the agent's loop.
:mod:`rx_agent.testing.store_contract` (imported on its own: it needs pytest) is the
conformance suite of session stores.
The agent-level helpers run on :class:`~rx_agent.ScriptedModel`::

    from rx_agent import ReActAgent, ScriptedModel
    from rx_agent.testing import RecordingMiddleware, collect_events, event_types

    log: list[str] = []
    agent = ReActAgent(name="a", model=ScriptedModel(["hi"]),
                       middlewares=[RecordingMiddleware("outer", log)])
    events = collect_events(agent, "hello")
    assert event_types(events)[-1] == "AgentEndEvent"
    assert log[:2] == ["outer:on_agent:pre", "outer:on_agent_state_ready"]
"""

from __future__ import annotations

from .. import _publish
from ._cassette import CassetteMismatchError, RecordingModel, ReplayedError, ReplayModel
from ._collect import (
    RecordingMiddleware,
    assert_no_orphan_tool_calls,
    collect,
    collect_events,
    event_types,
    final_result,
)
from ._grammar import assert_well_formed
from ._harness import HarnessResult, MiddlewareHarness, UpstreamCall
from ._marbles import marbles
from ._scripted import attempts
from ._sequences import (
    agent_reply,
    round_message,
    text_round,
    thinking_round,
    tool_results,
    tool_round,
)
from ._step_recorder import StepRecord, StepRecorder
from ._verify import Signal, StepVerifier, Verified, describe, verify

__all__ = [
    "CassetteMismatchError",
    "HarnessResult",
    "MiddlewareHarness",
    "RecordingMiddleware",
    "RecordingModel",
    "ReplayModel",
    "ReplayedError",
    "Signal",
    "StepRecord",
    "StepRecorder",
    "StepVerifier",
    "UpstreamCall",
    "Verified",
    "agent_reply",
    "assert_no_orphan_tool_calls",
    "assert_well_formed",
    "attempts",
    "collect",
    "collect_events",
    "describe",
    "event_types",
    "final_result",
    "marbles",
    "round_message",
    "text_round",
    "thinking_round",
    "tool_results",
    "tool_round",
    "verify",
]


# Reprs, tracebacks and docs show ``rx_agent.testing.X``, not the private module.
_publish.publish_all(globals(), __all__)
