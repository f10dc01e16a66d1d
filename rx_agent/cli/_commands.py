"""The commands: ``rx-agent plan``, ``rx-agent demo`` and ``rx-agent chat``."""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import sys
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..context import RuntimeContext
from ..event import AgentEvent
from ..middleware._plan import ExecutionPlan
from ..middleware.base import OPT_IN, ExtensionPoint
from ._base import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    CLIError,
    describe_error,
    error,
    make_console,
)
from ._logging import configure_logging
from ._providers import chat_model, close_sources, mcp_sources, show_tools
from ._pump import pump
from ._render import Renderer
from ._store import StoreChoice, choose_store, close_store, key_for, open_store, store_errors
from ._target import TargetError, build_agent, load_target

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from ..agent import ReActAgent
    from ..model import ChatModel
    from ._store import AnyStore

__all__ = ["cmd_chat", "cmd_demo", "cmd_plan"]

log = logging.getLogger("rx_agent.cli")


# -- rx-agent plan ---------------------------------------------------------------------


def _is_agent(obj: Any) -> bool:
    from ..agent import ReActAgent

    if isinstance(obj, ReActAgent):
        return True
    # Anything that exposes a frozen plan the same way can be shown too.
    try:
        return isinstance(getattr(obj, "plan", None), ExecutionPlan)
    except Exception:
        return False


def _load_agent(spec: str) -> Any:
    """The agent ``MODULE:ATTR`` names (a factory taking the store gets an in-memory one)."""
    try:
        return build_agent(load_target(spec, is_agent=_is_agent))
    except TargetError as exc:
        raise CLIError(str(exc)) from exc


def _plan_table(agent: Any) -> RenderableType:
    from rich.table import Table

    plan: ExecutionPlan = agent.plan
    middlewares = plan.middlewares
    table = Table(
        title=f"Execution plan of {getattr(agent, 'name', 'agent')!r} (frozen at build time)",
        title_justify="left",
        caption=(
            f"{len(middlewares)} middleware(s) registered; higher order() = outer; "
            "a point without participants calls the core directly"
        ),
        caption_justify="left",
    )
    table.add_column("point", style="bold")
    table.add_column("kind")
    table.add_column("participants, outermost first (order)")
    for point in ExtensionPoint:
        parts = plan.participants(point)
        if not parts and point in OPT_IN:  # shown only when somebody takes part
            continue
        shown = " → ".join(f"{type(m).__name__} ({m.order()})" for m in parts)
        table.add_row(point.value, point.kind, shown or "—")
    silent = [m for m in middlewares if not any(m in plan.participants(p) for p in ExtensionPoint)]
    if silent:
        names = ", ".join(type(m).__name__ for m in silent)
        table.caption = f"{table.caption}; registered but silent: {names}"
    return table


def cmd_plan(args: argparse.Namespace) -> int:
    agent = _load_agent(args.target)
    if args.mermaid:
        sys.stdout.write(agent.plan.to_mermaid() + "\n")
        sys.stdout.flush()
        return EXIT_OK
    console = make_console(args.no_color)
    console.print(_plan_table(agent))
    return EXIT_OK


# -- rx-agent demo ---------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    from .._demo import DEFAULT_DELAY, DEMO_QUESTION, build_demo_agent

    delay = DEFAULT_DELAY if args.delay is None else args.delay
    agent = build_demo_agent(delay)
    if args.json:
        return _demo_json(agent, DEMO_QUESTION)

    console = make_console(args.no_color)
    console.print(
        f"[bold]rx-agent demo[/] · rx_agent {__version__} · offline: a ScriptedModel plays "
        "a fixed conversation (no network, no API key)",
        soft_wrap=True,
    )
    console.print()
    console.print(_plan_table(agent))
    console.print()
    from rich.text import Text

    console.print(Text.assemble(("you > ", "bold magenta"), DEMO_QUESTION))
    renderer = Renderer(console)
    outcome = pump(agent.stream(DEMO_QUESTION), renderer.handle)
    if outcome.cancelled:
        return EXIT_INTERRUPTED
    if outcome.error is not None:
        raise CLIError(f"the demo failed: {describe_error(outcome.error)}", EXIT_FAILURE)
    console.print()
    console.print(
        "Next: `rx-agent plan rx_agent._demo:build_demo_agent --mermaid` draws this plan; "
        "`rx-agent chat --offline` chats with the same agent.",
        style="dim",
        markup=False,
        soft_wrap=True,
    )
    return EXIT_OK


def _demo_json(agent: ReActAgent, question: str) -> int:
    out = sys.stdout

    def emit(event: AgentEvent) -> None:
        out.write(event.model_dump_json() + "\n")
        out.flush()  # one event per line as it happens, for `| jq` and friends

    outcome = pump(agent.stream(question), emit)
    if outcome.cancelled:
        return EXIT_INTERRUPTED
    if outcome.error is not None:
        raise CLIError(f"the demo failed: {describe_error(outcome.error)}", EXIT_FAILURE)
    return EXIT_OK


# -- rx-agent chat ---------------------------------------------------------------------

_CHAT_HELP = (
    "Type a message and press Enter. Ctrl-C interrupts the reply; Ctrl-D or /exit quits. "
    "/new starts a fresh session; /tools lists the tools; /help shows this."
)


def _chat_model(args: argparse.Namespace) -> tuple[ChatModel, str]:
    """The model to chat with and a line describing it (``--provider``)."""
    return chat_model(args)


def _read_line(prompt: str) -> str | None:
    """One line of input; ``None`` at end of input (Ctrl-D)."""
    try:
        return input(prompt)
    except EOFError:
        return None


def cmd_chat(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, [args.api_key] if args.api_key else [])
    model, described = _chat_model(args)
    console = make_console(args.no_color)
    # --session or --store: a durable conversation; neither: today's in-memory chat.
    store = None
    choice = None
    if args.session is not None or args.store is not None:
        choice = choose_store(args.store)
        store = open_store(choice, create=True)
    sources = mcp_sources(args.mcp)  # --mcp servers start with the first reply
    try:
        return _chat(args, model, described, console, store, choice, sources)
    finally:
        close_sources(sources)
        close_store(store)


def _chat(
    args: argparse.Namespace,
    model: ChatModel,
    described: str,
    console: Console,
    store: AnyStore | None,
    choice: StoreChoice | None,
    sources: list[Any],
) -> int:
    from .._demo import build_chat_agent

    agent = (build_chat_agent(model, args.system, session_store=store) if args.system
             else build_chat_agent(model, session_store=store))
    for source in sources:
        agent.toolkit.register_mcp(source)
    if sys.stdin.isatty():
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())

    base = args.session or "chat"
    session = base
    fresh = 0
    console.print(f"[bold]rx-agent chat[/] · {described} · session {session!r}", soft_wrap=True)
    if store is not None and choice is not None:
        with store_errors(choice):
            # Read now: a corrupt record or an unreachable server fails before typing.
            earlier = store.load(key_for(args.user, session))
        n = len(earlier.context) if earlier is not None else 0
        status = f"continuing, {n} earlier message(s)" if n else "new"
        console.print(f"{status} · saved to {choice.shown}", style="dim", markup=False,
                      soft_wrap=True)
    console.print(_CHAT_HELP, style="dim", markup=False, soft_wrap=True)
    shown_prompts: set[str] = set()
    answered = False
    while True:
        try:
            line = _read_line("\nyou > ")
        except KeyboardInterrupt:
            # Ctrl-C at the prompt discards the line, like a shell; it does not quit.
            console.print()
            console.print("(Ctrl-D or /exit quits)", style="dim")
            continue
        if line is None:
            console.print()
            return EXIT_OK
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            return EXIT_OK
        if text == "/help":
            console.print(_CHAT_HELP, style="dim", markup=False, soft_wrap=True)
            continue
        if text == "/tools":
            show_tools(agent, console)
            continue
        if text == "/new":
            fresh += 1
            session = f"{base}-{fresh}"
            if store is not None and choice is not None:
                with store_errors(choice):
                    # A stored NAME-k is an old conversation, not a fresh one.
                    taken = {k.session_id
                             for k in store.list_sessions(key_for(args.user, base).user_id)}
                while session in taken:
                    fresh += 1
                    session = f"{base}-{fresh}"
            console.print(f"new session {session!r}", style="dim", markup=False)
            continue

        ctx = RuntimeContext(session_id=session, user_id=args.user)
        renderer = Renderer(console, shown_prompts)
        stop = functools.partial(agent.interrupt, ctx)
        outcome = pump(agent.stream(text, ctx), renderer.handle, interrupt=stop)
        if outcome.cancelled:
            renderer.note("(reply cancelled)", "yellow")
        elif outcome.error is not None:
            log.info("the reply on session %r (run %s) failed", session, ctx.run_id,
                     exc_info=outcome.error, extra={"session_id": session,
                                                    "run_id": ctx.run_id})
            message = describe_error(outcome.error)
            if not answered:
                # Before any reply worked, an error almost always means the endpoint,
                # key or model name is wrong: retrying by hand will not help.
                raise CLIError(message, EXIT_FAILURE)
            renderer.note("")
            error(message)
        else:
            answered = True
