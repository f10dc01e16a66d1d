"""``session_store_from_url``: a store from one configuration string.

* ``memory://``: an :class:`InMemorySessionStore` (one process);
* ``sqlite:///sessions.db``: a :class:`SqliteSessionStore` at a path relative to the
  working directory at the time of the call;
* ``sqlite:////var/lib/app/sessions.db``: the same at an absolute path;
* ``redis://host:6379/0`` (``rediss://`` for TLS): a :class:`RedisSessionStore`;
  ``?prefix=name`` sets its key prefix, other query options go to redis-py.

A malformed URL is a ``ValueError`` at parse time, before anything is opened or
created; where the mistake is a common one (``sqlite:/x.db``, a bare file name) the
message suggests a URL that parses.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from ._memory import InMemorySessionStore
from ._redis import RedisSessionStore, redact
from ._sqlite import SqliteSessionStore

__all__ = ["session_store_from_url", "sqlite_url", "sqlite_url_path"]

_FORMS = ("memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db or "
          "redis://host:port/db")
_SCHEMES = ("memory", "sqlite", "redis", "rediss")
_FILE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


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
        raise ValueError(f"no database file in {shown!r}; use {_FORMS}")
    if path == ":memory:":
        raise ValueError("sqlite:///:memory: is private to one connection: use memory://")
    return path


def _suggestion(url: str) -> str:
    """`` (write ...)`` for a URL without ``://``: a known scheme with one colon or one
    slash (``sqlite:/x.db``, ``redis:host``), or a bare database file name."""
    match = re.fullmatch(r"([A-Za-z]+):(/*)(.*)", url, flags=re.DOTALL)
    if match is not None and match.group(1).lower() in _SCHEMES:
        scheme, slashes, tail = match.group(1).lower(), match.group(2), match.group(3)
        if scheme == "memory":
            return " (write memory://)"
        if scheme == "sqlite" and tail:
            relative = sqlite_url(unquote(tail))
            if slashes:  # sqlite:/x.db: which of the two was meant cannot be told
                return (f" (write {relative} for {unquote(tail)} in the working directory, "
                        f"or {sqlite_url('/' + unquote(tail))} for /{unquote(tail)})")
            return f" (write {relative})"
        if scheme.startswith("redis") and tail:
            return f" (write {scheme}://{tail})"
        return ""
    if url.lower().endswith(_FILE_SUFFIXES):
        return f" (a file? write {sqlite_url(url)})"
    return ""


def session_store_from_url(
    url: str,
) -> InMemorySessionStore | SqliteSessionStore | RedisSessionStore:
    """The store ``url`` names (see the module docstring); ``ValueError`` if none."""
    if not isinstance(url, str):
        raise TypeError(f"a session store URL is a str, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    shown = redact(url)
    if not sep:
        raise ValueError(f"not a session store URL: {shown!r}{_suggestion(url)}; use {_FORMS}")
    if scheme == "memory":
        if rest:
            raise ValueError(f"memory:// takes nothing after it, got {shown!r}")
        return InMemorySessionStore()
    if scheme == "sqlite":
        return SqliteSessionStore(_sqlite_path(rest, url))
    if scheme in ("redis", "rediss"):
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        prefixes = [v for k, v in query if k == "prefix"]
        if len(prefixes) > 1:
            raise ValueError(f"more than one prefix= in {shown!r}")
        rebuilt = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query
                                                             if k != "prefix"])))
        if prefixes:
            return RedisSessionStore(rebuilt, prefixes[0])
        return RedisSessionStore(rebuilt)
    raise ValueError(f"unknown session store URL scheme {scheme!r} in {shown!r}; use {_FORMS}")
