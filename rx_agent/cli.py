"""The ``rx-agent`` command line: ``demo``, ``chat`` and ``plan``.

``main(argv)`` returns the exit status instead of calling ``sys.exit`` so that it can
be called from tests and from other programs. Errors the user can fix (a bad
``MODULE:ATTR``, no endpoint configured, a wrong key) are reported as one line,
``rx-agent: error: ...``, on stderr; ``--traceback`` shows the full story.

``rich`` (the ``cli`` extra) renders the human output. It is imported only by the
commands that draw something, so ``demo --json`` and ``plan --mermaid`` work without it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib
import inspect
import io
import json
import math
import os
import queue
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reactivex import Observable

from ._version import __version__
from .context import RuntimeContext
from .event import (
    AgentEndEvent,
    AgentEvent,
    AgentResultEvent,
    AgentStartEvent,
    AllToolsDeniedEvent,
    CustomEvent,
    DataBlockStartEvent,
    ExceedMaxItersEvent,
    HintBlockEvent,
    ModelCallEndEvent,
    ModelCallStartEvent,
    RequestStopEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)
from .message import ChatUsage, Msg, ToolResultState
from .middleware.base import ExtensionPoint
from .middleware.plan import ExecutionPlan

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from .agent import ReActAgent
    from .model import ChatModel

__all__ = ["main"]

PROG = "rx-agent"

# Exit statuses. 2 is what argparse uses for a bad command line; bad input found
# later (a module that does not import, no endpoint) is the same kind of mistake.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SIGPIPE = 141  # what a C tool killed by SIGPIPE reports (128 + 13)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C

_DEFAULT_OPENAI_MODEL = "gpt-4o-mini"


class CLIError(Exception):
    """An error reported as one line on stderr, with an exit status."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _describe_error(exc: BaseException) -> str:
    """``Type: message`` for surprises, just the message for our own typed errors."""
    from .model.errors import ModelError

    if isinstance(exc, ModelError):
        return _one_line(exc)
    return f"{type(exc).__name__}: {_one_line(exc)}"


# -- argument parsing --------------------------------------------------------------


def _build_parser() -> argparse.ArgumentParser:
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
    demo.set_defaults(handler=_cmd_demo)

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
        help=f"the model name (default: $RX_AGENT_MODEL; {_DEFAULT_OPENAI_MODEL} on "
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
    chat.set_defaults(handler=_cmd_chat)

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
    plan.set_defaults(handler=_cmd_plan)
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


# -- entry point -------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``rx-agent`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    _tolerate_unencodable_output()
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except CLIError as exc:
        if args.traceback:
            raise
        _error(str(exc))
        return exc.status
    except BrokenPipeError:
        # The reader went away (`rx-agent demo | head`). Point stdout at devnull so
        # that the interpreter's final flush does not complain about the pipe too.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_SIGPIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        if args.traceback:
            raise
        _error(f"{_describe_error(exc)} (run with --traceback for details)")
        return EXIT_FAILURE


def _error(message: str) -> None:
    # One line, always: a message that carries newlines would look like a traceback.
    sys.stderr.write(f"{PROG}: error: {' '.join(message.split())}\n")
    sys.stderr.flush()


def _tolerate_unencodable_output() -> None:
    """Replace what the output encoding cannot show (°, box drawing on cp1252)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors="replace")


def _console(no_color: bool) -> Console:
    try:
        from rich.console import Console
    except ImportError:
        raise CLIError(
            "this command needs rich: pip install 'rx-agent[cli]'", EXIT_FAILURE
        ) from None

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich exits with status 1 here; main() reports a closed pipe uniformly.
            self.quiet = True
            raise BrokenPipeError

    # color_system=None drops every style, not just colours: --no-color is plain text.
    # Without the flag rich already writes plain text when the output is not a
    # terminal, and honours NO_COLOR.
    return _Console(
        highlight=False,
        color_system=None if no_color else "auto",
    )


# -- streaming an agent call from a plain thread -----------------------------------


@dataclass(slots=True)
class _Outcome:
    error: BaseException | None = None
    interrupted: bool = False  # Ctrl-C asked the agent to stop the reply
    cancelled: bool = False  # the subscription was disposed before the end


def _pump(
    events: Observable[AgentEvent],
    handle: Callable[[AgentEvent], None],
    interrupt: Callable[[], bool] | None = None,
) -> _Outcome:
    """Subscribe and hand every event to ``handle`` on this (the main) thread.

    The agent runs on its own loop; events cross over through a queue, so rendering
    never races the runtime and Ctrl-C (a ``KeyboardInterrupt`` here) can be turned
    into ``interrupt()``: the agent then ends the reply with ``INTERRUPTED`` and the
    stream completes normally. A second Ctrl-C, or one without ``interrupt``,
    disposes the subscription, which cancels the model stream and running tools.
    """
    inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    outcome = _Outcome()
    subscription = events.subscribe(
        on_next=lambda event: inbox.put(("event", event)),
        on_error=lambda exc: inbox.put(("error", exc)),
        on_completed=lambda: inbox.put(("done", None)),
    )
    try:
        while True:
            try:
                try:
                    # A timeout keeps Ctrl-C deliverable on every platform.
                    kind, value = inbox.get(timeout=0.1)
                except queue.Empty:
                    continue
                if kind == "event":
                    handle(value)
                elif kind == "error":
                    outcome.error = value
                    return outcome
                else:
                    return outcome
            except KeyboardInterrupt:
                if interrupt is not None and not outcome.interrupted:
                    outcome.interrupted = True
                    if interrupt():
                        continue  # drain: the INTERRUPTED result is on its way
                outcome.cancelled = True
                return outcome
    finally:
        subscription.dispose()


# -- rendering events ----------------------------------------------------------------

_MAX_RESULT_LINES = 12
_MAX_RESULT_CHARS = 1500


def _clip(text: str) -> str:
    """A tool result short enough for a panel, saying how much was left out."""
    lines = text.splitlines() or [""]
    clipped = "\n".join(lines[:_MAX_RESULT_LINES])
    if len(clipped) > _MAX_RESULT_CHARS:
        clipped = clipped[:_MAX_RESULT_CHARS]
    hidden = len(text) - len(clipped)
    if hidden > 0:
        clipped += f"\n… ({hidden} more characters)"
    return clipped


class _Renderer:
    """Draws an agent's event stream on a rich console as it arrives.

    Text and thinking are written delta by delta on the current line (thinking
    dimmed); tool calls and tool results become panels once complete; each model
    call ends with a dim line (tokens and the latency ``TimingMiddleware`` stamps);
    the reply ends with a summary of its token usage.
    """

    def __init__(self, console: Console, shown_prompts: set[str] | None = None) -> None:
        self.console = console
        # System prompts already shown: a chat passes one set to every turn's
        # renderer so that an unchanged prompt is not repeated each time.
        self._shown_prompts = shown_prompts if shown_prompts is not None else set()
        self.total = ChatUsage()
        self.model_calls = 0
        self.result: Msg | None = None
        self._agent = "agent"
        self._open_line = False
        self._started = time.perf_counter()
        self._models: dict[str, str | None] = {}
        self._calls: dict[str, tuple[str, list[str]]] = {}
        self._results: dict[str, tuple[str, list[str]]] = {}

    # helpers

    def _write(self, text: str, style: str = "") -> None:
        from rich.text import Text

        if text:
            self.console.print(Text(text, style=style), end="", soft_wrap=True)
            self._open_line = not text.endswith("\n")

    def _line(self, renderable: RenderableType | str, style: str = "") -> None:
        from rich.text import Text

        self._close_line()
        if isinstance(renderable, str):
            # Notes are not hard-wrapped: the terminal wraps them, and a pipe gets
            # whole lines that grep and friends can use.
            self.console.print(Text(renderable, style=style), soft_wrap=True)
        else:
            self.console.print(renderable)

    def _close_line(self) -> None:
        if self._open_line:
            self.console.print()
            self._open_line = False

    def note(self, text: str, style: str = "dim") -> None:
        self._line(text, style)

    # events

    def handle(self, event: AgentEvent) -> None:
        if isinstance(event, TextBlockDeltaEvent):
            self._write(event.delta)
        elif isinstance(event, ThinkingBlockDeltaEvent):
            self._write(event.delta, "dim italic")
        elif isinstance(event, TextBlockStartEvent):
            self._close_line()
            self._write(f"{self._agent} > ", "bold cyan")
        elif isinstance(event, ThinkingBlockStartEvent):
            self._close_line()
            self._write("thinking > ", "dim italic")
        elif isinstance(event, (TextBlockEndEvent, ThinkingBlockEndEvent)):
            self._close_line()
        elif isinstance(event, ToolCallStartEvent):
            self._calls[event.tool_call_id] = (event.tool_call_name, [])
        elif isinstance(event, ToolCallDeltaEvent):
            self._calls.setdefault(event.tool_call_id, (event.tool_call_name, []))[1].append(
                event.delta
            )
        elif isinstance(event, ToolCallEndEvent):
            self._tool_call(event.tool_call_id, event.tool_call_name)
        elif isinstance(event, ToolResultStartEvent):
            self._results[event.tool_call_id] = (event.tool_call_name, [])
        elif isinstance(event, ToolResultTextDeltaEvent):
            self._results.setdefault(event.tool_call_id, (event.tool_call_name, []))[1].append(
                event.delta
            )
        elif isinstance(event, ToolResultEndEvent):
            self._tool_result(event)
        elif isinstance(event, ModelCallStartEvent):
            self._models[event.reply_id] = event.model_name
        elif isinstance(event, ModelCallEndEvent):
            self._model_call_end(event)
        elif isinstance(event, CustomEvent):
            self._custom(event)
        elif isinstance(event, AgentStartEvent):
            self._agent = event.name
            self._started = time.perf_counter()
        elif isinstance(event, AgentResultEvent):
            self.result = event.result
        elif isinstance(event, AgentEndEvent):
            self._summary()
        else:
            self._notice(event)

    def _tool_call(self, call_id: str, name: str) -> None:
        from rich.panel import Panel
        from rich.text import Text

        _, parts = self._calls.pop(call_id, (name, []))
        raw = "".join(parts)
        try:
            shown = json.dumps(json.loads(raw or "{}"), ensure_ascii=False)
        except ValueError:
            shown = raw  # the model sent broken JSON: show exactly what it sent
        self._line(
            Panel(
                Text(shown),
                title=f"tool call · {name}",
                title_align="left",
                border_style="yellow",
                expand=False,
            )
        )

    def _tool_result(self, event: ToolResultEndEvent) -> None:
        from rich.panel import Panel
        from rich.text import Text

        name, parts = self._results.pop(event.tool_call_id, (event.tool_call_name, []))
        ok = event.state is ToolResultState.SUCCESS
        self._line(
            Panel(
                Text(_clip("".join(parts))),
                title=f"tool result · {name} · {event.state.value}",
                title_align="left",
                border_style="green" if ok else "red",
                expand=False,
            )
        )

    def _model_call_end(self, event: ModelCallEndEvent) -> None:
        self.model_calls += 1
        model = self._models.pop(event.reply_id, None) or "model"
        parts = [f"model call {self.model_calls} · {model}"]
        if event.usage is not None:
            self.total = self.total + event.usage
            parts.append(f"{event.usage.input_tokens} → {event.usage.output_tokens} tokens")
        timing = event.metadata.get("timing")
        if isinstance(timing, dict):
            parts.append(
                f"first chunk {timing.get('first_chunk_ms')} ms, "
                f"total {timing.get('total_ms')} ms"
            )
        elif event.usage is not None and event.usage.time is not None:
            parts.append(f"{event.usage.time * 1000:.0f} ms")
        self.note("  " + " · ".join(parts))

    def _custom(self, event: CustomEvent) -> None:
        value = event.value
        if isinstance(value, dict) and isinstance(value.get("text"), str):
            self.note(f"· {value['text']}")
            prompt = value.get("system_prompt")
            if isinstance(prompt, str) and prompt and prompt not in self._shown_prompts:
                self._shown_prompts.add(prompt)
                self.note("  system prompt: " + " ⏎ ".join(prompt.splitlines()))
        else:
            self.note(f"· {event.name}: {json.dumps(value, ensure_ascii=False, default=str)}")

    def _notice(self, event: AgentEvent) -> None:
        if isinstance(event, ExceedMaxItersEvent):
            self.note(
                f"! reached max_iters ({event.max_iters}): asking for a summary", "yellow"
            )
        elif isinstance(event, RequestStopEvent):
            reason = f": {event.reason}" if event.reason else ""
            self.note(f"! stop requested ({event.generate_reason.value}){reason}", "yellow")
        elif isinstance(event, AllToolsDeniedEvent):
            names = ", ".join(c.name for c in event.denied_tool_calls)
            self.note(f"! every tool call was denied: {names}", "yellow")
        elif isinstance(event, RequireUserConfirmEvent):
            names = ", ".join(c.name for c in event.tool_calls)
            self.note(f"! paused: waiting for the user to confirm {names}", "yellow")
        elif isinstance(event, RequireExternalExecutionEvent):
            names = ", ".join(c.name for c in event.tool_calls)
            self.note(f"! paused: {names} must be run outside the agent", "yellow")
        elif isinstance(event, HintBlockEvent):
            self.note(f"hint: {event.hint}")
        elif isinstance(event, DataBlockStartEvent):
            self.note(f"[data block: {event.media_type}]")
        # Deltas of data blocks and tool-result data are not drawable in a terminal.

    def _summary(self) -> None:
        elapsed = time.perf_counter() - self._started
        reason = self.result.generate_reason if self.result is not None else None
        total = self.total
        style = "bold green" if reason is not None and reason.value == "MODEL_STOP" else "yellow"
        self._line(
            f"done · {reason.value if reason else 'no result'} · {self.model_calls} model "
            f"call(s) · tokens: {total.input_tokens} in + {total.output_tokens} out = "
            f"{total.total_tokens} · {elapsed:.2f} s",
            style,
        )


# -- rx-agent plan ---------------------------------------------------------------------


def _is_agent(obj: Any) -> bool:
    from .agent import ReActAgent

    if isinstance(obj, ReActAgent):
        return True
    # Anything that exposes a frozen plan the same way can be shown too.
    try:
        return isinstance(getattr(obj, "plan", None), ExecutionPlan)
    except Exception:
        return False


def _load_agent(target: str) -> Any:
    """The agent named by ``MODULE:ATTR``, calling ``ATTR`` if it is a factory."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name.strip() or not attr.strip():
        raise CLIError(
            f"expected MODULE:ATTR (for example myapp.agents:build_agent), got {target!r}"
        )
    # Like `python -m`: modules next to where the user stands are importable.
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise CLIError(
                f"cannot import {module_name!r}: no module named {missing!r} "
                "(is the current directory, or the package's parent, on the path?)"
            ) from exc
        raise CLIError(f"importing {module_name!r} failed: {_describe_error(exc)}") from exc
    except (Exception, SystemExit) as exc:
        raise CLIError(f"importing {module_name!r} failed: {_describe_error(exc)}") from exc

    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CLIError(f"module {module_name!r} has no attribute {attr!r}") from None
        except Exception as exc:
            raise CLIError(f"reading {target} failed: {_describe_error(exc)}") from exc

    if _is_agent(obj):
        return obj
    if not callable(obj):
        raise CLIError(
            f"{target} is a {type(obj).__name__}, not a ReActAgent or a zero-argument "
            "function that returns one"
        )
    try:
        made = obj()
        if inspect.isawaitable(made):
            made = asyncio.run(_resolve(made))  # an async factory
    except (Exception, SystemExit) as exc:
        raise CLIError(f"calling {target}() failed: {_describe_error(exc)}") from exc
    if not _is_agent(made):
        raise CLIError(f"{target}() returned a {type(made).__name__}, not a ReActAgent")
    return made


async def _resolve(awaitable: Any) -> Any:
    return await awaitable


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
        shown = " → ".join(f"{type(m).__name__} ({m.order()})" for m in parts)
        table.add_row(point.value, point.kind, shown or "—")
    silent = [m for m in middlewares if not any(m in plan.participants(p) for p in ExtensionPoint)]
    if silent:
        names = ", ".join(type(m).__name__ for m in silent)
        table.caption = f"{table.caption}; registered but silent: {names}"
    return table


def _cmd_plan(args: argparse.Namespace) -> int:
    agent = _load_agent(args.target)
    if args.mermaid:
        sys.stdout.write(agent.plan.to_mermaid() + "\n")
        sys.stdout.flush()
        return EXIT_OK
    console = _console(args.no_color)
    console.print(_plan_table(agent))
    return EXIT_OK


# -- rx-agent demo ---------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    from ._demo import DEFAULT_DELAY, DEMO_QUESTION, build_demo_agent

    delay = DEFAULT_DELAY if args.delay is None else args.delay
    agent = build_demo_agent(delay)
    if args.json:
        return _demo_json(agent, DEMO_QUESTION)

    console = _console(args.no_color)
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
    renderer = _Renderer(console)
    outcome = _pump(agent.stream(DEMO_QUESTION), renderer.handle)
    if outcome.cancelled:
        return EXIT_INTERRUPTED
    if outcome.error is not None:
        raise CLIError(f"the demo failed: {_describe_error(outcome.error)}", EXIT_FAILURE)
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

    outcome = _pump(agent.stream(question), emit)
    if outcome.cancelled:
        return EXIT_INTERRUPTED
    if outcome.error is not None:
        raise CLIError(f"the demo failed: {_describe_error(outcome.error)}", EXIT_FAILURE)
    return EXIT_OK


# -- rx-agent chat ---------------------------------------------------------------------

_CHAT_HELP = (
    "Type a message and press Enter. Ctrl-C interrupts the reply; Ctrl-D or /exit quits. "
    "/new starts a fresh session; /help shows this."
)


def _chat_model(args: argparse.Namespace) -> tuple[ChatModel, str]:
    """The model to chat with and a line describing it."""
    if args.offline:
        from ._demo import DEFAULT_DELAY, DemoModel

        delay = DEFAULT_DELAY if args.delay is None else args.delay
        return DemoModel(delay), "the scripted demo model (offline)"
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = args.api_key or os.environ.get("OPENAI_API_KEY") or None
    if base_url is None and api_key is None:
        raise CLIError(
            "no model endpoint configured: set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL "
            "(and RX_AGENT_MODEL) for another OpenAI-compatible server, or pass "
            "--base-url/--api-key/--model; `rx-agent chat --offline` uses the scripted "
            "demo model instead"
        )
    name = args.model or os.environ.get("RX_AGENT_MODEL") or None
    if name is None:
        if base_url is not None:
            raise CLIError(
                f"no model name for {base_url}: pass --model NAME or set RX_AGENT_MODEL"
            )
        name = _DEFAULT_OPENAI_MODEL
    try:
        from .model.openai import OpenAIChatModel
    except ImportError as exc:
        raise CLIError(
            f"the chat command needs httpx ({_one_line(exc)}): pip install 'rx-agent[cli]'",
            EXIT_FAILURE,
        ) from exc
    try:
        model = OpenAIChatModel(name, base_url=base_url, api_key=api_key)
    except (TypeError, ValueError) as exc:
        raise CLIError(_one_line(exc)) from exc
    return model, f"{name} at {model.base_url}"


def _read_line(prompt: str) -> str | None:
    """One line of input; ``None`` at end of input (Ctrl-D)."""
    try:
        return input(prompt)
    except EOFError:
        return None


def _cmd_chat(args: argparse.Namespace) -> int:
    model, described = _chat_model(args)
    console = _console(args.no_color)
    from ._demo import build_chat_agent

    agent = build_chat_agent(model, args.system) if args.system else build_chat_agent(model)
    if sys.stdin.isatty():
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())

    session = args.session
    fresh = 0
    console.print(f"[bold]rx-agent chat[/] · {described} · session {session!r}", soft_wrap=True)
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
        if text == "/new":
            fresh += 1
            session = f"{args.session}-{fresh}"
            console.print(f"new session {session!r}", style="dim", markup=False)
            continue

        ctx = RuntimeContext(session_id=session)
        renderer = _Renderer(console, shown_prompts)
        stop = functools.partial(agent.interrupt, ctx)
        outcome = _pump(agent.stream(text, ctx), renderer.handle, interrupt=stop)
        if outcome.cancelled:
            renderer.note("(reply cancelled)", "yellow")
        elif outcome.error is not None:
            message = _describe_error(outcome.error)
            if not answered:
                # Before any reply worked, an error almost always means the endpoint,
                # key or model name is wrong: retrying by hand will not help.
                raise CLIError(message, EXIT_FAILURE)
            renderer.note("")
            _error(message)
        else:
            answered = True
