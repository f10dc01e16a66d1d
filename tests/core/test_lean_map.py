"""RxPY's ``ops.map`` piped onto the runtime's Observables (``rx_agent._rx.LeanMap``):
the same items, errors, disposal and trampoline as RxPY's map, compared with it."""

from __future__ import annotations

import itertools
from typing import Any

import reactivex
import reactivex.operators as ops
from reactivex.disposable import Disposable
from reactivex.subject import Subject
from reactivex.testing import ReactiveTest, TestScheduler

from rx_agent._rx import DirectObservable, LeanMap, LeanObservable, subscribe_observer
from rx_agent._rx._map import NOT_MAP, map_of


class _Recorder:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self.errors: list[Exception] = []
        self.completed = 0

    def on_next(self, value: Any) -> None:
        self.items.append(value)

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)

    def on_completed(self) -> None:
        self.completed += 1

    def outcome(self) -> tuple[list[Any], list[str], int]:
        return self.items, [repr(e) for e in self.errors], self.completed


def _direct(*items: Any, error: Exception | None = None) -> tuple[DirectObservable[Any],
                                                                   list[str]]:
    log: list[str] = []

    def subscribe(observer: Any, scheduler: Any = None) -> Any:
        log.append("subscribed")
        for item in items:
            observer.on_next(item)
        if error is not None:
            observer.on_error(error)
        else:
            observer.on_completed()
        return Disposable(lambda: log.append("disposed"))

    return DirectObservable(subscribe), log


def _same_as_rxpy(*operators: Any, items: tuple[Any, ...] = (1, 2, 3),
                  error: Exception | None = None) -> tuple[Any, Any]:
    ours, _ = _direct(*items, error=error)
    theirs = reactivex.from_iterable(items) if error is None else reactivex.concat(
        reactivex.from_iterable(items), reactivex.throw(error))
    a, b = _Recorder(), _Recorder()
    ours.pipe(*operators).subscribe(a)
    theirs.pipe(*operators).subscribe(b)
    return a.outcome(), b.outcome()


def test_only_rxpy_map_is_recognized() -> None:
    def f(x: Any) -> Any:
        return x

    assert map_of(ops.map(f)) is f
    assert map_of(ops.map(mapper=f)) is f
    assert map_of(ops.map()) is not NOT_MAP  # the identity, as RxPY's default
    assert map_of(ops.filter(f)) is NOT_MAP
    assert map_of(ops.take(1)) is NOT_MAP
    assert map_of(lambda source: source) is NOT_MAP


def test_a_map_on_a_runtime_observable_is_a_lean_map_and_maps_fuse() -> None:
    source, log = _direct(1, 2, 3)
    one = source.pipe(ops.map(lambda x: x + 1))
    assert type(one) is LeanMap
    two = one.pipe(ops.map(lambda x: x * 10), ops.map(str))
    assert type(two) is LeanMap and two.upstream is source and len(two.mappers) == 3
    out = _Recorder()
    two.subscribe(out)
    assert out.outcome() == (["20", "30", "40"], [], 1)
    assert log == ["subscribed", "disposed"]
    assert _same_as_rxpy(ops.map(lambda x: x + 1), ops.map(lambda x: x * 10)) == (
        ([20, 30, 40], [], 1), ([20, 30, 40], [], 1))


def test_a_mapper_that_raises_ends_the_stream_as_rxpy_map_does() -> None:
    def sometimes(x: int) -> int:
        if x == 2:
            raise ValueError("two")
        return x

    ours, theirs = _same_as_rxpy(ops.map(sometimes), ops.map(lambda x: -x))
    assert ours == theirs == ([-1], [repr(ValueError("two"))], 0)
    ours, theirs = _same_as_rxpy(ops.map(lambda x: x), error=KeyError("k"))
    assert ours == theirs == ([1, 2, 3], [repr(KeyError("k"))], 0)


def test_an_error_disposes_the_upstream_and_nothing_passes_after_it() -> None:
    subject: Subject[int] = Subject()
    upstream_disposed: list[int] = []
    source = DirectObservable(lambda observer, scheduler=None: (
        subject.subscribe(observer), Disposable(lambda: upstream_disposed.append(1)))[1])

    def fail(x: int) -> int:
        raise ValueError("no")

    out = _Recorder()
    source.pipe(ops.map(fail)).subscribe(out)
    subject.on_next(1)
    subject.on_next(2)
    subject.on_completed()
    assert out.outcome() == ([], [repr(ValueError("no"))], 0)
    assert upstream_disposed == [1]


def test_disposal_stops_the_items() -> None:
    subject: Subject[int] = Subject()
    source = DirectObservable(lambda observer, scheduler=None: subject.subscribe(observer))
    out = _Recorder()
    subscription = source.pipe(ops.map(lambda x: x * 2)).subscribe(out)
    subject.on_next(1)
    subscription.dispose()
    subject.on_next(2)
    assert out.items == [2] and not subject.observers


def test_take_over_an_endless_synchronous_chain_stops() -> None:
    # The upstream is a user's chain that needs RxPY's trampoline to stop: the map
    # subscribed at the top level runs it, as RxPY's map would.
    endless = LeanObservable(reactivex.from_iterable(itertools.count()))
    out = _Recorder()
    endless.pipe(ops.map(lambda x: x * 2)).pipe(ops.take(3)).subscribe(out)
    assert out.outcome() == ([0, 2, 4], [], 1)
    recorder = _Recorder()
    subscribe_observer(LeanMap(reactivex.from_iterable(itertools.count()), (abs,)).pipe(
        ops.take(2)), recorder)
    assert recorder.outcome() == ([0, 1], [], 1)


def test_a_subscribers_scheduler_reaches_the_upstream() -> None:
    scheduler = TestScheduler()
    upstream = scheduler.create_cold_observable(
        ReactiveTest.on_next(10, 1), ReactiveTest.on_next(20, 2), ReactiveTest.on_completed(30))
    mapped = LeanObservable(upstream).pipe(ops.map(lambda x: x * 100))
    assert type(mapped) is LeanMap
    results = scheduler.start(lambda: mapped)
    assert [m.value.value for m in results.messages if m.value.kind == "N"] == [100, 200]
