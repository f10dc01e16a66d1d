"""Store URLs: a registry of schemes, and ``session_store_from_url`` over it.

Built in:

* ``memory://``: an :class:`InMemorySessionStore` (one process);
* ``sqlite:///sessions.db``: a :class:`SqliteSessionStore` at a path relative to the
  working directory at the time of the call;
* ``sqlite:////var/lib/app/sessions.db``: the same at an absolute path;
* ``redis://host:6379/0`` (``rediss://`` for TLS): a :class:`RedisSessionStore`;
  ``?prefix=name`` sets its key prefix, other query options go to redis-py;
* ``postgresql://user@host:5432/db`` (or ``postgres://``): a
  :class:`PostgresSessionStore`; ``?prefix=name`` sets its table prefix, other query
  options go to libpq.

:func:`register_store_scheme` adds a scheme (``mysql://``, say): the same
function, the CLI's ``--store`` and ``$RX_AGENT_STORE``, and ``rx-agent serve
--store`` then accept it. A package can register on install, without an import in
the user's code: an entry point in the ``rx_agent.session_stores`` group naming a
module (or object) whose import registers it is loaded the first time an unknown
scheme is asked for, or the schemes are listed.

A malformed URL is a ``ValueError`` at parse time, before anything is opened or
created; where the mistake is a common one (``sqlite:/x.db``, a bare file name) the
message suggests a URL that parses.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from ._base import redact

if TYPE_CHECKING:
    from ._backend import SessionBackend

__all__ = [
    "ENTRY_POINTS",
    "StoreScheme",
    "local_path_of",
    "register_store_scheme",
    "session_store_from_url",
    "sqlite_url",
    "sqlite_url_path",
    "store_scheme",
    "store_url_forms",
]

ENTRY_POINTS = "rx_agent.session_stores"
_FILE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")


@dataclass(frozen=True, slots=True)
class StoreScheme:
    """One registered URL scheme (see :func:`register_store_scheme`)."""

    name: str
    factory: Callable[[str], SessionBackend]
    forms: tuple[str, ...]
    local_path: Callable[[str], str | None] | None = None
    suggest: Callable[[str, str], str] | None = None


_registry: dict[str, StoreScheme] = {}
_order: list[str] = []  # registration order, for the list of forms
_lock = threading.Lock()
_plugins_loaded = False


def register_store_scheme(
    scheme: str | Iterable[str],
    factory: Callable[[str], SessionBackend],
    *,
    forms: Iterable[str] = (),
    local_path: Callable[[str], str | None] | None = None,
    suggest: Callable[[str, str], str] | None = None,
    replace: bool = False,
) -> None:
    """Make ``session_store_from_url`` (and the CLI) open ``scheme://...`` URLs.

    ``factory(url)`` gets the whole URL and returns the store (a
    :class:`~rx_agent.session.SessionBackend`), or raises ``ValueError`` saying what
    is wrong with the URL; it should not connect yet where it can help it. ``scheme``
    may be several names (``("redis", "rediss")``). ``forms`` are example URLs shown
    in error messages and ``--help`` (default ``scheme://...``). ``local_path(url)``:
    the local file the URL names, if any (the CLI's reading commands then refuse a
    missing file rather than create it). ``suggest(slashes, rest)``: a near-miss hint
    for ``scheme:rest`` written without ``//`` (`` (write ...)``, or ``""``).
    Registering a taken scheme is a ``ValueError`` unless ``replace=True``.
    """
    names = [scheme] if isinstance(scheme, str) else list(scheme)
    if not names:
        raise ValueError("register_store_scheme() needs at least one scheme name")
    for name in names:
        if not isinstance(name, str) or _SCHEME.fullmatch(name) is None:
            raise ValueError(f"a URL scheme is lowercase letters, digits, '+', '-' or '.', "
                             f"starting with a letter (no '://'), got {name!r}")
    if not callable(factory):
        raise TypeError(f"factory must be callable (url -> store), got {type(factory).__name__}")
    shown = tuple(forms) or (f"{names[0]}://...",)
    with _lock:
        taken = [n for n in names if n in _registry]
        if taken and not replace:
            raise ValueError(f"the session store URL scheme {taken[0]!r}:// is registered "
                             f"already (pass replace=True to replace it)")
        for i, name in enumerate(names):
            _registry[name] = StoreScheme(name, factory, shown if i == 0 else (),
                                          local_path, suggest)
            if name not in _order:
                _order.append(name)


def _load_plugins() -> None:
    """Import the modules of ``rx_agent.session_stores`` entry points (once)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINTS):
        try:
            point.load()
        except Exception as exc:
            raise ImportError(f"the session store plugin {point.name!r} ({point.value}) "
                              f"failed to load: {exc}") from exc


def store_scheme(name: str) -> StoreScheme | None:
    """The registered scheme ``name`` (lowercase), loading plugins on a miss."""
    found = _registry.get(name)
    if found is None and not _plugins_loaded:
        _load_plugins()
        found = _registry.get(name)
    return found


def store_url_forms(plugins: bool = True) -> str:
    """The registered forms, for messages: ``"memory://, sqlite:///... or redis://..."``;
    ``plugins=False`` lists only the schemes registered so far (no entry point scan:
    ``--help`` text)."""
    if plugins:
        _load_plugins()
    forms = [f for name in _order for f in _registry[name].forms]
    return ", ".join(forms[:-1]) + " or " + forms[-1] if len(forms) > 1 else "".join(forms)


def local_path_of(url: str) -> str | None:
    """The local file ``url`` names (as written), when its scheme has one; else ``None``."""
    scheme, sep, _rest = url.partition("://")
    entry = store_scheme(scheme.lower()) if sep else None
    if entry is None or entry.local_path is None:
        return None
    return entry.local_path(url)


def session_store_from_url(url: str) -> SessionBackend:
    """The store ``url`` names (see the module docstring); ``ValueError`` if none."""
    if not isinstance(url, str):
        raise TypeError(f"a session store URL is a str, got {type(url).__name__}")
    scheme, sep, _rest = url.partition("://")
    shown = redact(url)
    if not sep:
        raise ValueError(f"not a session store URL: {shown!r}{_suggestion(url)}; use "
                         f"{store_url_forms()}")
    entry = store_scheme(scheme.lower())
    if entry is None:
        raise ValueError(f"unknown session store URL scheme {scheme.lower()!r} in {shown!r}; "
                         f"use {store_url_forms()}")
    store = entry.factory(url)
    from ._backend import SessionBackend

    if not isinstance(store, SessionBackend):
        raise TypeError(f"the factory registered for {entry.name}:// returned "
                        f"{type(store).__name__}, not a session store (a SessionBackend)")
    return store


def _suggestion(url: str) -> str:
    """`` (write ...)`` for a URL without ``://``: a known scheme with one colon or one
    slash (``sqlite:/x.db``, ``redis:host``), or a bare database file name."""
    match = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*):(/*)(.*)", url, flags=re.DOTALL)
    entry = store_scheme(match.group(1).lower()) if match is not None else None
    if match is not None and entry is not None:
        slashes, tail = match.group(2), match.group(3)
        if entry.suggest is not None:
            return entry.suggest(slashes, tail)
        return f" (write {entry.name}://{tail})" if tail else ""
    if url.lower().endswith(_FILE_SUFFIXES):
        return f" (a file? write {sqlite_url(url)})"
    return ""


# -- memory:// ---------------------------------------------------------------------------


def _memory(url: str) -> SessionBackend:
    if url.partition("://")[2]:
        raise ValueError(f"memory:// takes nothing after it, got {redact(url)!r}")
    from ._memory import InMemorySessionStore

    return InMemorySessionStore()


# -- sqlite:/// --------------------------------------------------------------------------


def sqlite_url(path: str) -> str:
    """The ``sqlite:///`` URL of ``path`` (relative or absolute), quoted as needed."""
    return "sqlite:///" + quote(path, safe="/\\:~._-+@")


def sqlite_url_path(url: str) -> str | None:
    """The file a well-formed ``sqlite:///`` URL names (as written: relative paths are
    relative to the working directory); ``None`` for any other URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "sqlite":
        return None
    try:
        return _sqlite_path(rest, url)
    except ValueError:
        return None


def _sqlite_path(rest: str, url: str) -> str:
    """The file of ``sqlite://`` + ``rest``, or a ``ValueError`` saying what is wrong."""
    shown = redact(url)
    if "?" in rest or "#" in rest:
        raise ValueError(f"sqlite URLs take no query or fragment, got {shown!r}")
    if not rest.startswith("/"):
        # sqlite://x.db: the file went where a host would be.
        raise ValueError(f"sqlite URLs have no host: got {shown!r}; write "
                         f"{sqlite_url(unquote(rest))} (relative to the working directory) "
                         f"or {sqlite_url('/' + unquote(rest))} (absolute)")
    path = unquote(rest[1:])
    if not path or path.endswith("/"):
        raise ValueError(f"no database file in {shown!r}; use {store_url_forms()}")
    if path == ":memory:":
        raise ValueError("sqlite:///:memory: is private to one connection: use memory://")
    return path


def _sqlite(url: str) -> SessionBackend:
    from ._sqlite import SqliteSessionStore

    return SqliteSessionStore(_sqlite_path(url.partition("://")[2], url))


def _sqlite_suggestion(slashes: str, tail: str) -> str:
    if not tail:
        return ""
    relative = sqlite_url(unquote(tail))
    if slashes:  # sqlite:/x.db: which of the two was meant cannot be told
        return (f" (write {relative} for {unquote(tail)} in the working directory, "
                f"or {sqlite_url('/' + unquote(tail))} for /{unquote(tail)})")
    return f" (write {relative})"


# -- redis:// ----------------------------------------------------------------------------


def _redis(url: str) -> SessionBackend:
    from ._redis import RedisSessionStore

    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [v for k, v in query if k == "prefix"]
    if len(prefixes) > 1:
        raise ValueError(f"more than one prefix= in {redact(url)!r}")
    rebuilt = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query
                                                         if k != "prefix"])))
    options: dict[str, Any] = {"prefix": prefixes[0]} if prefixes else {}
    return RedisSessionStore(rebuilt, **options)


def _postgres(url: str) -> SessionBackend:
    from ._postgres import PostgresSessionStore

    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [v for k, v in query if k == "prefix"]
    if len(prefixes) > 1:
        raise ValueError(f"more than one prefix= in {redact(url)!r}")
    rebuilt = urlunsplit(parts._replace(scheme="postgresql", query=urlencode(
        [(k, v) for k, v in query if k != "prefix"])))
    options: dict[str, Any] = {"prefix": prefixes[0]} if prefixes else {}
    return PostgresSessionStore(rebuilt, **options)


register_store_scheme("memory", _memory, forms=("memory://",),
                      suggest=lambda slashes, tail: " (write memory://)")
register_store_scheme("sqlite", _sqlite,
                      forms=("sqlite:///relative/path.db", "sqlite:////absolute/path.db"),
                      local_path=sqlite_url_path, suggest=_sqlite_suggestion)
register_store_scheme(("redis", "rediss"), _redis, forms=("redis://host:port/db[?prefix=NAME]",))
register_store_scheme(("postgresql", "postgres"), _postgres,
                      forms=("postgresql://user@host:port/db[?prefix=NAME]",))
