"""``session_store_from_url``: a store from one configuration string.

* ``memory://``: an :class:`InMemorySessionStore` (one process);
* ``sqlite:///sessions.db``: a :class:`SqliteSessionStore` at a path relative to the
  working directory at the time of the call;
* ``sqlite:////var/lib/app/sessions.db``: the same at an absolute path;
* ``redis://host:6379/0`` (``rediss://`` for TLS): a :class:`RedisSessionStore`;
  ``?prefix=name`` sets its key prefix, other query options go to redis-py.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ._memory import InMemorySessionStore
from ._redis import RedisSessionStore, redact
from ._sqlite import SqliteSessionStore

__all__ = ["session_store_from_url"]

_FORMS = ("memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db or "
          "redis://host:port/db")


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
        hint = f" (a file? write sqlite:///{url})" if url.endswith((".db", ".sqlite")) else ""
        raise ValueError(f"not a session store URL: {shown!r}{hint}; use {_FORMS}")
    if scheme == "memory":
        if rest:
            raise ValueError(f"memory:// takes nothing after it, got {shown!r}")
        return InMemorySessionStore()
    if scheme == "sqlite":
        if "?" in rest or "#" in rest:
            raise ValueError(f"sqlite URLs take no query or fragment, got {shown!r}")
        if not rest.startswith("/"):
            raise ValueError(f"sqlite URLs have no host: got {shown!r}; write "
                             "sqlite:///relative.db or sqlite:////absolute/path.db")
        path = unquote(rest[1:])
        if not path or path.endswith("/"):
            raise ValueError(f"no database file in {shown!r}; use {_FORMS}")
        if path == ":memory:":
            raise ValueError("sqlite:///:memory: is private to one connection: use memory://")
        return SqliteSessionStore(path)
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
