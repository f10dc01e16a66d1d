"""Load on one server worker: many concurrent SSE clients, side by side with in-process.

    python benchmarks/serve_load.py                  # 200 clients, 3 calls each
    python benchmarks/serve_load.py --clients 50 --rounds 1
    python benchmarks/serve_load.py --smoke          # 10 clients (the tests keep it alive)

One `rx-agent serve serve_load:build` worker runs in its own process (uvicorn, with
httptools and uvloop when they are installed; in-memory sessions, no auth, 127.0.0.1).
Its model stands in for a real one with realistic latency: the first chunk after
``--ttft`` seconds (default 0.3), then ``--chunks`` text chunks (default 20) ``--gap``
seconds apart (0.03). Each client posts to its own session and reads the whole SSE
stream, ``--rounds`` times: on the server's own route (``/v1/sessions/{id}/messages``)
and on the OpenAI-compatible one (``/v1/chat/completions`` with ``stream: true``),
alternating, ``--passes`` times each (default 2), on the same server. The same agent
then runs in-process: the same number of concurrent ``agent.astream`` calls on one
event loop (uvloop's when it is installed, as the server's).

Printed per mode: time to the first event and to the first text delta (p50 / p99,
from sending the request), the whole call (p50 / p99), frames per second over the
run (SSE frames of all calls / wall time), and CPU time per agent event: the server
process's (from ``/proc``) or, in-process, this process's. A route's overhead per event
is its CPU per event minus the in-process figure; the OpenAI route's is compared with
the SSE route's.

The floor beside them: a bare ASGI app on the same uvicorn stack, collector tuning and
clients, that answers each request with the SSE route's own frames (captured from the
agent's warm-up call) at the model's pace: the frames before the first text delta in
one write, each delta in its own write as its chunk is due, the rest in the last. It
does no work of its own, so its CPU per event is what uvicorn, the loop and the
``send`` system calls cost for the same stream: how close any route can come to the
in-process figure.

A server's CPU time is read from ``/proc`` in clock ticks (10 ms): at ``--smoke`` size
a figure per event is a tick or two over some hundred events, so only the default
size (tens of thousands of events, about 0.3 µs per event) is a measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rx_agent import ReActAgent, RuntimeContext, SessionStore
from rx_agent.message import ChatUsage, Msg
from rx_agent.model import AsyncChatModel, ModelChunk, TextChunk, UsageChunk
from rx_agent.options import GenerateOptions

HERE = Path(__file__).resolve().parent


class LatencyModel(AsyncChatModel):
    """A model with a time to first token and a steady stream after it."""

    name = "latency"
    provider = "benchmark"

    def __init__(self, ttft: float, chunks: int, gap: float) -> None:
        self.ttft, self.chunks, self.gap = ttft, chunks, gap

    async def astream(self, messages: Sequence[Msg], tools: Sequence[dict[str, Any]],
                      options: GenerateOptions) -> AsyncIterator[ModelChunk]:
        await asyncio.sleep(self.ttft)
        for i in range(self.chunks):
            if i:
                await asyncio.sleep(self.gap)
            yield TextChunk(f"word{i} ")
        yield UsageChunk(ChatUsage(input_tokens=len(messages) * 20, output_tokens=self.chunks))


def _model() -> LatencyModel:
    return LatencyModel(float(os.environ.get("SERVE_LOAD_TTFT", "0.3")),
                        int(os.environ.get("SERVE_LOAD_CHUNKS", "20")),
                        float(os.environ.get("SERVE_LOAD_GAP", "0.03")))


def build(store: SessionStore) -> ReActAgent:
    """The served agent (`rx-agent serve serve_load:build`)."""
    return ReActAgent(name="load", model=_model(), session_store=store)


@dataclass
class Sample:
    first_event: float
    first_text: float
    total: float
    events: int


@dataclass
class Result:
    samples: list[Sample] = field(default_factory=list)
    wall: float = 0.0
    cpu: float | None = None
    """CPU seconds the serving process (or, in-process, this one) spent."""
    agent_events: int = 0
    """Agent events of all calls (the OpenAI route's frames are fewer than its events)."""

    def add(self, other: Result) -> None:
        self.samples += other.samples
        self.wall += other.wall
        self.agent_events += other.agent_events
        if other.cpu is not None:
            self.cpu = (self.cpu or 0.0) + other.cpu

    @property
    def cpu_per_event(self) -> float | None:
        if self.cpu is None or not self.agent_events:
            return None
        return self.cpu / self.agent_events


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _row(name: str, result: Result) -> str:
    s = result.samples
    fe = [x.first_event * 1000 for x in s]
    ft = [x.first_text * 1000 for x in s]
    tt = [x.total * 1000 for x in s]
    events = sum(x.events for x in s)
    per_event = result.cpu_per_event
    cpu = "n/a" if per_event is None else f"{per_event * 1e6:.0f} µs"
    return (f"| {name} | {_pct(fe, .5):.1f} / {_pct(fe, .99):.1f} ms "
            f"| {_pct(ft, .5):.0f} / {_pct(ft, .99):.0f} ms "
            f"| {_pct(tt, .5):.0f} / {_pct(tt, .99):.0f} ms "
            f"| {events / result.wall:,.0f} | {cpu} | {len(s)} |")


def _cpu_of(pid: int | None) -> float | None:
    """CPU seconds (user + system) of process ``pid`` so far, from /proc (Linux)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _http_client(host: str, port: int, session: str, rounds: int,
                       out: list[Sample]) -> None:
    """One SSE client on a raw asyncio connection: a Python HTTP client library costs
    more per line than the server does per event, and would measure itself."""
    for r in range(rounds):
        body = json.dumps({"message": f"question {r}"}).encode()
        start = time.perf_counter()
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(f"POST /v1/sessions/{session}/messages HTTP/1.1\r\nHost: {host}\r\n"
                     "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                     + body)
        status = await reader.readline()
        if b" 200 " not in status:
            raise RuntimeError(f"HTTP {status!r}: {await reader.read(2000)!r}")
        first_event = first_text = 0.0
        events = 0
        # The body is chunked, one SSE frame per chunk: frame lines arrive whole.
        async for line in reader:
            if not line.startswith(b"event: "):
                continue
            events += 1
            now = time.perf_counter() - start
            if events == 1:
                first_event = now
            if not first_text and line.startswith(b"event: text_block_delta"):
                first_text = now
        writer.close()
        out.append(Sample(first_event, first_text, time.perf_counter() - start, events))


async def _openai_client(host: str, port: int, session: str, rounds: int,
                         out: list[Sample]) -> None:
    """One client of the OpenAI-compatible route, streaming (raw, as ``_http_client``);
    each call has its own stateless context, so the agent's work matches the SSE
    route's (a session header would make the model see a longer history)."""
    for r in range(rounds):
        body = json.dumps({"model": "load", "stream": True, "messages": [
            {"role": "user", "content": f"question {r} of {session}"}]}).encode()
        start = time.perf_counter()
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
                     "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                     + body)
        status = await reader.readline()
        if b" 200 " not in status:
            raise RuntimeError(f"HTTP {status!r}: {await reader.read(2000)!r}")
        first_event = first_text = 0.0
        events = 0
        async for line in reader:
            if not line.startswith(b"data: "):
                continue
            events += 1
            now = time.perf_counter() - start
            if events == 1:
                first_event = now
            if not first_text and b'"delta":{"content":' in line:
                first_text = now
        writer.close()
        out.append(Sample(first_event, first_text, time.perf_counter() - start, events))


async def run_http(url: str, clients: int, rounds: int, *, route: str = "sse",
                   pid: int | None = None, events_per_call: float = 0.0) -> Result:
    """``route``: ``sse`` (the server's own) or ``openai`` (``/v1/chat/completions``)."""
    host, _, port_text = url.removeprefix("http://").partition(":")
    port = int(port_text)
    client = _http_client if route == "sse" else _openai_client
    result = Result()
    await client(host, port, "warm-up", 1, [])  # first-call costs (imports)
    cpu = _cpu_of(pid)
    start = time.perf_counter()
    await asyncio.gather(*(client(host, port, f"load-{i}", rounds, result.samples)
                           for i in range(clients)))
    result.wall = time.perf_counter() - start
    after = _cpu_of(pid)
    result.cpu = after - cpu if after is not None and cpu is not None else None
    result.agent_events = (sum(s.events for s in result.samples) if route == "sse"
                           else round(events_per_call * len(result.samples)))
    return result


async def run_in_process(clients: int, rounds: int) -> Result:
    from rx_agent import InMemorySessionStore

    agent = build(InMemorySessionStore())
    result = Result()

    async def one(i: int) -> None:
        ctx = RuntimeContext(session_id=f"load-{i}")
        for r in range(rounds):
            start = time.perf_counter()
            first_event = first_text = 0.0
            events = 0
            async for event in agent.astream(f"question {r}", ctx):
                events += 1
                now = time.perf_counter() - start
                if events == 1:
                    first_event = now
                if not first_text and event.type == "text_block_delta":
                    first_text = now
            result.samples.append(Sample(first_event, first_text,
                                         time.perf_counter() - start, events))

    async for _ in agent.astream("warm-up", RuntimeContext(session_id="warm-up")):
        pass
    cpu = time.process_time()
    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(clients)))
    result.wall = time.perf_counter() - start
    result.cpu = time.process_time() - cpu
    result.agent_events = sum(s.events for s in result.samples)
    return result


FRAMES_ENV = "SERVE_LOAD_FRAMES"
"""The floor server's frames: a JSON file of ``[head, [delta, ...], tail]``."""


def _frame_groups(body: str) -> list[Any]:
    """An SSE body as the floor sends it: before the first text delta, each delta, after."""
    frames = [f + "\n\n" for f in body.split("\n\n") if f.strip()]
    deltas = [i for i, f in enumerate(frames) if "\nevent: text_block_delta\n" in f]
    if not deltas:
        raise RuntimeError("the warm-up call streamed no text delta")
    first, last = deltas[0], deltas[-1]
    return ["".join(frames[:first]), frames[first:last + 1], "".join(frames[last + 1:])]


async def floor_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The bare ASGI app of the floor (see the module doc)."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    while (await receive()).get("more_body"):
        pass
    if scope["path"] == "/healthz":  # start_server's probe
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    head, deltas, tail = _FLOOR_FRAMES
    pace = _FLOOR_MODEL[0]
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"text/event-stream; charset=utf-8"),
        (b"cache-control", b"no-cache"), (b"x-run-id", b"floor")]})
    await send({"type": "http.response.body", "body": head, "more_body": True})
    for i, delta in enumerate(deltas):
        await asyncio.sleep(pace.gap if i else pace.ttft)
        await send({"type": "http.response.body", "body": delta, "more_body": True})
    await send({"type": "http.response.body", "body": tail, "more_body": False})


_FLOOR_FRAMES: list[Any] = []
_FLOOR_MODEL: list[LatencyModel] = []  # its pace: the agent's model's settings


def serve_floor(port: int) -> None:
    """Run :func:`floor_app` as ``rx-agent serve`` runs an agent (one worker, the same
    collector tuning)."""
    import uvicorn

    from rx_agent.serve._cli import _tune_collector

    head, deltas, tail = json.loads(Path(os.environ[FRAMES_ENV]).read_text())
    _FLOOR_FRAMES[:] = [head.encode(), [d.encode() for d in deltas], tail.encode()]
    _FLOOR_MODEL[:] = [_model()]
    _tune_collector()
    uvicorn.run(floor_app, host="127.0.0.1", port=port, log_level="warning")


def _capture_frames(url: str) -> list[Any]:
    """The SSE route's frames of one call (the floor replays them)."""
    import httpx

    reply = httpx.post(url + "/v1/sessions/floor-capture/messages",
                       json={"message": "question 0"},
                       headers={"accept": "text/event-stream"}, timeout=30)
    reply.raise_for_status()
    return _frame_groups(reply.text)


def _on_server_loop(main: Any) -> Any:
    """Run ``main`` on the event loop the server's uvicorn picks (uvloop when it is
    installed), so the in-process figure is measured on the same loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(env: dict[str, str], log: Any, *, floor: bool = False
                 ) -> tuple[subprocess.Popen[bytes], str]:
    """The agent's ``rx-agent serve`` worker, or with ``floor`` the bare app's."""
    import httpx

    port = _free_port()
    command = ([sys.executable, str(HERE / "serve_load.py"), "--floor-server", str(port)]
               if floor else
               [sys.executable, "-m", "rx_agent", "serve", "serve_load:build", "--port",
                str(port), "--log-level", "warning"])
    proc = subprocess.Popen(command, cwd=HERE, env=env, stdout=subprocess.DEVNULL,
                            stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait(10)
            raise RuntimeError("the floor server did not start" if floor
                               else "the server did not start")
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ttft", type=float, default=0.3)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--gap", type=float, default=0.03)
    parser.add_argument("--passes", type=int, default=2,
                        help="times each route is loaded, alternating (default 2)")
    parser.add_argument("--smoke", action="store_true", help="10 clients, 1 round, fast model")
    parser.add_argument("--url", help="load a server that is already running (HTTP only)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--floor-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor_server:
        serve_floor(args.floor_server)
        return
    if args.smoke:
        args.clients, args.rounds, args.ttft, args.chunks, args.gap = 10, 1, 0.05, 5, 0.01
        args.passes = 1
    env = {**os.environ, "SERVE_LOAD_TTFT": str(args.ttft),
           "SERVE_LOAD_CHUNKS": str(args.chunks), "SERVE_LOAD_GAP": str(args.gap)}
    os.environ.update(env)  # the in-process agent reads the same settings

    if args.url:
        print(_row("HTTP/SSE", asyncio.run(run_http(args.url, args.clients, args.rounds))))
        return
    sse, oai, bare = Result(), Result(), Result()
    with tempfile.TemporaryFile() as log, tempfile.NamedTemporaryFile(
            "w", suffix=".json") as frames:  # the server's stderr, shown if something fails
        proc, url = start_server(env, log)
        floor_proc = None
        try:
            json.dump(_capture_frames(url), frames)
            frames.flush()
            floor_proc, floor_url = start_server({**env, FRAMES_ENV: frames.name}, log,
                                                 floor=True)
            for _ in range(args.passes):  # alternating, so all see the same machine
                sse.add(asyncio.run(run_http(url, args.clients, args.rounds, pid=proc.pid)))
                per_call = sse.agent_events / len(sse.samples)
                oai.add(asyncio.run(run_http(url, args.clients, args.rounds, route="openai",
                                             pid=proc.pid, events_per_call=per_call)))
                bare.add(asyncio.run(run_http(floor_url, args.clients, args.rounds,
                                              pid=floor_proc.pid)))
        except BaseException:
            log.seek(0)
            sys.stderr.write(log.read().decode(errors="replace")[-4000:])
            raise
        finally:
            servers = [server for server in (proc, floor_proc) if server is not None]
            for server in servers:
                server.terminate()
            for server in servers:
                try:
                    server.wait(10)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait(10)
    local = _on_server_loop(run_in_process(args.clients, args.rounds))
    ideal = args.ttft + (args.chunks - 1) * args.gap
    print(f"{args.clients} concurrent clients x {args.rounds} calls ({args.passes} passes per "
          f"route); model: first chunk after {args.ttft * 1000:.0f} ms, {args.chunks} chunks "
          f"{args.gap * 1000:.0f} ms apart (a call takes >= {ideal * 1000:.0f} ms)")
    print()
    print("| mode | first event p50 / p99 | first text p50 / p99 | whole call p50 / p99 "
          "| frames/s | CPU per event | calls |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    fast = all(importlib.util.find_spec(m) for m in ("httptools", "uvloop"))
    stack = "httptools + uvloop" if fast else "pure-Python HTTP, asyncio loop"
    print(_row(f"HTTP/SSE, one uvicorn worker ({stack})", sse))
    print(_row("HTTP/OpenAI `/v1/chat/completions` stream, same worker", oai))
    print(_row("in-process `agent.astream`", local))
    print(_row("the floor: a bare ASGI app sending the same frames, same stack", bare))
    print()
    print(f"events per call: {statistics.mean(s.events for s in sse.samples):.0f} (the OpenAI "
          f"route sends {statistics.mean(s.events for s in oai.samples):.0f} frames for them, "
          f"the floor {statistics.mean(s.events for s in bare.samples):.0f})")
    base, per_sse, per_oai = local.cpu_per_event, sse.cpu_per_event, oai.cpu_per_event
    if base is not None and per_sse is not None and per_oai is not None:
        over_sse, over_oai = per_sse - base, per_oai - base
        print(f"route overhead per event (server CPU minus in-process): SSE "
              f"{over_sse * 1e6:.0f} µs, OpenAI {over_oai * 1e6:.0f} µs "
              f"({over_oai / over_sse:.2f}x); CPU per event over in-process: SSE "
              f"{per_sse / base:.2f}x, OpenAI {per_oai / base:.2f}x")
    per_bare = bare.cpu_per_event
    if base is not None and per_bare is not None:
        print(f"the floor's CPU per event over in-process: {per_bare / base:.2f}x (a route "
              f"that did nothing of its own would be at {(per_bare + base) / base:.2f}x: "
              "the agent's events plus the floor's stream)")
    if args.json:
        figures: dict[str, Any] = {}
        for name, result in (("sse", sse), ("openai", oai), ("in_process", local),
                             ("floor", bare)):
            first = [x.first_event * 1000 for x in result.samples]
            figures[name] = {"first_event_p50_ms": _pct(first, 0.5),
                             "first_event_p99_ms": _pct(first, 0.99),
                             "cpu_per_event_us": (result.cpu_per_event or 0.0) * 1e6}
        Path(args.json).write_text(json.dumps(figures, indent=2))

if __name__ == "__main__":
    main()
