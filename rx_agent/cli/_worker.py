"""``rx-agent worker MODULE:ATTR --temporal HOST:PORT --task-queue Q``: a Temporal worker
for the agent ``MODULE:ATTR`` names (the work is in :mod:`rx_agent.temporal`, imported
only when the command runs, so the CLI works without the ``temporal`` extra)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

from ..session._url import store_url_forms
from ._base import EXIT_FAILURE, EXIT_OK, CLIError
from ._logging import LOG_LEVELS, configure_logging
from ._target import TargetError, build_agent, load_target

__all__ = ["TEMPORAL_ENV", "add_worker", "cmd_worker"]

TEMPORAL_ENV = "RX_AGENT_TEMPORAL"
DEFAULT_QUEUE = "rx-agent"


def add_worker(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser(
        "worker",
        help="run a Temporal worker that runs an agent's calls as durable workflows",
        description="Import MODULE, take ATTR (a ReActAgent, or a factory returning one, "
        "called once at start; a factory may take the session store) and serve its calls on "
        "a Temporal task queue: each call is a workflow, each model call and tool call an "
        "activity, so a call survives this process. Start any number of workers on one "
        "queue. Needs the temporal extra (pip install 'rx-agent[temporal]').",
        epilog="Callers start calls with rx_agent.temporal.TemporalAgent or `rx-agent serve "
        "--engine temporal`. SIGTERM or Ctrl-C stops the worker; its calls continue on "
        "another worker.",
    )
    worker.add_argument("targets", metavar="MODULE:ATTR", nargs="+",
                        help="e.g. myapp.agents:build_agent (several: one worker for all)")
    worker.add_argument("--temporal", metavar="HOST:PORT",
                        default=os.environ.get(TEMPORAL_ENV, "127.0.0.1:7233"),
                        help=f"the Temporal server (default ${TEMPORAL_ENV} or 127.0.0.1:7233)")
    worker.add_argument("--namespace", default="default",
                        help="the Temporal namespace (default: default)")
    worker.add_argument("--task-queue", default=DEFAULT_QUEUE, metavar="Q",
                        help=f"the task queue to serve (default {DEFAULT_QUEUE})")
    worker.add_argument("--store", metavar="URL",
                        help="the session store for a factory target (default memory://; "
                        f"workers share sessions only through a shared one): "
                        f"{store_url_forms(plugins=False)}")
    worker.add_argument("--log-level", default="info", choices=LOG_LEVELS,
                        help="what goes to stderr (default info)")
    worker.set_defaults(handler=cmd_worker, hard_exit=True)


def _agents(args: argparse.Namespace) -> list[Any]:
    store = None
    if args.store is not None:
        from ..session import session_store_from_url

        try:
            store = session_store_from_url(args.store)
        except (ValueError, ImportError) as exc:
            raise CLIError(f"--store: {exc}") from exc
    agents = []
    try:
        for spec in args.targets:
            target = load_target(spec)
            if target.agent is not None and store is not None:
                raise CLIError(f"{spec} is an agent, built with its own session store; "
                               "--store needs a factory taking the store")
            agents.append(build_agent(target, store if target.takes_store else None))
    except TargetError as exc:
        raise CLIError(str(exc)) from exc
    return agents


def cmd_worker(args: argparse.Namespace) -> int:
    try:
        from ..temporal import AgentWorker, TemporalUnavailableError, connect
    except ImportError as exc:
        raise CLIError(str(exc), EXIT_FAILURE) from exc
    configure_logging(args.log_level)
    agents = _agents(args)

    async def serve() -> None:
        try:
            client = await connect(args.temporal, namespace=args.namespace)
        except TemporalUnavailableError as exc:
            raise CLIError(str(exc), EXIT_FAILURE) from exc
        try:
            worker = AgentWorker(client, args.task_queue, agents)
        except ValueError as exc:
            raise CLIError(str(exc)) from exc
        task = asyncio.ensure_future(worker.run())
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError):  # not on Windows
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        names = ", ".join(a.name for a in agents)
        print(f"rx-agent worker: serving {names} on task queue {args.task_queue!r} at "
              f"{args.temporal} (pid {os.getpid()})", file=sys.stderr, flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return EXIT_OK
