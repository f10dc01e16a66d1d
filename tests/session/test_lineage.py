"""A save trusts a History's lineage only while it holds: every change but an append
breaks it, a hand-over gives it to one list alone, and the snapshots' shared id lists
never show one save's ids to another."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from rx_agent import Msg
from rx_agent._history import History
from rx_agent.session._cache import detach
from rx_agent.session._delta import compute_delta, snapshot_of

from .conftest import KEY, round_msgs, state_with, texts


def _history(n: int) -> History:
    return History(Msg("user", f"m{i}") for i in range(n))


MUTATIONS: list[tuple[str, Callable[[History], Any]]] = [
    ("setitem", lambda h: h.__setitem__(0, Msg("user", "new"))),
    ("slice assignment", lambda h: h.__setitem__(slice(0, 1), [Msg("user", "new")])),
    ("del", lambda h: h.__delitem__(0)),
    ("insert", lambda h: h.insert(0, Msg("user", "new"))),
    ("pop", lambda h: h.pop(0)),
    ("remove", lambda h: h.remove(h[0])),
    ("clear", lambda h: h.clear()),
    ("sort", lambda h: h.sort(key=lambda m: m.text or "")),
    ("reverse", lambda h: h.reverse()),
    ("*=", lambda h: h.__imul__(1)),
]


@pytest.mark.parametrize(("name", "change"), MUTATIONS, ids=[n for n, _ in MUTATIONS])
def test_every_change_but_an_append_starts_a_new_lineage(
        name: str, change: Callable[[History], Any]) -> None:
    h = _history(3)
    token = h.lineage
    change(h)
    assert h.lineage is not token, name


def test_appends_keep_the_lineage() -> None:
    h = _history(3)
    token = h.lineage
    h.append(Msg("user", "a"))
    h.extend([Msg("user", "b")])
    h += [Msg("user", "c")]
    assert h.lineage is token and len(h) == 6


def test_a_copy_or_a_pickle_starts_its_own_lineage_and_a_handover_moves_it() -> None:
    h = _history(2)
    token = h.lineage
    for other in (copy.copy(h), copy.deepcopy(h), pickle.loads(pickle.dumps(h)), History(h)):
        assert other.lineage is not token
        assert [m.text for m in other] == [m.text for m in h]
    heir = h.handover()
    assert heir.lineage is token and h.lineage is not token
    assert list(heir) == list(h)


def test_a_save_after_a_change_without_an_append_writes_it(durable: Any) -> None:
    # A replaced first message is far outside the compared tail: only a broken
    # lineage makes the save look for it.
    state = state_with(50)
    state.context = History(state.context)
    durable.save(KEY, state)
    state.context[0] = Msg("user", "replaced")
    durable.save(KEY, state)
    assert texts(durable.load(KEY))[0] == "replaced"
    del state.context[1]
    durable.save(KEY, state)
    assert texts(durable.load(KEY)) == texts(state)


def test_the_list_handed_over_and_the_one_left_never_pass_for_each_other(durable: Any) -> None:
    state = state_with(50)
    state.context = History(state.context)
    durable.save(KEY, state)
    cached = detach(state)  # what a worker's session cache keeps of the saved call
    cached.context.extend(round_msgs(900))
    durable.save(KEY, cached)
    assert texts(durable.load(KEY)) == texts(cached)
    # The call's own state, edited after the call, saved again: the same length as
    # the cached copy's save, different messages. A shared lineage would write nothing.
    state.context.extend(round_msgs(901))
    durable.save(KEY, state)
    assert texts(durable.load(KEY)) == texts(state)


def test_two_saves_from_one_snapshot_keep_their_own_ids() -> None:
    base = [Msg("user", f"m{i}") for i in range(6)]
    stored = compute_delta(None, base, frozenset()).snapshot(1)
    a, b = Msg("user", "a"), Msg("user", "b")
    first = compute_delta(stored, [*base, a], frozenset())
    second = compute_delta(stored, [*base, b], frozenset())
    assert first.start == second.start == 6
    assert first.ids[:first.n] == [m.id for m in (*base, a)]
    assert second.ids[:second.n] == [m.id for m in (*base, b)]
    assert stored.ids[:stored.n] == [m.id for m in base]
    # A later snapshot grown in place still reads only its own first n.
    third = compute_delta(first.snapshot(2), [*base, a, b], frozenset())
    assert third.ids[:third.n] == [m.id for m in (*base, a, b)]
    assert first.snapshot(2).n == 7


def test_a_snapshot_of_a_history_keeps_its_lineage_not_its_objects() -> None:
    h = _history(4)
    snap = snapshot_of(1, [m.id for m in h], [m.model_dump_json() for m in h],
                       [m.role for m in h], h)
    assert snap.lineage is h.lineage and snap.objs is None
    h.append(Msg("user", "next"))
    delta = compute_delta(snap, h, frozenset())
    assert delta.start == 4 and delta.n == 5 and delta.objs is None
    plain = list(h)
    delta = compute_delta(snap, plain, frozenset())  # no lineage: compared, same answer
    assert delta.start == 4 and delta.objs == plain
