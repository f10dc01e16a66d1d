"""``History`` and ``HistoryView``: the context's snapshots for the model copy nothing
and stay exact whatever the session does after (``rx_agent/_history.py``)."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from rx_agent import AgentState, Msg, ReActAgent, RuntimeContext, ScriptedModel
from rx_agent._history import History, HistoryView, snapshot
from rx_agent.middleware.inputs import ModelCallInput
from rx_agent.options import GenerateOptions

A, B, C, D = (Msg("user", x) for x in "abcd")
SYS = Msg("system", "sys")


def test_a_view_covers_what_the_list_held_when_taken() -> None:
    h = History([A, B])
    view = HistoryView(SYS, h)
    h.append(C)
    h.extend([D])
    h += [A]
    assert list(view) == [SYS, A, B] and len(view) == 3
    assert view[0] is SYS and view[1] is A and view[-1] is B
    assert view[1:] == (A, B) and isinstance(view[1:], tuple)
    with pytest.raises(IndexError):
        view[3]
    assert B in view and C not in view
    assert list(HistoryView(None, h)) == [A, B, C, D, A]


MUTATIONS: list[tuple[str, Callable[[History], Any]]] = [
    ("setitem", lambda h: h.__setitem__(0, D)),
    ("slice assignment", lambda h: h.__setitem__(slice(None), [D])),
    ("delitem", lambda h: h.__delitem__(0)),
    ("insert", lambda h: h.insert(0, D)),
    ("pop", lambda h: h.pop()),
    ("remove", lambda h: h.remove(A)),
    ("clear", lambda h: h.clear()),
    ("sort", lambda h: h.sort(key=lambda m: m.text, reverse=True)),
    ("reverse", lambda h: h.reverse()),
    ("imul", lambda h: h.__imul__(0)),
]


@pytest.mark.parametrize(("what", "change"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_every_other_change_freezes_the_views_first(what: str, change: Any) -> None:
    h = History([A, B, C])
    whole, head = HistoryView(None, h), HistoryView(SYS, h)
    h.append(D)
    short = HistoryView(None, h)
    change(h)
    assert list(whole) == [A, B, C], what
    assert list(head) == [SYS, A, B, C], what
    assert list(short) == [A, B, C, D], what
    assert isinstance(h, History)
    assert list(HistoryView(None, h)) == list(h)  # a new view sees the change


def test_a_view_compares_hashes_and_adds_as_a_tuple() -> None:
    h = History([A, B])
    view = HistoryView(SYS, h)
    assert view == (SYS, A, B) and view == [SYS, A, B] and view != (SYS, A)
    with pytest.raises(TypeError, match="unhashable"):  # as a tuple of messages is
        hash(view)
    assert view + (C,) == (SYS, A, B, C) and (C,) + view == (C, SYS, A, B)  # type: ignore[operator]  # noqa: RUF005
    assert (*view, C) == (SYS, A, B, C)
    assert repr(view) == "HistoryView(3 messages)"
    assert pickle.loads(pickle.dumps(view)) == (SYS, A, B)


def test_a_history_copies_and_pickles_as_a_history_without_views() -> None:
    h = History([A, B])
    view = HistoryView(None, h)
    for twin in (copy.copy(h), copy.deepcopy(h), pickle.loads(pickle.dumps(h))):
        assert type(twin) is History and list(twin) == [A, B] and twin._views == []
        twin.clear()
    assert list(view) == [A, B] and list(h) == [A, B]
    state = AgentState(session_id="s", context=[A])
    state.context = History(state.context)
    assert state.model_dump_json() == AgentState(session_id="s", context=[A]).model_dump_json()
    assert type(state.model_copy(deep=True).context) is History


def test_views_of_a_long_lived_list_do_not_pile_up() -> None:
    h = History([A])
    for _ in range(1000):
        HistoryView(None, h)  # dropped at once
    assert len(h._views) <= 17


def test_snapshot_of_a_plain_list_is_a_tuple_copy() -> None:
    plain = [A, B]
    assert snapshot(SYS, plain) == (SYS, A, B) and type(snapshot(None, plain)) is tuple
    assert type(snapshot(None, History(plain))) is HistoryView


def test_a_round_shows_the_model_a_view_and_a_kept_one_stays_what_the_round_saw() -> None:
    model = ScriptedModel(["one", "two"])
    agent = ReActAgent(name="a", sys_prompt="sys", model=model)
    ctx = RuntimeContext(session_id="s")
    agent.call_sync("q1", ctx)
    agent.call_sync("q2", ctx)
    first, second = (call.messages for call in model.calls)
    assert type(first) is HistoryView  # not a copy of the context
    assert [m.text for m in first] == ["sys", "q1"]
    assert [m.text for m in second] == ["sys", "q1", "one", "q2"]
    # The session compacted in place afterwards: what the rounds saw does not change.
    state = ctx.agent_state
    assert state is not None and type(state.context) is History
    state.context[:] = [Msg("user", "summary")]
    assert [m.text for m in first] == ["sys", "q1"]
    assert [m.text for m in second] == ["sys", "q1", "one", "q2"]


def test_a_model_input_takes_a_view_as_it_is_and_copies_any_other_sequence() -> None:
    model = ScriptedModel(["x"])
    view = HistoryView(None, History([A]))
    assert ModelCallInput(view, (), GenerateOptions(), model).messages is view
    listed = ModelCallInput([A], (), GenerateOptions(), model).messages  # type: ignore[arg-type]
    assert type(listed) is tuple
