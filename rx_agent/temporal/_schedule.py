"""Scheduled runs: an agent called on a cron or interval schedule (Temporal Schedules).

Each trigger starts a new :class:`~._workflow.AgentWorkflow` (the schedule's id plus the
trigger time is its workflow id): a fresh copy of the worker's agent and, unless the
schedule names one, a session of its own (the run's workflow id). The schedule's
``overlap`` policy says what a trigger does while a run is going (Temporal's: skip,
buffer one, buffer all, cancel or terminate the other, allow all); ``max_parallel``
caps the runs going at once when overlaps are allowed: a run that finds that many
others running ends at once, skipped (checked when it starts, against Temporal's
visibility, so a burst of triggers within one visibility refresh may exceed it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)

from ._driver import Timeouts
from ._workflow import WORKFLOW

__all__ = ["OVERLAPS", "ScheduledAgent", "create_schedule", "delete_schedule",
           "describe_schedule", "list_schedules", "parse_every", "pause_schedule",
           "unpause_schedule"]

OVERLAPS: dict[str, ScheduleOverlapPolicy] = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
    "terminate_other": ScheduleOverlapPolicy.TERMINATE_OTHER,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}
"""What a trigger does while an earlier run still goes, by name."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_EVERY = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")


def parse_every(text: str) -> timedelta:
    """``"30s"``, ``"5m"``, ``"2h"``, ``"1d"`` or seconds (``"90"``) as a duration."""
    found = _EVERY.match(text.strip())
    if found is None or float(found[1]) <= 0:
        raise ValueError(f"an interval is a positive number with s, m, h or d (30s, 5m, "
                         f"2h), not {text!r}")
    return timedelta(seconds=float(found[1]) * _UNITS[found[2] or "s"])


@dataclass(frozen=True, slots=True)
class ScheduledAgent:
    """What :func:`list_schedules` and :func:`describe_schedule` tell of a schedule."""

    id: str
    agent: str
    task_queue: str
    message: str
    when: str
    """``"every 0:00:30"``, ``"cron 0 9 * * *"``."""
    overlap: str
    max_parallel: int | None
    paused: bool
    note: str | None
    running: int
    """Runs going now."""
    started: int
    """Runs started so far (the schedule's action count)."""
    skipped: int
    """Triggers the overlap policy skipped."""
    next_runs: tuple[datetime, ...]


async def create_schedule(
    client: Client, schedule_id: str, *, agent: str, task_queue: str, message: str,
    cron: str | None = None, every: timedelta | None = None, overlap: str = "skip",
    max_parallel: int | None = None, session_id: str | None = None,
    user_id: str | None = None, paused: bool = False, timeouts: Timeouts | None = None,
) -> None:
    """Call ``agent`` (served on ``task_queue``) with ``message`` on a ``cron`` expression
    or ``every`` interval. ``session_id``: one session every run continues (default: a
    session per run). Raises ``ValueError`` for a bad spec or an id already in use."""
    if (cron is None) == (every is None):
        raise ValueError("a schedule needs exactly one of cron= and every=")
    if overlap not in OVERLAPS:
        raise ValueError(f"overlap must be one of {', '.join(OVERLAPS)}, not {overlap!r}")
    if max_parallel is not None and max_parallel < 1:
        raise ValueError(f"max_parallel must be at least 1, not {max_parallel}")
    if max_parallel is not None and max_parallel > 1 and overlap != "allow_all":
        raise ValueError(f"max_parallel={max_parallel} needs overlap='allow_all' (with "
                         f"{overlap!r} at most one run goes at a time)")
    start = {"agent": agent, "input": {"text": message}, "session_id": session_id,
             "user_id": user_id, "run_id": None,
             "timeouts": (timeouts or Timeouts()).to_json(), "grace": 0.0,
             "schedule": {"id": schedule_id, "max_parallel": max_parallel,
                          "message": message}}
    spec = ScheduleSpec(cron_expressions=[cron]) if cron is not None else \
        ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)])  # type: ignore[arg-type]
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(WORKFLOW, start, id=f"rx-agent-schedule/{schedule_id}",
                                           task_queue=task_queue),
        spec=spec, policy=SchedulePolicy(overlap=OVERLAPS[overlap]),
        state=ScheduleState(paused=paused, note="created paused" if paused else None))
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError as exc:
        raise ValueError(f"a schedule {schedule_id!r} already exists") from exc


def _when(spec: ScheduleSpec) -> str:
    if spec.cron_expressions:
        return "cron " + "; ".join(spec.cron_expressions)
    parts = [f"every {interval.every}" for interval in spec.intervals]
    # The server may hand back a cron spec as calendars.
    return ", ".join(parts) or "calendar"


async def describe_schedule(client: Client, schedule_id: str) -> ScheduledAgent:
    """One schedule, as the server has it now."""
    described = await client.get_schedule_handle(schedule_id).describe()
    schedule = described.schedule
    action = schedule.action
    start: dict[str, Any] = {}
    queue = ""
    if isinstance(action, ScheduleActionStartWorkflow):
        queue = action.task_queue
        if action.args:
            arg = action.args[0]
            start = arg if isinstance(arg, dict) else {}
            if not start:
                payload = await client.data_converter.decode([arg])
                start = payload[0] if payload and isinstance(payload[0], dict) else {}
    meta = start.get("schedule") or {}
    overlap = next((name for name, value in OVERLAPS.items()
                    if value == schedule.policy.overlap), str(schedule.policy.overlap))
    return ScheduledAgent(
        id=schedule_id, agent=str(start.get("agent", "")), task_queue=queue,
        message=str(meta.get("message", "")), when=_when(schedule.spec), overlap=overlap,
        max_parallel=meta.get("max_parallel"), paused=schedule.state.paused,
        note=schedule.state.note, running=len(described.info.running_actions),
        started=described.info.num_actions,
        skipped=described.info.num_actions_skipped_overlap,
        next_runs=tuple(described.info.next_action_times))


async def list_schedules(client: Client) -> list[ScheduledAgent]:
    """Every schedule of the namespace that calls an agent, by id."""
    found = []
    async for listed in await client.list_schedules():
        schedule = listed.schedule
        action = getattr(schedule, "action", None) if schedule is not None else None
        if action is not None and getattr(action, "workflow", WORKFLOW) != WORKFLOW:
            continue
        found.append(await describe_schedule(client, listed.id))
    return sorted(found, key=lambda s: s.id)


async def pause_schedule(client: Client, schedule_id: str, note: str | None = None) -> None:
    """No new runs until :func:`unpause_schedule` (runs going now go on)."""
    await client.get_schedule_handle(schedule_id).pause(note=note or "paused")


async def unpause_schedule(client: Client, schedule_id: str, note: str | None = None) -> None:
    """Let a paused schedule trigger again."""
    await client.get_schedule_handle(schedule_id).unpause(note=note or "unpaused")


async def delete_schedule(client: Client, schedule_id: str) -> None:
    """Delete the schedule (runs going now go on)."""
    await client.get_schedule_handle(schedule_id).delete()
