"""The ``rx-agent`` argument parser: the commands, their options and help texts."""

from __future__ import annotations

import argparse
import math

from .._version import __version__
from ._base import DEFAULT_OPENAI_MODEL, PROG
from ._commands import cmd_chat, cmd_demo, cmd_plan

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
        "Sessions live in memory: they last as long as this process.",
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
        default="chat",
        help="the session to talk in (default: %(default)s); every message of this "
        "process continues it",
    )
    chat.add_argument("--system", metavar="PROMPT", help="replace the default system prompt")
    chat.add_argument(
        "--offline",
        action="store_true",
        help="use the scripted demo model instead of an endpoint",
    )
    _add_display_options(chat, delay_note=" used by --offline")
    chat.set_defaults(handler=cmd_chat)

    plan = commands.add_parser(
        "plan",
        help="print the execution plan of an agent in your code",
        description="Import MODULE (the current directory is on sys.path), take ATTR "
        "from it (a ReActAgent, or a zero-argument function returning one) and print "
        "its frozen execution plan: for each extension point, the participating "
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
    return parser


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


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0 or math.isnan(value):
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value
