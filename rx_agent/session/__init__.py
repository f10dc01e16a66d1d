"""Session stores: where an agent keeps each session's :class:`~rx_agent.AgentState`.

* :class:`InMemorySessionStore`: the default; live objects in a dict, one process.
* :class:`SqliteSessionStore`: one SQLite file (WAL); several processes on one host.
* :class:`RedisSessionStore`: Redis (the ``redis`` extra); many processes and machines.
* :class:`PostgresSessionStore`: PostgreSQL (the ``postgres`` extra); the same.
* :func:`session_store_from_url`: one of those from ``memory://``, ``sqlite:///x.db``
  or ``redis://...``, or a store of a scheme added by :func:`register_store_scheme`.
* :meth:`SessionBackend.journal` / :func:`subscribe_durable_events`: the run journal,
  each call's events per session in the same backend (:mod:`rx_agent.session._journal`).
* :class:`SessionBackend`: the kit every one of them is built on; a new backend
  implements a few primitives and gets the whole API (``_backend``), and
  ``rx_agent.testing.store_contract`` is the suite it passes.

Every built-in store offers the same API, twice: synchronous methods
(:class:`VersionedSessionStore`) and ``a``-prefixed coroutines that never block the
event loop (:class:`AsyncSessionStore`): ``load``, ``save``, ``delete``,
``list_sessions``, ``load_versioned`` / ``save_if_version`` (versioned compare-and-set:
:class:`ConcurrentSessionModificationError`), and leases (``acquire_lease`` /
``renew_lease`` / ``release_lease``: one writer per session across processes;
:class:`SessionBusyError`). A store with only today's ``load``/``save``
(:class:`SessionStore`, sync or returning awaitables) keeps working. Details:
:mod:`rx_agent.session._base` (contracts), ``_delta`` (what a save writes),
``_schema`` (the stored JSON and its migrations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _publish
from ._backend import SessionBackend, SessionChanges
from ._base import (
    ANONYMOUS_USER,
    AsyncSessionStore,
    ConcurrentSessionModificationError,
    ConflictPolicy,
    Lease,
    SessionBusyError,
    SessionCorruptError,
    SessionKey,
    SessionStore,
    VersionedSessionStore,
    merge_append,
)
from ._delta import mark_changed
from ._lease import LeaseAttempt, LeaseRecord
from ._memory import InMemorySessionStore

if TYPE_CHECKING:
    from ._journal import (
        JournalEntry,
        JournalExpiredError,
        RunJournal,
        subscribe_durable_events,
    )
    from ._journal_writer import JournalWriter
    from ._policy import SaveOutcome, asave_with_policy, save_with_policy
    from ._postgres import PostgresSessionStore
    from ._redis import RedisSessionStore
    from ._schema import SCHEMA_VERSION, decode_state, encode_state
    from ._sqlite import SqliteSessionStore
    from ._url import register_store_scheme, session_store_from_url

# The durable stores load on first use: ``import rx_agent`` stays as cheap as before
# (no sqlite3, no JSON schema machinery) for the many programs that keep the default.
_LAZY = {
    "SqliteSessionStore": "._sqlite",
    "RedisSessionStore": "._redis",
    "PostgresSessionStore": "._postgres",
    "session_store_from_url": "._url",
    "register_store_scheme": "._url",
    "SCHEMA_VERSION": "._schema",
    "decode_state": "._schema",
    "encode_state": "._schema",
    "JournalEntry": "._journal",
    "JournalExpiredError": "._journal",
    "JournalWriter": "._journal_writer",
    "RunJournal": "._journal",
    "subscribe_durable_events": "._journal",
    "SaveOutcome": "._policy",
    "asave_with_policy": "._policy",
    "save_with_policy": "._policy",
}

__all__ = [
    "ANONYMOUS_USER",
    "SCHEMA_VERSION",
    "AsyncSessionStore",
    "ConcurrentSessionModificationError",
    "ConflictPolicy",
    "InMemorySessionStore",
    "JournalEntry",
    "JournalExpiredError",
    "JournalWriter",
    "Lease",
    "LeaseAttempt",
    "LeaseRecord",
    "PostgresSessionStore",
    "RedisSessionStore",
    "RunJournal",
    "SaveOutcome",
    "SessionBackend",
    "SessionBusyError",
    "SessionChanges",
    "SessionCorruptError",
    "SessionKey",
    "SessionStore",
    "SqliteSessionStore",
    "VersionedSessionStore",
    "asave_with_policy",
    "decode_state",
    "encode_state",
    "mark_changed",
    "merge_append",
    "register_store_scheme",
    "save_with_policy",
    "session_store_from_url",
    "subscribe_durable_events",
]


__getattr__, __dir__ = _publish.lazy_names(globals(), _LAZY, __all__)
_publish.publish_all(globals(), __all__)
