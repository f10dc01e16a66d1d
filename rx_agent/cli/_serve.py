"""``rx-agent serve MODULE:ATTR``: the options; the work is in :mod:`rx_agent.serve._cli`
(imported only when the command runs, so the CLI works without the ``serve`` extra)."""

from __future__ import annotations

import argparse
import os

from ..session._url import store_url_forms
from ._base import EXIT_FAILURE, EXIT_OK, CLIError
from ._logging import LOG_LEVELS

__all__ = ["TOKEN_ENV", "add_serve"]

TOKEN_ENV = "RX_AGENT_TOKEN"


def add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve an agent over HTTP (SSE) with a web console",
        description="Import MODULE, take ATTR (a ReActAgent, or a factory taking the session "
        "store and returning one) and serve it: POST /v1/sessions/ID/messages streams the "
        "call's events as Server-Sent Events; /console is a web console; /openapi.json "
        "describes the rest. Needs the serve extra (pip install 'rx-agent[serve]').",
        epilog="With --token T every request needs `Authorization: Bearer T` (sessions "
        "belong to user 'default'); --tokens FILE maps several tokens to user ids. A token "
        "has at least 8 characters and no surrounding whitespace. Without either the "
        "server only listens on a loopback address. Failed calls are logged to stderr with "
        "their traceback, session and run id; tokens and API keys are shown as [redacted].",
    )
    serve.add_argument("target", metavar="MODULE:ATTR", help="e.g. myapp.agents:build_agent")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    serve.add_argument("--workers", type=int, default=1, metavar="N",
                       help="worker processes (default 1; more need a shared --store)")
    serve.add_argument("--store", metavar="URL",
                       help="the session store for a factory target (default memory://): "
                       f"{store_url_forms(plugins=False)}")
    serve.add_argument("--token", metavar="T", default=os.environ.get(TOKEN_ENV),
                       help="the bearer token clients must send, at least 8 characters "
                       f"(default: ${TOKEN_ENV})")
    serve.add_argument("--tokens", metavar="FILE",
                       help='a JSON object of token -> user id, e.g. {"t0k3n-a": "alice"}')
    serve.add_argument("--no-auth", action="store_true",
                       help="allow serving without tokens on a non-loopback address")
    serve.add_argument("--queue", action="store_true",
                       help="queue posts to a busy session instead of answering 409")
    serve.add_argument("--keep-running", action="store_true",
                       help="a call whose client disconnects runs to its end; the client "
                       "reconnects to any worker with Last-Event-ID for the rest "
                       "(GET /v1/sessions/ID/runs/RUN/events)")
    serve.add_argument("--max-body", type=int, default=1 << 20, metavar="BYTES",
                       help="the largest request body (default 1 MiB)")
    serve.add_argument("--no-openai", dest="openai", action="store_false",
                       help="do not serve the OpenAI-compatible routes (/v1/chat/completions, "
                       "/v1/responses, /v1/models)")
    serve.add_argument("--no-a2a", action="store_true",
                       help="do not serve the A2A protocol (the agent card and /a2a), even "
                       "with the a2a extra installed")
    serve.add_argument("--no-agui", action="store_true",
                       help="do not serve AG-UI at POST /v1/agui (on when the agui extra is "
                       "installed)")
    serve.add_argument("--engine", choices=("local", "temporal"), default="local",
                       help="where calls run: in this process (local, the default) or as "
                       "Temporal workflows that `rx-agent worker` processes run (temporal; "
                       "the temporal extra)")
    serve.add_argument("--temporal", metavar="HOST:PORT",
                       default=os.environ.get("RX_AGENT_TEMPORAL", "127.0.0.1:7233"),
                       help="with --engine temporal: the server (default $RX_AGENT_TEMPORAL "
                       "or 127.0.0.1:7233)")
    serve.add_argument("--task-queue", default="rx-agent", metavar="Q",
                       help="with --engine temporal: the workers' task queue (default "
                       "rx-agent)")
    serve.add_argument("--log-level", default="info", choices=LOG_LEVELS,
                       help="what goes to stderr (default info: the console's URL, each "
                       "request, every failure with its traceback)")
    serve.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from ..serve._auth import load_tokens
        from ..serve._cli import ServeConfig, ServeError, run
    except ImportError as exc:
        raise CLIError(str(exc), EXIT_FAILURE) from exc
    tokens: dict[str, str] | None = None
    try:
        if args.tokens:
            tokens = load_tokens(args.tokens)
        if args.token:
            tokens = {**(tokens or {}), args.token: "default"}
        config = ServeConfig(target=args.target, host=args.host, port=args.port,
                             workers=args.workers, store=args.store, tokens=tokens,
                             queue=args.queue, max_body=args.max_body, log_level=args.log_level,
                             openai=args.openai, a2a=False if args.no_a2a else None,
                             agui=False if args.no_agui else None, engine=args.engine,
                             temporal=args.temporal, task_queue=args.task_queue,
                             keep_running=args.keep_running)
        run(config, no_auth=args.no_auth)
    except ServeError as exc:
        raise CLIError(str(exc)) from exc
    except ValueError as exc:  # a bad tokens file, a short token
        raise CLIError(str(exc)) from exc
    return EXIT_OK
