"""The lean subscribe path of rx_agent._rx (docs/internals.md, "DirectObservable and
the hot path"): one slotted sink per subscription, no lock unless an operator asks,
RxPY's trampoline kept at the top-level subscription."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest
import reactivex
import reactivex.operators as ops
from reactivex.disposable import Disposable

from rx_agent._rx import DirectObservable, LeanObservable, LeanSink, subscribe_observer


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


def _direct(emit: Any) -> tuple[DirectObservable[Any], list[Any]]:
    """A DirectObservable calling ``emit(observer)``; records its observers and disposals."""
    seen: list[Any] = []

    def subscribe(observer: Any, scheduler: Any = None) -> Any:
        seen.append(observer)
        emit(observer)
        return Disposable(lambda: seen.append("disposed"))

    return DirectObservable(subscribe), seen


def _three(observer: Any) -> None:
    for i in range(3):
        observer.on_next(i)
    observer.on_completed()


def test_an_operator_subscribes_a_direct_observable_with_one_lean_sink() -> None:
    source, seen = _direct(_three)
    out = _Recorder()
    source.pipe(ops.map(lambda x: x * 10)).subscribe(out)
    assert out.items == [0, 10, 20] and out.completed == 1
    assert type(seen[0]) is LeanSink
    assert seen[-1] == "disposed"  # detached on completion, as RxPY's observer does


def test_nothing_passes_a_lean_sink_after_its_terminal_signal() -> None:
    def misbehave(observer: Any) -> None:
        observer.on_next(1)
        observer.on_completed()
        observer.on_next(2)
        observer.on_error(ValueError("late"))
        observer.on_completed()

    source, _ = _direct(misbehave)
    out = _Recorder()
    source.pipe(ops.map(lambda x: x)).subscribe(out)
    assert (out.items, out.errors, out.completed) == ([1], [], 1)


def test_an_end_before_the_upstream_is_known_disposes_it_when_subscribe_returns() -> None:
    source, seen = _direct(_three)
    sink = source.subscribe(lambda _: None)
    assert seen[-1] == "disposed"
    sink.dispose()  # idempotent
    assert seen.count("disposed") == 1


def test_an_error_raised_while_subscribing_reaches_on_error() -> None:
    def boom(observer: Any) -> None:
        raise ValueError("boom")

    source, _ = _direct(boom)
    out = _Recorder()
    source.pipe(ops.map(lambda x: x)).subscribe(out)
    assert [str(e) for e in out.errors] == ["boom"]


def test_an_erroring_source_errors_downstream_and_detaches() -> None:
    def fail(observer: Any) -> None:
        observer.on_next(1)
        observer.on_error(KeyError("k"))

    source, seen = _direct(fail)
    out = _Recorder()
    source.pipe(ops.map(lambda x: x + 1)).subscribe(out)
    assert out.items == [2] and isinstance(out.errors[0], KeyError)
    assert seen[-1] == "disposed"


def test_an_asynchronous_source_disposed_from_another_thread_stops() -> None:
    stop = threading.Event()
    emitted: list[int] = []

    def subscribe(observer: Any, scheduler: Any = None) -> Any:
        def produce() -> None:
            for i in itertools.count():
                if stop.is_set():
                    return
                emitted.append(i)
                observer.on_next(i)
                time.sleep(0.001)

        threading.Thread(target=produce, daemon=True).start()
        return Disposable(stop.set)

    out = _Recorder()
    subscription = DirectObservable(subscribe).pipe(ops.map(lambda x: x)).subscribe(out)
    while len(out.items) < 3:
        time.sleep(0.001)
    disposer = threading.Thread(target=subscription.dispose)
    disposer.start()
    disposer.join()
    assert stop.is_set()
    seen = len(out.items)
    time.sleep(0.02)
    assert len(out.items) == seen  # nothing after dispose() returned


def test_the_lock_is_made_only_when_an_operator_asks_for_it() -> None:
    source, _ = _direct(_three)
    assert "_lock" not in source.__dict__
    out = _Recorder()
    source.pipe(ops.take_while(lambda x: x < 2)).subscribe(out)  # uses source.lock
    assert out.items == [0, 1]
    assert source.lock is source.lock


def endless() -> reactivex.Observable[int]:
    return reactivex.from_iterable(itertools.count())


@pytest.mark.parametrize("shape", ["top-level", "nested", "inner take"])
def test_take_over_an_endless_synchronous_source_stops(shape: str) -> None:
    # RxPY's trampoline must run at the top-level subscription, or take(3) never
    # gets its disposable in time and the source loops forever.
    if shape == "top-level":
        source: Any = LeanObservable(endless().pipe(ops.take(3)))
    elif shape == "nested":
        source = LeanObservable(endless()).pipe(ops.map(lambda x: x), ops.take(3))
    else:
        source = LeanObservable(endless().pipe(ops.take(3))).pipe(ops.map(lambda x: x))
    out = _Recorder()
    done = threading.Event()

    def run() -> None:
        source.subscribe(out)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(5), "the endless source was never stopped"
    assert out.items == [0, 1, 2] and out.completed == 1


def test_first_and_take_until_over_a_direct_observable() -> None:
    source, seen = _direct(_three)
    out = _Recorder()
    source.pipe(ops.first()).subscribe(out)
    assert out.items == [0] and out.completed == 1 and seen[-1] == "disposed"
    out = _Recorder()
    source.pipe(ops.take_until(reactivex.never())).subscribe(out)
    assert out.items == [0, 1, 2] and out.completed == 1


def test_the_runtime_subscribes_a_lean_observable_through_rxpy_at_the_top() -> None:
    out = _Recorder()
    subscribe_observer(LeanObservable(endless().pipe(ops.take(2))), out)
    assert out.items == [0, 1] and out.completed == 1
    source, seen = _direct(_three)
    direct = _Recorder()
    subscribe_observer(source, direct)
    assert seen[0] is direct  # the runtime's own observer, as is
