"""The ``rx-agent`` argument parser: the commands, their options and help texts."""

from __future__ import annotations

import argparse
import math

from .._version import __version__
from ..session._url import store_url_forms
from ._base import DEFAULT_OPENAI_MODEL, PROG
from ._commands import cmd_chat, cmd_demo, cmd_plan
from ._logging import LOG_LEVELS
from ._providers import PROVIDERS
from ._schedule import add_schedule
from ._serve import add_serve
from ._sessions import cmd_sessions_delete, cmd_sessions_list, cmd_sessions_show
from ._store import STORE_ENV, default_store_help
from ._worker import add_worker

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="rx_agent: AgentScope Java's agent runtime and middleware system, on RxPY.",
        epilog="Start with `rx-agent demo` (offline, no API key). "
        "`rx-agent COMMAND --help` explains each command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--traceback",
        action="store_true",
        help="on an error, show the full Python traceback instead of one line",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        help="run the offline showcase (scripted model, tools, middlewares)",
        description="Run a ReAct agent on the built-in scripted model: it thinks, calls "
        "two tools and answers, through three middlewares. Prints the agent's "
        "execution plan, then renders the live event stream. Needs no network and "
        "no API key.",
    )
    demo.add_argument(
        "--json",
        action="store_true",
        help="print each event as one line of JSON (event.model_dump_json()) and nothing "
        "else; rx_agent.parse_event() reads them back",
    )
    _add_display_options(demo)
    demo.set_defaults(handler=cmd_demo)

    chat = commands.add_parser(
        "chat",
        help="chat with a model on an OpenAI-compatible endpoint",
        description="An interactive chat with streaming output and visible tool calls "
        "(calculate, current_time and a canned get_weather). Ctrl-C interrupts the "
        "current reply; Ctrl-D or /exit quits. The endpoint comes from the options or "
        "from OPENAI_BASE_URL, OPENAI_API_KEY and RX_AGENT_MODEL.",
        epilog="Commands inside the chat: /exit, /new (start a fresh session), /help. "
        "Without --session or --store the conversation lives in memory and ends with this "
        "process; with either it is saved to the session store after every step, and "
        "running the same command again continues it (`rx-agent sessions` lists them).",
    )
    chat.add_argument(
        "--provider",
        choices=PROVIDERS,
        default="openai",
        help="the API the endpoint speaks: openai (chat completions, the default) or "
        "anthropic (the Messages API; $ANTHROPIC_API_KEY, $ANTHROPIC_BASE_URL)",
    )
    chat.add_argument(
        "--mcp",
        metavar="SERVER",
        action="append",
        help='add the tools of an MCP server: "stdio:COMMAND ARGS..." (spawned) or an '
        "http(s):// URL (streamable HTTP); repeatable; /tools lists them",
    )
    chat.add_argument(
        "--base-url",
        metavar="URL",
        help="the API base URL, e.g. http://localhost:11434/v1 (default: $OPENAI_BASE_URL, "
        "else https://api.openai.com/v1)",
    )
    chat.add_argument(
        "--api-key", metavar="KEY", help="the API key (default: $OPENAI_API_KEY)"
    )
    chat.add_argument(
        "--model",
        metavar="NAME",
        help=f"the model name (default: $RX_AGENT_MODEL; {DEFAULT_OPENAI_MODEL} on "
        "api.openai.com)",
    )
    chat.add_argument(
        "--session",
        metavar="NAME",
        type=_non_empty,
        help="the session to talk in, saved to the session store (see --store) and "
        "continued by the next `rx-agent chat --session NAME`; without it (and without "
        "--store) the session 'chat' lives in memory only",
    )
    chat.add_argument(
        "--user",
        metavar="USER",
        type=_non_empty,
        help="the user the session belongs to (default: anonymous)",
    )
    _add_store_option(chat, "where the session is saved")
    chat.add_argument("--system", metavar="PROMPT", help="replace the default system prompt")
    chat.add_argument(
        "--offline",
        action="store_true",
        help="use the offline demo model (weather, arithmetic, the time) instead of an "
        "endpoint",
    )
    _add_display_options(chat, delay_note=" used by --offline")
    chat.add_argument(
        "--log-level",
        default="warning",
        choices=LOG_LEVELS,
        help="what is logged to stderr (default warning; info adds the traceback of a "
        "failed reply, with its session and run id); API keys are shown as [redacted]",
    )
    chat.set_defaults(handler=cmd_chat)

    plan = commands.add_parser(
        "plan",
        help="print the execution plan of an agent in your code",
        description="Import MODULE (the current directory is on sys.path), take ATTR "
        "from it (a ReActAgent, a function of no argument returning one, or a function "
        "taking the session store, given an in-memory one here; async def works too) and "
        "print its frozen execution plan: for each extension point, the participating "
        "middlewares, outermost first, with their order() values.",
    )
    plan.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="e.g. myapp.agents:agent or myapp.agents:build_agent "
        "(try rx_agent._demo:build_demo_agent)",
    )
    plan.add_argument(
        "--mermaid", action="store_true", help="print a Mermaid flowchart instead of a table"
    )
    plan.add_argument("--no-color", action="store_true", help="plain text, no colours or styles")
    plan.set_defaults(handler=cmd_plan)
    _add_sessions(commands)
    add_serve(commands)
    add_worker(commands)
    add_schedule(commands)
    return parser


def _add_store_option(parser: argparse.ArgumentParser, what: str = "the session store") -> None:
    parser.add_argument(
        "--store",
        metavar="URL",
        help=f"{what}: {store_url_forms(plugins=False)}; default: {default_store_help()}",
    )


def _add_sessions(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    sessions = commands.add_parser(
        "sessions",
        help="list, show or delete the sessions in a session store",
        description="Inspect a session store: the SQLite file `rx-agent chat --session` "
        f"writes by default, ${STORE_ENV}, or any --store URL (a Redis server your "
        "services share, say). Nothing here creates a database.",
    )
    actions = sessions.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser(
        "list",
        help="a table of the stored sessions",
        description="A table of the stored sessions: user, session, message count and "
        "the time of the last message.",
    )
    listing.add_argument("--user", metavar="USER", type=_non_empty,
                         help="only this user's sessions (default: every user's)")
    _add_sessions_common(listing)
    listing.set_defaults(handler=cmd_sessions_list)

    show = actions.add_parser(
        "show",
        help="the messages of one session",
        description="Every message of SESSION in order: role, text, thinking, tool calls "
        "and tool results, and why the model stopped (generate_reason).",
    )
    _add_session_target(show)
    _add_sessions_common(show)
    show.set_defaults(handler=cmd_sessions_show)

    delete = actions.add_parser(
        "delete",
        help="delete one session",
        description="Delete SESSION and its messages; exits with status 1 when there is "
        "no such session. Do not delete a session a running agent is serving.",
    )
    _add_session_target(delete)
    _add_sessions_common(delete, table=False)
    delete.set_defaults(handler=cmd_sessions_delete)


def _add_session_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", type=_non_empty, help="the session id")
    parser.add_argument(
        "--user",
        metavar="USER",
        type=_non_empty,
        help="the user the session belongs to (default: the one user that has a session "
        "of that name; anonymous sessions belong to __anon__)",
    )


def _add_sessions_common(parser: argparse.ArgumentParser, table: bool = True) -> None:
    _add_store_option(parser)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document on stdout instead of text")
    if table:
        parser.add_argument("--no-color", action="store_true",
                            help="plain text, no colours or styles")


def _add_display_options(parser: argparse.ArgumentParser, delay_note: str = "") -> None:
    parser.add_argument(
        "--no-color",
        action="store_true",
        help="plain text, no colours or styles (also the default when output is not a "
        "terminal, or NO_COLOR is set)",
    )
    parser.add_argument(
        "--delay",
        type=_non_negative_float,
        default=None,
        metavar="SECONDS",
        help=f"seconds before each chunk of the scripted model{delay_note}; default 0.02, "
        "0 is instant",
    )


def _non_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0 or math.isnan(value):
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value
