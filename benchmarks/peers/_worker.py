"""The worker side of the peers protocol: shared by every ``worker_*.py`` (stdlib only).

A worker is a long-lived process that loads one framework once, then answers requests
read from stdin, one JSON object a line, with one JSON object a line on stdout:

- ``{"op": "measure", "calls": K, "warmup": W, "tools": 0|1, "layers": L, "chunks": C}``:
  K calls one after the other (after W untimed ones) on what ``build`` made for them,
  outside the timed region. Reply: ``{"cpu_us": ..., "wall_us": ...}``, the mean per call of
  ``time.process_time`` and ``time.perf_counter``.
- ``{"op": "concurrent", "calls": N, "chunks": C, "latency": S}``: one call, then N calls
  gathered on the loop, the model waiting S seconds before each chunk. Reply: wall
  seconds of each, their ratio, and CPU per call of the N calls.
- ``{"op": "quit"}``: reply ``{"bye": true}`` and exit.

Any failure replies ``{"error": "<traceback>"}`` and the worker keeps serving. The first
line a worker prints is ``{"ready": true, "framework": ..., "version": ...}``. Every call
is checked: it must stream exactly C text deltas and (with tools) one tool result.
"""

from __future__ import annotations

import asyncio
import gc
import json
import platform
import socket
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TextIO

#: The final answer every framework streams, one text delta per chunk.
TEXT_DELTA = "tok "


def refuse_network() -> None:
    """Any non-Unix socket connect fails: the fakes must never reach a network."""
    original = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        if self.family != getattr(socket, "AF_UNIX", None):
            raise OSError("peers benchmark: network access is disabled in workers")
        original(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign,assignment]


class Framework(Protocol):
    """What a worker script implements for its framework."""

    name: str
    version: str

    def build(self, n: int, *, tools: bool, layers: int, chunks: int, latency: float) -> Any:
        """What ``n`` calls need (agents, graphs); built outside the timed region."""

    def run(self, handle: Any, i: int) -> Awaitable[tuple[int, int]]:
        """Call ``i`` on ``handle``, consuming its stream: (text deltas, tool results)."""


def _check(got: tuple[int, int], chunks: int, tools: bool) -> None:
    deltas, results = got
    if deltas != chunks or results != int(tools):
        raise RuntimeError(f"a call streamed {deltas} text deltas and {results} tool "
                           f"results; expected {chunks} and {int(tools)}")


async def measure(fw: Framework, calls: int, warmup: int, tools: bool, layers: int,
                  chunks: int) -> dict[str, Any]:
    cpu = wall = 0.0
    # One handle serves the batch, as a service serves its calls (one agent or graph where
    # the framework allows; per-call agents where an agent holds its conversation).
    handle = fw.build(warmup + calls, tools=tools, layers=layers, chunks=chunks, latency=0.0)
    for i in range(warmup + calls):
        c0, w0 = time.process_time(), time.perf_counter()
        got = await fw.run(handle, i)
        w1, c1 = time.perf_counter(), time.process_time()
        _check(got, chunks, tools)
        if i >= warmup:
            cpu += c1 - c0
            wall += w1 - w0
    return {"cpu_us": cpu / calls * 1e6, "wall_us": wall / calls * 1e6}


async def concurrent(fw: Framework, calls: int, chunks: int, latency: float) -> dict[str, Any]:
    one = []
    for _ in range(3):  # the least of three: one call is short and easily disturbed
        handle = fw.build(1, tools=False, layers=0, chunks=chunks, latency=latency)
        w0 = time.perf_counter()
        _check(await fw.run(handle, 0), chunks, False)
        one.append(time.perf_counter() - w0)
    handle = fw.build(calls, tools=False, layers=0, chunks=chunks, latency=latency)
    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    results = await asyncio.gather(*(fw.run(handle, i) for i in range(calls)))
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    for got in results:
        _check(got, chunks, False)
    return {"one_s": min(one), "all_s": wall, "ratio": wall / min(one),
            "cpu_us_per_call": cpu / calls * 1e6}


async def _handle(fw: Framework, req: dict[str, Any]) -> dict[str, Any]:
    op = req.get("op")
    if op in ("measure", "concurrent") and int(req.get("calls", 0)) < 1:
        raise ValueError(f"{op} needs calls >= 1, got {req.get('calls')!r}")
    if op == "measure":
        return await measure(fw, int(req["calls"]), int(req.get("warmup", 1)),
                             bool(req.get("tools", 0)), int(req.get("layers", 0)),
                             int(req.get("chunks", 5)))
    if op == "concurrent":
        return await concurrent(fw, int(req["calls"]), int(req.get("chunks", 5)),
                                float(req.get("latency", 0.02)))
    raise ValueError(f"unknown op {op!r}; expected measure, concurrent or quit")


def serve(make: Callable[[], Framework], stdin: TextIO | None = None,
          stdout: TextIO | None = None) -> None:
    """Load the framework, then answer requests until ``quit`` or end of input."""
    inp, out = stdin or sys.stdin, stdout or sys.stdout
    sys.stdout = sys.stderr  # a library's print() must never corrupt the protocol

    def send(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    fw = make()
    # The import graph is large and lives forever: freeze it so a collection inside a
    # timed call costs what the call allocated (the collector stays on, at defaults).
    gc.collect()
    gc.freeze()
    loop = asyncio.new_event_loop()
    send({"ready": True, "framework": fw.name, "version": fw.version,
          "python": platform.python_version()})
    try:
        for line in inp:
            if not line.strip():
                continue
            try:
                req = json.loads(line)
                if req.get("op") == "quit":
                    send({"bye": True})
                    return
                send(loop.run_until_complete(_handle(fw, req)))
            except Exception:
                send({"error": traceback.format_exc()})
    finally:
        loop.close()
