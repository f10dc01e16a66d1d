"""Without an SDK the middleware costs nothing; the global provider is read lazily."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
import reactivex
from opentelemetry import trace

from rx_agent import (
    ActingInput,
    AgentInput,
    GenerateOptions,
    ModelCallInput,
    OtelTracingMiddleware,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    ToolUseBlock,
)


def hooks_and_inputs(agent: ReActAgent) -> list[tuple[str, Any]]:
    return [
        ("on_agent", AgentInput(())),
        ("on_model_call", ModelCallInput((), (), GenerateOptions(), agent.model)),
        ("on_acting", ActingInput((ToolUseBlock("c1", "x", {}),))),
    ]


@pytest.mark.parametrize(
    "provider",
    [trace.NoOpTracerProvider(), trace.ProxyTracerProvider()],
    ids=["noop", "proxy"],
)
def test_a_placeholder_provider_returns_next_untouched(
    provider: trace.TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another test of this process may have set a global SDK provider (which a proxy
    # resolves to): this one checks the state before any is set.
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    mw = OtelTracingMiddleware(provider)
    agent = ReActAgent(name="a", model=ScriptedModel(["ok"]))
    ctx = RuntimeContext()
    for hook_name, inp in hooks_and_inputs(agent):
        sentinel = reactivex.empty()
        received: list[Any] = []

        def next_(value: Any, sentinel: Any = sentinel, received: list[Any] = received) -> Any:
            received.append(value)
            return sentinel

        out = getattr(mw, hook_name)(agent, ctx, inp, next_)
        assert out is sentinel, hook_name  # no wrapper, no operator, no per-event work
        assert received == [inp]
    assert ctx.attributes == {}


def test_a_noop_provider_still_runs_the_agent() -> None:
    agent = ReActAgent(name="a", model=ScriptedModel(["ok"]),
                       middlewares=[OtelTracingMiddleware(trace.NoOpTracerProvider())])
    assert agent.call_sync("hi").text == "ok"


_SCRIPT = textwrap.dedent(
    """
    import json
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from rx_agent import OtelTracingMiddleware, ReActAgent, ScriptedModel

    class Spy(OtelTracingMiddleware):
        # Counts how often a hook wrapped its stream (i.e. did per-event work).
        wrapped = 0

        def on_model_call(self, agent, ctx, input, next):
            out = super().on_model_call(agent, ctx, input, next)
            if self._tracer() is not None:
                Spy.wrapped += 1
            return out

    # Built before any SDK exists, like an app that wires tracing up later.
    agent = ReActAgent(name="early", model=ScriptedModel(["one", "two"]),
                       middlewares=[Spy()])
    first = agent.call_sync("hi").text
    wrapped_before = Spy.wrapped

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    second = agent.call_sync("again").text
    print(json.dumps({
        "answers": [first, second],
        "wrapped_before": wrapped_before,
        "spans": sorted(s.name for s in exporter.get_finished_spans()),
    }))
    """
)


def test_global_provider_is_resolved_when_a_hook_runs() -> None:
    # A fresh interpreter: the global provider can be set only once per process.
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["answers"] == ["one", "two"]
    assert result["wrapped_before"] == 0
    assert result["spans"] == ["chat scripted", "invoke_agent early"]


def test_repr_names_the_provider() -> None:
    assert repr(OtelTracingMiddleware()) == (
        "OtelTracingMiddleware(tracer_provider=global, record_content=False)"
    )
