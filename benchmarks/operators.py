"""rx_agent.operators in the hot path: an operator from the module against the same
rewrite written as one plain RxPY operator, and as an AgentScope Python style
async-generator middleware (written here; AgentScope itself is not needed).

    python benchmarks/operators.py           # full sizes
    python benchmarks/operators.py --smoke   # tiny sizes (a test keeps it running)

Three figures per rewrite:

* per event: ns one more event costs through the operator (a long stream; the
  source's own cost subtracted);
* per hook invocation: us to build, subscribe and run the chain of a stream with
  one event (what a hook pays once per round);
* agent reply: ns per event of a whole ``ReActAgent`` reply whose ``on_model_call``
  hook applies the rewrite (the runtime's own cost included).

Targets (issue 13): an operator costs at most what the plain RxPY operator costs
per event (ratio <= 1.0), and less per invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from reactivex import Observable
from reactivex import operators as ops
from reactivex.disposable import Disposable

from rx_agent import (
    AgentEvent,
    ExtensionPoint,
    MiddlewareBase,
    ModelCallEndEvent,
    ModelCallStartEvent,
    ReActAgent,
    ScriptedModel,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
)
from rx_agent import operators as aops
from rx_agent._rx import DirectObservable, subscribe_direct
from rx_agent.operators._base import with_delta

# CPU time of this process: the machine is shared, and wall time would count the time
# other work held the CPU. The fastest run of each batch is the figure (as timeit).
_clock = time.process_time


# -- the rewrites, three ways -------------------------------------------------------------


def upper(text: str) -> str:
    return text.upper()


# Every variant copies a rewritten delta the same way (the runtime's validation-free
# copy), so the figures compare the operator plumbing, not pydantic's model_copy.
copy = with_delta


def plain_map_text(event: AgentEvent) -> AgentEvent:
    """What a user writes with plain RxPY: one ``ops.map`` that copies text deltas."""
    if type(event) is TextBlockDeltaEvent:
        new = upper(event.delta)
        return event if new == event.delta else copy(event, new)
    return event


def plain_is_delta(event: AgentEvent) -> bool:
    return isinstance(event, TextBlockDeltaEvent)


async def agen_map_text(source: AsyncIterator[AgentEvent]) -> AsyncIterator[AgentEvent]:
    """AgentScope Python's middleware shape: ``async for`` over the next handler,
    ``yield`` each (rewritten) event."""
    async for event in source:
        if type(event) is TextBlockDeltaEvent:
            new = upper(event.delta)
            yield event if new == event.delta else copy(event, new)
        else:
            yield event


async def agen_of_type(source: AsyncIterator[AgentEvent]) -> AsyncIterator[AgentEvent]:
    async for event in source:
        if isinstance(event, TextBlockDeltaEvent):
            yield event


REWRITES: dict[str, tuple[Callable[[], Any], Callable[[], Any], Any]] = {
    # name: (ours, plain RxPY, async generator)
    "map_text": (lambda: aops.map_text(upper), lambda: ops.map(plain_map_text), agen_map_text),
    "of_type": (lambda: aops.of_type(TextBlockDeltaEvent), lambda: ops.filter(plain_is_delta),
                agen_of_type),
}


# -- the source: what next(input) is in a hook --------------------------------------------


def reply(n: int) -> list[AgentEvent]:
    return [ModelCallStartEvent(reply_id="r", model_name="m"),
            TextBlockStartEvent(reply_id="r", block_id="text"),
            *[TextBlockDeltaEvent(reply_id="r", block_id="text", delta="tok ")
              for _ in range(n)],
            TextBlockEndEvent(reply_id="r", block_id="text"),
            ModelCallEndEvent(reply_id="r")]


def direct_source(events: list[AgentEvent]) -> Observable[AgentEvent]:
    """A runtime-style source (``DirectObservable``), as ``next(input)`` returns."""

    def subscribe(observer: Any, scheduler: Any = None) -> Disposable:
        on_next = observer.on_next
        for event in events:
            on_next(event)
        observer.on_completed()
        return Disposable()

    return DirectObservable(subscribe)


def _drain(source: Observable[Any]) -> int:
    count = [0]

    def on_next(_: Any) -> None:
        count[0] += 1

    def on_error(exc: Exception) -> None:
        raise exc

    subscribe_direct(source, on_next, on_error, lambda: None)
    return count[0]


def rx_seconds(events: list[AgentEvent], make: Callable[[], Any] | None, repeats: int) -> float:
    """Median seconds to build (``make()`` per run, as a hook does), subscribe and drain."""
    times = []
    for _ in range(repeats):
        gc.disable()
        start = _clock()
        source = direct_source(events)
        _drain(source if make is None else source.pipe(make()))
        times.append(_clock() - start)
        gc.enable()
    return min(times)


async def agen_source(events: list[AgentEvent]) -> AsyncIterator[AgentEvent]:
    for event in events:
        yield event


async def agen_seconds(events: list[AgentEvent], layer: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.disable()
        start = _clock()
        gen = agen_source(events) if layer is None else layer(agen_source(events))
        async for _event in gen:
            pass
        times.append(_clock() - start)
        gc.enable()
    return min(times)


# -- end to end ---------------------------------------------------------------------------


class OnModelCall(MiddlewareBase):
    def __init__(self, make: Callable[[], Any] | None) -> None:
        self.make = make

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_MODEL_CALL}

    def on_model_call(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        if self.make is None:
            return next(input)
        return next(input).pipe(self.make())


async def _drain_agent(agent: ReActAgent) -> None:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    agent.stream("go").subscribe(lambda _: None, done.set_exception,
                                 lambda: done.set_result(None))
    await done


async def e2e_seconds(events: int, make: Callable[[], Any] | None, repeats: int) -> float:
    times = []
    for _ in range(repeats + 1):
        agent = ReActAgent(name="bench", model=ScriptedModel([["tok "] * events]),
                           middlewares=[OnModelCall(make)])
        start = _clock()
        await _drain_agent(agent)
        times.append(_clock() - start)
    return statistics.median(times[1:])


# -- the report ---------------------------------------------------------------------------


def row(what: str, ours: float, plain: float, agen: float | None, unit: str) -> None:
    agen_txt = f"{agen:10.1f}" if agen is not None else " " * 10
    ratio_agen = f"{agen / ours:8.1f}x" if agen is not None else " " * 9
    print(f"  {what:<34} {ours:10.1f} {plain:10.1f} {agen_txt}   {ours / plain:6.2f}x "
          f"{ratio_agen}  {unit}", flush=True)


async def main_async(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    long = reply(args.events)
    short = reply(1)
    figures: dict[str, dict[str, float]] = {}
    print(f"{'':36} {'ours':>10} {'plain rx':>10} {'async gen':>10}   "
          f"{'ours/rx':>7} {'agen/ours':>9}")
    calls = args.repeats * 20
    for name, (ours_make, plain_make, agen_layer) in REWRITES.items():
        # Every column and its baseline (the source alone) is measured in every round,
        # interleaved, so drift on a busy machine hits them alike; medians of rounds.
        per_event: dict[str, list[float]] = {"ours": [], "plain": [], "agen": []}
        per_call: dict[str, list[float]] = {"ours": [], "plain": [], "agen": []}
        e2e: dict[str, list[float]] = {"base": [], "ours": [], "plain": []}
        for _ in range(args.rounds):
            base = rx_seconds(long, None, args.repeats)
            per_event["ours"].append(rx_seconds(long, ours_make, args.repeats) - base)
            per_event["plain"].append(rx_seconds(long, plain_make, args.repeats) - base)
            agen_base = await agen_seconds(long, None, args.repeats)
            per_event["agen"].append(await agen_seconds(long, agen_layer, args.repeats)
                                     - agen_base)
            base = rx_seconds(short, None, calls)
            per_call["ours"].append(rx_seconds(short, ours_make, calls) - base)
            per_call["plain"].append(rx_seconds(short, plain_make, calls) - base)
            agen_base = await agen_seconds(short, None, calls)
            per_call["agen"].append(await agen_seconds(short, agen_layer, calls) - agen_base)
            for key, make in (("base", None), ("ours", ours_make), ("plain", plain_make)):
                e2e[key].append(await e2e_seconds(args.events, make, 1))
        ev = {k: statistics.median(v) / len(long) * 1e9 for k, v in per_event.items()}
        call = {k: statistics.median(v) * 1e6 for k, v in per_call.items()}
        whole = {k: statistics.median(v) / len(long) * 1e9 for k, v in e2e.items()}
        row(f"{name}: per event", ev["ours"], ev["plain"], ev["agen"], "ns/event")
        row(f"{name}: per hook invocation", call["ours"], call["plain"], call["agen"],
            "us/invocation")
        row(f"{name}: agent reply, whole", whole["ours"], whole["plain"], None,
            f"ns/event (no middleware: {whole['base']:.0f})")
        figures[name] = {"event_ns_ours": ev["ours"], "event_ns_plain": ev["plain"],
                         "event_ns_agen": ev["agen"], "call_us_ours": call["ours"],
                         "call_us_plain": call["plain"], "call_us_agen": call["agen"],
                         "reply_ns_ours": whole["ours"], "reply_ns_plain": whole["plain"],
                         "reply_ns_base": whole["base"]}
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks it runs")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    if args.smoke:
        args.events, args.repeats, args.rounds = 200, 2, 1
    gc.collect()
    gc.freeze()
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
