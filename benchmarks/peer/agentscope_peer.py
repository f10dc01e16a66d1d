#!/usr/bin/env python3
"""Peer benchmark: the same agent workloads measured on AgentScope 2.x.

Run this file with the Python of a virtual environment that has ``agentscope``
installed (see ``setup_peer.py`` beside it); it must not import ``rx_agent``.
It prints exactly one JSON object on stdout and nothing else (AgentScope's own
logging goes to stderr and is turned down to warnings).

Workloads:

``stream``
    One ``Agent.reply_stream`` call whose (offline, fake) streaming chat model
    emits ``--events`` text deltas. No tools. ``--n-mw`` middlewares each take
    part in ``on_reply``, ``on_reasoning`` and ``on_model_call``. The main
    figure is wall time per streamed text delta.

``rounds``
    One reply in which the fake model asks for one call of a trivial tool per
    model call, ``--rounds`` times, and then answers with a short text. The
    middlewares additionally take part in ``on_acting``. The main figure is
    wall time per tool-call round.

Middleware flavours:

``pass``
    Pure delegation: each hook hands back the object that ``next_handler()``
    returns (the downstream async generator or the model-call awaitable)
    without touching a single event. Whatever per-layer cost remains is
    AgentScope's own onion machinery.
``op``
    One trivial per-event operation: each generator hook iterates the
    downstream events and re-yields ``identity(event)`` -- the equivalent of
    ``map(lambda e: e)``. ``on_model_call`` wraps the streamed model chunks the
    same way.
``relay``
    The form that AgentScope's ``MiddlewareBase`` docstring shows
    (``async for event in next_handler(): yield event``): ``op`` without the
    identity call. ``on_model_call`` simply awaits and returns. Not part of
    the standard matrix; available for reference.

No network is ever used: the chat model is a local fake, and outbound socket
connections are refused for the whole process as a safety net.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import socket
import statistics
import sys
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeVar


def _refuse_network() -> None:
    """Make every outbound non-local socket connection fail loudly.

    Unix sockets (used by asyncio's self-pipe) keep working; anything else
    raises, so an accidental network call can't silently skew the figures.
    """
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex

    def _check(sock: socket.socket) -> None:
        if sock.family != getattr(socket, "AF_UNIX", object()):
            raise OSError("agentscope_peer: network access is disabled in this benchmark")

    def connect(self: socket.socket, address: Any) -> None:
        _check(self)
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check(self)
        return original_connect_ex(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]


# Installed before AgentScope (and its dependencies) are imported. The env vars
# keep optional telemetry SDKs off should anything pull one in.
_refuse_network()
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import agentscope  # noqa: E402
from agentscope.agent import Agent, ReActConfig  # noqa: E402
from agentscope.credential import CredentialBase  # noqa: E402
from agentscope.event import (  # noqa: E402
    ReplyEndEvent,
    TextBlockDeltaEvent,
    ToolResultEndEvent,
)
from agentscope.formatter import OpenAIChatFormatter  # noqa: E402
from agentscope.message import Msg, TextBlock, ToolCallBlock, UserMsg  # noqa: E402
from agentscope.middleware import MiddlewareBase  # noqa: E402
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage  # noqa: E402
from agentscope.permission import PermissionBehavior, PermissionDecision  # noqa: E402
from agentscope.tool import FunctionTool, ToolChoice, Toolkit  # noqa: E402
from pydantic import BaseModel  # noqa: E402

WORKLOADS: Final = ("stream", "rounds")
FLAVOURS: Final = ("pass", "op", "relay")
TOOL_NAME: Final = "echo"
TEXT_DELTA: Final = "tok "
FINAL_ANSWER_DELTAS: Final = ("All ", "rounds ", "done.")
DEFAULT_REPEATS: Final = {"stream": 5, "rounds": 20}
#: The middleware hooks each benchmark middleware takes part in, per workload.
HOOKS: Final = {
    "stream": ["on_reply", "on_reasoning", "on_model_call"],
    "rounds": ["on_reply", "on_reasoning", "on_model_call", "on_acting"],
}

T = TypeVar("T")
EventStream = AsyncGenerator[Any, None]
NextHandler = Callable[..., EventStream]
ModelResult = ChatResponse | AsyncGenerator[ChatResponse, None]


# ---------------------------------------------------------------------------
# The offline fake streaming chat model
# ---------------------------------------------------------------------------


class OfflineCredential(CredentialBase):
    """A credential that carries nothing: the fake model never authenticates."""

    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return FakeStreamingChatModel


class FakeStreamingChatModel(ChatModelBase):
    """A streaming chat model that answers from a script, without any I/O.

    It implements ``_call_api`` like AgentScope's provider adapters do: it
    returns an async generator of *delta* ``ChatResponse`` chunks
    (``is_last=False``), and ``ChatModelBase.__call__`` accumulates them and
    appends the final ``is_last=True`` response, exactly as for a real
    provider. Each chunk is built when it is yielded, as an adapter would
    build it from a server-sent event.

    Script: while the context holds fewer than ``tool_rounds`` tool results,
    answer with one call of the ``echo`` tool; after that answer with text --
    ``text_deltas`` deltas when there are no tool rounds (``stream``), or a
    short three-delta answer otherwise (``rounds``).
    """

    class Parameters(BaseModel):
        """The fake model has no tunable parameters."""

    def __init__(self, *, text_deltas: int, tool_rounds: int) -> None:
        super().__init__(
            credential=OfflineCredential(),
            model="fake-streaming-model",
            parameters=self.Parameters(),
            stream=True,
            max_retries=0,
            retry_delay=0.0,
            # Large enough that context compression never triggers.
            context_size=10_000_000,
        )
        # The agent reads ``model.formatter`` to learn which input media types
        # the model accepts. The fake never formats messages for an API (a real
        # adapter would, once per model call; see the README's caveats).
        self.formatter = OpenAIChatFormatter()
        self.text_deltas = text_deltas
        self.tool_rounds = tool_rounds
        self.calls = 0

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[ChatResponse, None]:
        self.calls += 1
        done = sum(len(msg.get_content_blocks("tool_result")) for msg in messages)
        if done < self.tool_rounds:
            return self._tool_call_stream(done)
        if self.tool_rounds:
            return self._text_stream(FINAL_ANSWER_DELTAS)
        return self._text_stream(TEXT_DELTA for _ in range(self.text_deltas))

    async def _text_stream(self, deltas: Iterable[str]) -> AsyncGenerator[ChatResponse, None]:
        """Stream one text block, one delta per chunk, then a usage chunk."""
        block_id = uuid.uuid4().hex
        count = 0
        for delta in deltas:
            count += 1
            yield ChatResponse(content=[TextBlock(text=delta, id=block_id)], is_last=False)
        yield self._usage_chunk(count)

    async def _tool_call_stream(self, index: int) -> AsyncGenerator[ChatResponse, None]:
        """Stream a single complete ``echo`` tool call, then a usage chunk."""
        call = ToolCallBlock(
            id=f"call_{uuid.uuid4().hex}",
            name=TOOL_NAME,
            input=json.dumps({"value": index}),
        )
        yield ChatResponse(content=[call], is_last=False)
        yield self._usage_chunk(1)

    @staticmethod
    def _usage_chunk(output_tokens: int) -> ChatResponse:
        """A content-less trailing chunk carrying usage, like OpenAI's."""
        return ChatResponse(
            content=[],
            is_last=False,
            usage=ChatUsage(input_tokens=16, output_tokens=output_tokens, time=0.0),
        )


def echo(value: int) -> str:
    """Return the given value as text.

    Args:
        value (`int`):
            The value to echo back.
    """
    return str(value)


def make_toolkit() -> Toolkit:
    """A toolkit with the trivial ``echo`` tool, pre-allowed (no user prompt)."""
    tool = FunctionTool(
        echo,
        name=TOOL_NAME,
        permission=PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message="The benchmark tool is always allowed.",
        ),
    )
    return Toolkit(tools=[tool])


# ---------------------------------------------------------------------------
# Middlewares
# ---------------------------------------------------------------------------


def identity(item: T) -> T:
    """The per-event operation of the ``op`` flavour: ``lambda e: e``."""
    return item


async def map_stream(source: AsyncGenerator[T, None]) -> AsyncGenerator[T, None]:
    """Re-yield every item of ``source`` through ``identity``."""
    async for item in source:
        yield identity(item)


class PassMiddleware(MiddlewareBase):
    """Pure delegation: return whatever ``next_handler()`` returns.

    The hooks are plain methods returning the downstream async generator (or
    the downstream model-call awaitable), which AgentScope iterates (awaits)
    directly: this layer adds no generator and no per-event work of its own.
    """

    def on_reply(  # type: ignore[override]
        self, agent: Agent, input_kwargs: dict[str, Any], next_handler: NextHandler
    ) -> EventStream:
        return next_handler()

    def on_reasoning(  # type: ignore[override]
        self, agent: Agent, input_kwargs: dict[str, Any], next_handler: NextHandler
    ) -> EventStream:
        return next_handler()

    def on_model_call(  # type: ignore[override]
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[ModelResult]],
    ) -> Awaitable[ModelResult]:
        return next_handler()


class PassActingMiddleware(PassMiddleware):
    """``PassMiddleware`` that also takes part in ``on_acting``."""

    def on_acting(  # type: ignore[override]
        self, agent: Agent, input_kwargs: dict[str, Any], next_handler: NextHandler
    ) -> EventStream:
        return next_handler()


class OpMiddleware(MiddlewareBase):
    """One trivial per-event operation (``map(lambda e: e)``) in every hook."""

    async def on_reply(
        self, agent: Agent, input_kwargs: dict[str, Any], next_handler: NextHandler
    ) -> EventStream:
        async for event in next_handler():
            yield identity(event)

    async def on_reasoning(
        self, agent: Agent, input_kwargs: dict[str, Any], next_handler: NextHandler
    ) -> EventStream:
        async for event in next_handler():
            yield identity(event)

    async def on_model_call(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[ModelResult]],
    ) -> ModelResult:
        result = await next_handler()
        if isinstance(result, ChatResponse):
            return identity(result)
        return map_stream(result)


class OpActingMiddleware(OpMiddleware):
    """``OpMiddleware`` that also takes part in ``on_acting``."""

    async def on_acting(
        self, agent: Agent, input_kwargs: dict[str, Any], next_handler: NextHandler
    ) -> EventStream:
        async for chunk in next_handler():
            yield identity(chunk)


class RelayMiddleware(MiddlewareBase):
    """The idiom from ``MiddlewareBase``'s docstring: re-yield each event."""

    async def on_reply(
        self, agent: Agent, input_kwargs: dict[str, Any], next_handler: NextHandler
    ) -> EventStream:
        async for event in next_handler():
            yield event

    async def on_reasoning(
        self, agent: Agent, input_kwargs: dict[str, Any], next_handler: NextHandler
    ) -> EventStream:
        async for event in next_handler():
            yield event

    async def on_model_call(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[ModelResult]],
    ) -> ModelResult:
        return await next_handler()


class RelayActingMiddleware(RelayMiddleware):
    """``RelayMiddleware`` that also takes part in ``on_acting``."""

    async def on_acting(
        self, agent: Agent, input_kwargs: dict[str, Any], next_handler: NextHandler
    ) -> EventStream:
        async for chunk in next_handler():
            yield chunk


MIDDLEWARES: Final[dict[tuple[str, bool], type[MiddlewareBase]]] = {
    ("pass", False): PassMiddleware,
    ("pass", True): PassActingMiddleware,
    ("op", False): OpMiddleware,
    ("op", True): OpActingMiddleware,
    ("relay", False): RelayMiddleware,
    ("relay", True): RelayActingMiddleware,
}


def make_middlewares(flavour: str, count: int, *, acting: bool) -> list[MiddlewareBase]:
    """``count`` independent middleware instances of the given flavour."""
    cls = MIDDLEWARES[(flavour, acting)]
    return [cls() for _ in range(count)]


# ---------------------------------------------------------------------------
# Running one reply
# ---------------------------------------------------------------------------


def freeze_import_heap() -> None:
    """Collect garbage once, then freeze every surviving object.

    AgentScope's import graph leaves a large heap behind (a full collection of
    it takes ~0.1 s on the reference machine). Freezing it, once, before any
    timing, moves those long-lived objects out of the collector's reach, so an
    automatic full collection that fires inside a timed region costs what the
    benchmark allocated, not what the imports left. The collector itself stays
    enabled, and everything created later (agents, events) is collected as
    usual.
    """
    gc.collect()
    gc.freeze()


@dataclass
class RunResult:
    """What one timed reply produced."""

    seconds: float
    events: int = 0
    text_deltas: int = 0
    tool_results: int = 0
    reply_ends: int = 0
    model_calls: int = 0


def make_agent(config: Config) -> tuple[Agent, FakeStreamingChatModel]:
    """A fresh agent (fresh state and context) for one run."""
    rounds = config.workload == "rounds"
    model = FakeStreamingChatModel(
        text_deltas=config.events,
        tool_rounds=config.rounds if rounds else 0,
    )
    agent = Agent(
        name="bench",
        system_prompt="You are a benchmark agent.",
        model=model,
        toolkit=make_toolkit() if rounds else None,
        middlewares=make_middlewares(config.flavour, config.n_mw, acting=rounds),
        # The loop must not stop before the scripted rounds are done.
        react_config=ReActConfig(max_iters=max(50, config.rounds + 5)),
    )
    return agent, model


async def run_once(config: Config) -> RunResult:
    """Build a fresh agent, then time one complete streamed reply."""
    agent, model = make_agent(config)
    prompt = UserMsg(name="user", content="Go.")
    events = text_deltas = tool_results = reply_ends = 0
    gc.collect()

    start = time.perf_counter()
    async for event in agent.reply_stream(prompt):
        events += 1
        if isinstance(event, TextBlockDeltaEvent):
            text_deltas += 1
        elif isinstance(event, ToolResultEndEvent):
            tool_results += 1
        elif isinstance(event, ReplyEndEvent):
            reply_ends += 1
    seconds = time.perf_counter() - start

    return RunResult(
        seconds=seconds,
        events=events,
        text_deltas=text_deltas,
        tool_results=tool_results,
        reply_ends=reply_ends,
        model_calls=model.calls,
    )


async def model_only_seconds(events: int) -> float:
    """Time to drain the fake model alone (``ChatModelBase.__call__``), no agent.

    This is the floor the agent figures sit on: chunk construction plus
    AgentScope's stream accumulation, without the agent loop or middlewares.
    """
    model = FakeStreamingChatModel(text_deltas=events, tool_rounds=0)
    prompt = [UserMsg(name="user", content="Go.")]
    gc.collect()
    start = time.perf_counter()
    result = await model(messages=prompt)
    assert not isinstance(result, ChatResponse)
    async for _chunk in result:
        pass
    return time.perf_counter() - start


# ---------------------------------------------------------------------------
# CLI and reporting
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """The parsed command line."""

    workload: str
    n_mw: int
    flavour: str
    events: int
    rounds: int
    repeats: int
    warmup: int


def parse_args(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=WORKLOADS, default="stream")
    parser.add_argument("--n-mw", type=int, default=0, help="number of middlewares")
    parser.add_argument("--flavour", choices=FLAVOURS, default="pass")
    parser.add_argument("--events", type=int, default=10_000, help="text deltas (stream)")
    parser.add_argument("--rounds", type=int, default=10, help="tool-call rounds (rounds)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help=f"timed runs (default: {DEFAULT_REPEATS['stream']} for stream, "
        f"{DEFAULT_REPEATS['rounds']} for rounds, whose replies are short)",
    )
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs before timing")
    args = parser.parse_args(argv)
    for name in ("n_mw", "events", "rounds", "warmup"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.repeats is None:
        args.repeats = DEFAULT_REPEATS[args.workload]
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.workload == "stream" and args.events < 1:
        parser.error("--events must be >= 1 for the stream workload")
    if args.workload == "rounds" and args.rounds < 1:
        parser.error("--rounds must be >= 1 for the rounds workload")
    return Config(
        workload=args.workload,
        n_mw=args.n_mw,
        flavour=args.flavour,
        events=args.events,
        rounds=args.rounds,
        repeats=args.repeats,
        warmup=args.warmup,
    )


def check_run(config: Config, run: RunResult) -> None:
    """Fail loudly if the reply did not do the work being measured."""
    if run.reply_ends != 1:
        raise RuntimeError(f"expected one ReplyEndEvent, got {run.reply_ends}")
    if config.workload == "stream":
        if run.text_deltas != config.events or run.model_calls != 1:
            raise RuntimeError(
                f"expected {config.events} text deltas in 1 model call, got "
                f"{run.text_deltas} in {run.model_calls}"
            )
    elif run.tool_results != config.rounds or run.model_calls != config.rounds + 1:
        raise RuntimeError(
            f"expected {config.rounds} tool results over {config.rounds + 1} model "
            f"calls, got {run.tool_results} over {run.model_calls}"
        )


async def measure(config: Config) -> dict[str, Any]:
    """Warm up, run the timed repeats and build the report."""
    for _ in range(config.warmup):
        check_run(config, await run_once(config))
    runs = []
    for _ in range(config.repeats):
        run = await run_once(config)
        check_run(config, run)
        runs.append(run)

    seconds = [run.seconds for run in runs]
    median = statistics.median(seconds)
    last = runs[-1]
    report: dict[str, Any] = {
        "peer": "agentscope",
        "agentscope_version": agentscope.__version__,
        "python": platform.python_version(),
        "workload": config.workload,
        "n_mw": config.n_mw,
        "flavour": config.flavour,
        "hooks": HOOKS[config.workload],
        "events": config.events if config.workload == "stream" else None,
        "rounds": config.rounds if config.workload == "rounds" else None,
        "repeats": config.repeats,
        "warmup": config.warmup,
        "seconds": seconds,
        "seconds_median": median,
        "seconds_min": min(seconds),
        # Everything the consumer of ``Agent.reply_stream`` received per run.
        "events_total": last.events,
        "text_deltas": last.text_deltas,
        "tool_results": last.tool_results,
        "model_calls": last.model_calls,
        "us_per_event": None,
        "us_per_event_min": None,
        "model_only_us_per_event": None,
        "us_per_round": None,
        "us_per_round_min": None,
    }
    if config.workload == "stream":
        report["us_per_event"] = median / config.events * 1e6
        report["us_per_event_min"] = min(seconds) / config.events * 1e6
        model_only = [await model_only_seconds(config.events) for _ in range(config.repeats)]
        report["model_only_us_per_event"] = statistics.median(model_only) / config.events * 1e6
    else:
        report["us_per_round"] = median / config.rounds * 1e6
        report["us_per_round_min"] = min(seconds) / config.rounds * 1e6
    return report


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    # AgentScope logs INFO lines (to stderr) by default; keep them out of the
    # timed region.
    agentscope.setup_logger("WARNING")
    freeze_import_heap()
    report = asyncio.run(measure(config))
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
