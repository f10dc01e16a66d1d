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
from reactivex.scheduler import CurrentThreadScheduler

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
    # (ops.map alone is the runtime's own map: tests/core/test_lean_map.py)
    source.pipe(ops.filter(lambda x: x >= 0), ops.map(lambda x: x * 10)).subscribe(out)
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


def _trampoline_idle() -> bool:
    return CurrentThreadScheduler.singleton().get_trampoline().idle()


def _shapes() -> dict[str, Any]:
    of = reactivex.of
    return {
        "merge": lambda: reactivex.merge(of(1, 2, 3), of(10, 20, 30)),
        "concat": lambda: reactivex.concat(of(1, 2), of(3, 4)),
        "zip": lambda: reactivex.zip(of(1, 2, 3), of("a", "b", "c")),
        "flat_map": lambda: of(1, 2).pipe(ops.flat_map(lambda x: of(x, x * 10))),
        "take over merge": lambda: reactivex.merge(
            reactivex.from_iterable(range(1000)), reactivex.from_iterable(range(1000))
        ).pipe(ops.take(5)),
        "repeat": lambda: of(1, 2).pipe(ops.repeat(3)),
    }


@pytest.mark.parametrize("shape", sorted(_shapes()))
def test_the_lean_top_level_subscription_orders_items_as_rxpy_does(shape: str) -> None:
    # subscribe_observer runs RxPY's trampoline itself, without the scheduled item and
    # the auto-detaching observer: the items must come in RxPY's own order.
    make = _shapes()[shape]
    expected = _Recorder()
    make().subscribe(expected)
    got = _Recorder()
    subscribe_observer(make(), got)
    assert (got.items, got.completed) == (expected.items, expected.completed)
    assert got.items  # the shape produced something
    assert _trampoline_idle()


def test_take_at_the_top_level_stops_pulling_a_synchronous_source() -> None:
    pulled: list[int] = []

    def counted() -> Any:
        for i in range(10_000):
            pulled.append(i)
            yield i

    out = _Recorder()
    subscribe_observer(reactivex.from_iterable(counted()).pipe(ops.take(3)), out)
    assert out.items == [0, 1, 2] and out.completed == 1
    assert len(pulled) <= 4  # not the 10,000 a subscription without the trampoline pulls


def test_the_trampoline_is_left_idle_after_a_top_level_item_raises() -> None:
    class Raising(_Recorder):
        def on_next(self, value: Any) -> None:
            super().on_next(value)
            if value == 1:
                raise RuntimeError("observer bug")

        def on_error(self, error: Exception) -> None:
            raise error  # out of the trampoline's scheduled item

    def source() -> reactivex.Observable[int]:
        return reactivex.merge(reactivex.of(0, 1, 2), reactivex.of(5, 6))

    with pytest.raises(RuntimeError, match="observer bug"):
        source().subscribe(Raising())  # RxPY's own behaviour: it propagates
    with pytest.raises(RuntimeError, match="observer bug"):
        subscribe_observer(source(), Raising())
    assert _trampoline_idle()
    expected, after = _Recorder(), _Recorder()
    source().subscribe(expected)
    subscribe_observer(source(), after)  # nothing queued by the failed one runs here
    assert after.items == expected.items == [0, 1, 2, 5, 6] and after.completed == 1


def test_a_top_level_dispose_before_any_scheduled_item_stops_them() -> None:
    out = _Recorder()
    subscription = subscribe_observer(
        reactivex.timer(0.05, scheduler=CurrentThreadScheduler.singleton()).pipe(
            ops.take_until(reactivex.of(1))), out)
    subscription.dispose()
    assert out.items == [] and out.completed == 1 and _trampoline_idle()


def test_a_nested_subscription_inside_a_running_trampoline_is_lean() -> None:
    source, seen = _direct(_three)
    out = _Recorder()
    # The outer of() runs the trampoline; the inner subscription happens inside it.
    subscribe_observer(reactivex.of(1).pipe(ops.flat_map(lambda _: source)), out)
    assert out.items == [0, 1, 2] and type(seen[0]) is LeanSink


def test_an_observable_with_its_own_subscribe_keeps_it() -> None:
    calls: list[str] = []

    class Own(reactivex.Observable[int]):
        def subscribe(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            calls.append("own")
            return super().subscribe(*args, **kwargs)

    out = _Recorder()
    subscribe_observer(Own(lambda obs, _: reactivex.of(7).subscribe(obs)), out)
    subscribe_observer(LeanObservable(Own(lambda obs, _: reactivex.of(8).subscribe(obs))),
                       _Recorder())
    assert calls == ["own", "own"] and out.items == [7]


def test_a_subscribe_function_may_return_a_dispose_function() -> None:
    cleaned: list[str] = []

    def subscribe(observer: Any, scheduler: Any = None) -> Any:
        observer.on_next(1)
        observer.on_completed()
        return lambda: cleaned.append("cleanup")

    top, nested = _Recorder(), _Recorder()
    subscribe_observer(reactivex.create(subscribe), top)
    LeanObservable(reactivex.create(subscribe)).pipe(ops.map(lambda x: x)).subscribe(nested)
    assert top.items == nested.items == [1] and top.completed == nested.completed == 1
    assert cleaned == ["cleanup", "cleanup"]
