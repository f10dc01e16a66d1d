"""What every command shares: exit statuses, the one-line error and the console."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ..errors import RxAgentError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "DEFAULT_OPENAI_MODEL",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SIGPIPE",
    "EXIT_USAGE",
    "PROG",
    "CLIError",
    "describe_error",
    "error",
    "make_console",
    "one_line",
]

PROG = "rx-agent"

# Exit statuses. 2 is what argparse uses for a bad command line; bad input found
# later (a module that does not import, no endpoint) is the same kind of mistake.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SIGPIPE = 141  # what a C tool killed by SIGPIPE reports (128 + 13)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"


class CLIError(RxAgentError):
    """An error reported as one line on stderr, with an exit status."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def describe_error(exc: BaseException) -> str:
    """``Type: message`` for surprises, just the message for our own typed errors."""
    from ..model.errors import ModelError

    if isinstance(exc, ModelError):
        return one_line(exc)
    return f"{type(exc).__name__}: {one_line(exc)}"


def error(message: str) -> None:
    # One line, always: a message that carries newlines would look like a traceback.
    sys.stderr.write(f"{PROG}: error: {' '.join(message.split())}\n")
    sys.stderr.flush()


def make_console(no_color: bool) -> Console:
    try:
        from rich.console import Console
    except ImportError:
        raise CLIError(
            "this command needs rich: pip install -e '.[cli]' (from a checkout) or "
            "pip install rich",
            EXIT_FAILURE,
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
