"""``rx-agent schedule create|list|pause|unpause|delete``: an agent called on a cron or
interval schedule, on Temporal Schedules (the work is in :mod:`rx_agent.temporal`,
imported only when the command runs)."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

from ._base import EXIT_FAILURE, EXIT_OK, CLIError
from ._worker import DEFAULT_QUEUE, TEMPORAL_ENV

__all__ = ["add_schedule"]

_OVERLAPS = ("skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other",
             "allow_all")


def add_schedule(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    schedule = commands.add_parser(
        "schedule",
        help="call an agent on a cron or interval schedule (Temporal Schedules)",
        description="Manage schedules that call an agent served by `rx-agent worker`: each "
        "trigger starts a new workflow with a fresh copy of the agent and, unless "
        "--session names one, a session of its own. Needs the temporal extra.",
    )
    actions = schedule.add_subparsers(dest="action", metavar="ACTION", required=True)

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--temporal", metavar="HOST:PORT",
                            default=os.environ.get(TEMPORAL_ENV, "127.0.0.1:7233"),
                            help=f"the Temporal server (default ${TEMPORAL_ENV} or "
                            "127.0.0.1:7233)")
        parser.add_argument("--namespace", default="default", help="the Temporal namespace")

    create = actions.add_parser("create", help="create a schedule",
                                description="Call AGENT with MESSAGE on a cron expression "
                                "or every interval.")
    create.add_argument("schedule_id", metavar="ID")
    create.add_argument("--agent", required=True, help="the agent's name (as its worker "
                        "serves it)")
    create.add_argument("--message", required=True, help="what each run sends the agent")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="EXPR", help='a cron expression, e.g. "0 9 * * 1-5"')
    when.add_argument("--every", metavar="DURATION", help="an interval: 30s, 5m, 2h, 1d")
    create.add_argument("--task-queue", default=DEFAULT_QUEUE, metavar="Q",
                        help=f"the workers' task queue (default {DEFAULT_QUEUE})")
    create.add_argument("--overlap", choices=_OVERLAPS, default="skip",
                        help="a trigger while a run goes: skip it (default), buffer one or "
                        "all, cancel or terminate the running one, or allow all")
    create.add_argument("--max-parallel", type=int, metavar="N",
                        help="with --overlap allow_all: at most N runs at once (a run that "
                        "finds N going is skipped)")
    create.add_argument("--session", metavar="ID",
                        help="one session every run continues (default: a session per run)")
    create.add_argument("--user", metavar="ID", help="the runs' user id")
    create.add_argument("--paused", action="store_true", help="create it paused")
    common(create)
    create.set_defaults(handler=_create, hard_exit=True)

    listing = actions.add_parser("list", help="list the schedules that call agents")
    common(listing)
    listing.set_defaults(handler=_list, hard_exit=True)

    for name, handler, helped in (("pause", _pause, "pause a schedule (no new runs)"),
                                  ("unpause", _unpause, "let a paused schedule run again"),
                                  ("delete", _delete, "delete a schedule (running runs go on)")):
        parser = actions.add_parser(name, help=helped)
        parser.add_argument("schedule_id", metavar="ID")
        if name != "delete":
            parser.add_argument("--note", help="why (shown by list)")
        common(parser)
        parser.set_defaults(handler=handler, hard_exit=True)


def _run(args: argparse.Namespace, work: Callable[[Any, Any], Awaitable[None]]) -> int:
    try:
        from .. import temporal
        from ..temporal import _schedule
    except ImportError as exc:
        raise CLIError(str(exc), EXIT_FAILURE) from exc

    async def main() -> None:
        try:
            client = await temporal.connect(args.temporal, namespace=args.namespace)
        except temporal.TemporalUnavailableError as exc:
            raise CLIError(str(exc), EXIT_FAILURE) from exc
        try:
            await work(client, _schedule)
        except ValueError as exc:
            raise CLIError(str(exc)) from exc
        except Exception as exc:  # the server's refusal (no such schedule, ...)
            if type(exc).__name__ == "RPCError":
                raise CLIError(f"schedule {getattr(args, 'schedule_id', '')!r}: {exc}",
                               EXIT_FAILURE) from exc
            raise

    asyncio.run(main())
    return EXIT_OK


def _create(args: argparse.Namespace) -> int:
    async def work(client: Any, sched: Any) -> None:
        every = sched.parse_every(args.every) if args.every is not None else None
        await sched.create_schedule(
            client, args.schedule_id, agent=args.agent, task_queue=args.task_queue,
            message=args.message, cron=args.cron, every=every, overlap=args.overlap,
            max_parallel=args.max_parallel, session_id=args.session, user_id=args.user,
            paused=args.paused)
        print(f"created schedule {args.schedule_id!r}: {args.agent} "
              f"{'every ' + args.every if args.every else 'cron ' + args.cron}")

    return _run(args, work)


def _list(args: argparse.Namespace) -> int:
    async def work(client: Any, sched: Any) -> None:
        found = await sched.list_schedules(client)
        if not found:
            print("no schedules")
        for s in found:
            state = f"paused ({s.note})" if s.paused else "active"
            cap = f", at most {s.max_parallel}" if s.max_parallel else ""
            print(f"{s.id}: agent {s.agent} on {s.task_queue}, {s.when}, overlap "
                  f"{s.overlap}{cap}, {state}; {s.started} started, {s.running} running, "
                  f"{s.skipped} skipped")

    return _run(args, work)


def _pause(args: argparse.Namespace) -> int:
    async def work(client: Any, sched: Any) -> None:
        await sched.pause_schedule(client, args.schedule_id, args.note)
        print(f"paused schedule {args.schedule_id!r}")

    return _run(args, work)


def _unpause(args: argparse.Namespace) -> int:
    async def work(client: Any, sched: Any) -> None:
        await sched.unpause_schedule(client, args.schedule_id, args.note)
        print(f"unpaused schedule {args.schedule_id!r}")

    return _run(args, work)


def _delete(args: argparse.Namespace) -> int:
    async def work(client: Any, sched: Any) -> None:
        await sched.delete_schedule(client, args.schedule_id)
        print(f"deleted schedule {args.schedule_id!r}")

    return _run(args, work)
