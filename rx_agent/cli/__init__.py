"""The ``rx-agent`` command line: ``demo``, ``chat`` and ``plan``.

``main(argv)`` returns the exit status instead of calling ``sys.exit`` so that it can
be called from tests and from other programs. Errors the user can fix (a bad
``MODULE:ATTR``, no endpoint configured, a wrong key) are reported as one line,
``rx-agent: error: ...``, on stderr; ``--traceback`` shows the full story.

``rich`` (the ``cli`` extra) renders the human output. It is imported only by the
commands that draw something, so ``demo --json`` and ``plan --mermaid`` work without it.

Layout: ``_args`` builds the parser, ``_commands`` holds the three commands, ``_render``
draws an event stream, ``_pump`` brings events to the main thread, ``_base`` has the
exit statuses, the one-line error and the console; ``_target`` reads the ``MODULE:ATTR``
of ``plan`` and ``serve``, ``_store`` picks the session store, ``_offline`` is the model
of ``chat --offline``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Callable, Sequence

from ._args import build_parser
from ._base import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_SIGPIPE,
    EXIT_USAGE,
    CLIError,
    describe_error,
    error,
)

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``rx-agent`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    _tolerate_unencodable_output()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    status = _run(args)
    if argv is None and getattr(args, "hard_exit", False):
        # The temporalio SDK's threads can crash CPython's teardown after a client was
        # made (SIGABRT in PyGILState_Release, the SDK's issue #300): a command that made
        # one ends the process itself, its output flushed.
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)
    return status


def _run(args: argparse.Namespace) -> int:
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except CLIError as exc:
        if args.traceback:
            raise
        error(str(exc))
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
        error(f"{describe_error(exc)} (run with --traceback for details)")
        return EXIT_FAILURE


def _tolerate_unencodable_output() -> None:
    """Replace what the output encoding cannot show (°, box drawing on cp1252)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors="replace")
