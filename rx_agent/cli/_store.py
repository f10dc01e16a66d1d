"""Where ``rx-agent chat --session`` and ``rx-agent sessions`` keep sessions.

The default is one SQLite file in the user's data directory
(``$XDG_DATA_HOME/rx-agent/sessions.db``, else ``~/.local/share/rx-agent/sessions.db``;
``%LOCALAPPDATA%\\rx-agent\\sessions.db`` on Windows). ``$RX_AGENT_STORE`` replaces
it with any :func:`~rx_agent.session.session_store_from_url` URL, and ``--store URL``
replaces both.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..session import ANONYMOUS_USER, SessionCorruptError, SessionKey
from ..session._base import redact
from ..session._url import local_path_of, sqlite_url
from ._base import EXIT_FAILURE, EXIT_USAGE, CLIError, describe_error, one_line

if TYPE_CHECKING:
    from ..session import SessionBackend

    AnyStore = SessionBackend

__all__ = [
    "STORE_ENV",
    "StoreChoice",
    "choose_store",
    "close_store",
    "default_store_help",
    "key_for",
    "open_store",
    "show_user",
    "store_errors",
]

STORE_ENV = "RX_AGENT_STORE"


def _default_path() -> Path:
    """The default session database (not created here)."""
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "rx-agent" / "sessions.db"
    xdg = os.environ.get("XDG_DATA_HOME", "")
    # The XDG spec says to ignore a relative value.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "rx-agent" / "sessions.db"


def default_store_help() -> str:
    """The default, as ``--help`` shows it: the rule and, when known, the path here."""
    rule = (f"${STORE_ENV} if set, else the SQLite file $XDG_DATA_HOME/rx-agent/sessions.db "
            "(XDG_DATA_HOME defaults to ~/.local/share)")
    try:
        if os.environ.get(STORE_ENV):
            return f"{rule}; here: {os.environ[STORE_ENV]}"
        return f"{rule}; here: {_default_path()}"
    except RuntimeError:  # no home directory to be found
        return rule


@dataclass(frozen=True, slots=True)
class StoreChoice:
    """The store a command uses and where that choice came from (for messages)."""

    url: str
    source: str  # "--store", "$RX_AGENT_STORE" or "the default"
    path: Path | None = None  # the local file (SQLite's), when the URL names one

    @property
    def shown(self) -> str:
        """The URL without a password."""
        return redact(self.url)

    @property
    def explicit(self) -> bool:
        return self.source != "the default"


def choose_store(option: str | None) -> StoreChoice:
    """``--store``, else ``$RX_AGENT_STORE``, else the default SQLite file."""
    if option is not None:
        url, source = option, "--store"
    elif os.environ.get(STORE_ENV):
        url, source = os.environ[STORE_ENV], f"${STORE_ENV}"
    else:
        try:
            path = _default_path()
        except RuntimeError as exc:
            raise CLIError(f"no default session store: {one_line(exc)}; pass --store URL or "
                           f"set {STORE_ENV}") from None
        return StoreChoice(sqlite_url(str(path)), "the default", path)
    return StoreChoice(url, source, _local_path(url))


def _local_path(url: str) -> Path | None:
    """The file a well-formed URL names (``sqlite:///``, or a registered scheme's; relative
    to the working directory); ``None`` for other URLs and for malformed ones, which the
    store's parser reports."""
    try:
        path = local_path_of(url)
    except ImportError:  # a plugin that fails to load: opening the store reports it
        return None
    return None if path is None else Path(path).expanduser().absolute()


def open_store(choice: StoreChoice, *, create: bool) -> AnyStore | None:
    """The store ``choice`` names; ``None`` when ``create`` is false and its SQLite file
    does not exist yet (reading commands never create a database)."""
    if not create and choice.path is not None and not choice.path.exists():
        if choice.explicit:
            raise CLIError(f"no session database at {choice.path} ({choice.source} "
                           f"{choice.shown}); `rx-agent chat --store URL` creates one")
        return None
    from ..session import SqliteSessionStore, session_store_from_url

    try:
        if choice.path is not None and not choice.explicit:
            # The documented default location: its folders are ours to make, all of them
            # (~/.local/share may not exist yet). A URL the user gave creates at most the
            # file's own folder (SqliteSessionStore).
            choice.path.parent.mkdir(parents=True, exist_ok=True)
            return SqliteSessionStore(choice.path)
        return session_store_from_url(choice.url)
    except ImportError as exc:  # the redis extra
        raise CLIError(one_line(exc), EXIT_FAILURE) from exc
    except (ValueError, TypeError) as exc:
        raise CLIError(f"bad session store ({choice.source}): {one_line(exc)}",
                       EXIT_USAGE) from exc
    except OSError as exc:  # a directory that cannot be created, say
        raise CLIError(f"cannot open the session store {choice.shown}: {describe_error(exc)}",
                       EXIT_FAILURE) from exc


def close_store(store: AnyStore | None) -> None:
    close = getattr(store, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):  # leaving: nothing useful to report
            close()


@contextlib.contextmanager
def store_errors(choice: StoreChoice) -> Iterator[None]:
    """Store failures as one-line errors: a corrupt record, an unreachable server."""
    try:
        yield
    except CLIError:
        raise
    except SessionCorruptError as exc:
        raise CLIError(one_line(exc), EXIT_FAILURE) from exc
    except Exception as exc:
        raise CLIError(f"the session store {choice.shown} failed: {describe_error(exc)}",
                       EXIT_FAILURE) from exc


def show_user(user_id: str) -> str:
    return "(anonymous)" if user_id == ANONYMOUS_USER else user_id


def key_for(user: str | None, session: str) -> SessionKey:
    return SessionKey(user if user is not None else ANONYMOUS_USER, session)
