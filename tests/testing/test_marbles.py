"""Marble diagrams: one character per frame, a legend for the items."""

from __future__ import annotations

import pytest
import reactivex
from reactivex.testing import TestScheduler

from rx_agent.testing import marbles, verify
from rx_agent.testing._marbles import parse_marbles


def test_frames_groups_and_the_end() -> None:
    legend = {"a": 1, "b": 2, "c": 3}
    assert parse_marbles("a-b(ac)-|", legend, timespan=1.0) == [
        (0.0, "next", 1), (2.0, "next", 2), (3.0, "next", 1), (3.0, "next", 3),
        (8.0, "completed", None)]
    assert parse_marbles(" a - b ", legend, timespan=0.5) == [(0.0, "next", 1),
                                                             (1.0, "next", 2)]


def test_legend_lists_and_errors() -> None:
    boom = KeyError("boom")
    assert parse_marbles("ax", {"a": [1, 2], "x": boom}) == [
        (0.0, "next", 1), (0.0, "next", 2), (0.1, "error", boom)]
    (_at, kind, error) = parse_marbles("#", error=ValueError("v"))[0]
    assert kind == "error" and isinstance(error, ValueError)


@pytest.mark.parametrize(("diagram", "message"), [
    ("a-z", "'z' at position 2 is not in the legend"),
    ("a|a", "comes after the stream ended"),
    ("(a", "never closed"),
    ("a)", "without '('"),
    ("(a-)", "inside a group"),
])
def test_bad_diagrams_are_explained(diagram: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_marbles(diagram, {"a": 1})


def test_the_stream_is_cold_and_needs_a_scheduler() -> None:
    source = marbles("a-b|", {"a": "x", "b": "y"}, timespan=2.0)
    scheduler = TestScheduler()
    delayed = reactivex.concat(source, source)
    result = verify(delayed, scheduler).expect_next("x").expect_no_event(4.0) \
        .expect_next("y", "x", "y").verify_complete()
    assert [s.at for s in result.signals] == [0.0, 4.0, 6.0, 10.0, 12.0]
    failed = verify(source).expect_error(RuntimeError)
    assert "needs a scheduler" in str(failed.error)
