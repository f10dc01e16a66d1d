"""The session-store conformance suite: the tests the built-in stores pass, for yours.

Subclass one of the two classes in a test module (a name starting with ``Test``, so
pytest collects it) and give it an ``opener`` fixture: a zero-argument callable that
opens the store under test. Every test method is inherited::

    import functools

    import pytest

    from rx_agent.testing.store_contract import DurableStoreContract
    from myapp.store import PostgresSessionStore


    class TestPostgresStore(DurableStoreContract):
        @pytest.fixture
        def opener(self, postgres_url):  # your own fixture, e.g. a throwaway database
            return functools.partial(PostgresSessionStore, postgres_url)

:class:`StoreContract`
    Every store: state and versions, compare-and-set, delete, listing, the coroutine
    twins, the version peek and ``load_since``, conflict policies, leases (one writer,
    first come first served, expiry, renewal, owner-only release, cancellation) and
    clear errors on bad input. It opens one store object per test.
:class:`DurableStoreContract`
    A store whose sessions other store objects and processes share (``durable``): all
    of the above, plus loads that are copies, a second store object and an agent
    sharing the sessions, and real ``spawn`` processes that lose and duplicate nothing
    under leases and compare-and-set, and fence a writer whose lease was taken. The
    opener must be picklable (``functools.partial``, a module-level function) and
    each call must open the *same* storage (not a fresh temporary one).

:class:`JournalContract`
    A store's run journal (``store.journal()``): consecutive numbers per session,
    reads from a point, locating an SSE id, retention by count and by age with
    :class:`~rx_agent.session.JournalExpiredError` past it, and
    ``subscribe_durable_events`` live and from a point. ``trim_slack`` (0) is how many
    entries past ``max_events`` it may keep (a journal that drops whole batches).
:class:`SharedJournalContract`
    A journal other store objects share: all of the above, plus a reader on a second
    store object following a writer's appends live. Mix either into the store's class
    (``class TestMyStore(DurableStoreContract, SharedJournalContract)``) or give it a
    class of its own.

The tests open a fresh store per test from ``opener`` and close it after (``close``),
and run coroutines on a fresh event loop with ``asyncio.run`` (closing that loop's
clients with ``aclose``), so no async pytest plugin is needed. Each test expects an
empty store: let the opener give a new database, folder or key prefix per test (a
``tmp_path`` folder, a random Redis prefix). ``SharingContract.processes`` (4),
``sessions`` and ``saves`` size the cross-process test; override them as class
attributes.
"""

from __future__ import annotations

try:
    import pytest  # noqa: F401  (the suite's fixtures and assertions)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError("rx_agent.testing.store_contract is a pytest suite: pip install pytest"
                      ) from exc

from ._contract_durable import SharingContract
from ._contract_journal import JournalContract, SharedJournalContract
from ._contract_leases import LeaseContract
from ._contract_state import KEY, StateContract, arun, round_msgs, state_with, texts

__all__ = [
    "KEY",
    "DurableStoreContract",
    "JournalContract",
    "SharedJournalContract",
    "StoreContract",
    "arun",
    "round_msgs",
    "state_with",
    "texts",
]


class StoreContract(StateContract, LeaseContract):
    """Every store's contract (see the module docstring)."""


class DurableStoreContract(StoreContract, SharingContract):
    """A durable store's contract: :class:`StoreContract` plus sharing across store
    objects and processes (see the module docstring)."""
