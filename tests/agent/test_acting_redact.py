"""``operators.redact`` at ``on_acting`` protects everything that matters (issue #24):
the secret a tool returned is in no stored message, no later model request, no span and
no SSE event of a reply served over real HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rx_agent import (
    ExtensionPoint,
    MiddlewareBase,
    OtelTracingMiddleware,
    ReActAgent,
    ScriptedModel,
    SessionKey,
    Toolkit,
    ToolUseBlock,
    tool,
)
from rx_agent import operators as aops
from rx_agent.serve import create_app

SECRETS = ("sk-proj-abcdefghijklmnop1234", "bob@example.com")


@tool
def lookup(who: str) -> str:
    """The account of ``who``."""
    return f"{who}: key {SECRETS[0]}, mail {SECRETS[1]}"


class RedactTools(MiddlewareBase):
    redact = aops.redact()

    def active_points(self) -> set[ExtensionPoint]:
        return {ExtensionPoint.ON_ACTING}

    def on_acting(self, agent: Any, ctx: Any, input: Any, next: Any) -> Any:
        return next(input).pipe(self.redact)


@pytest.fixture
def served() -> Iterator[tuple[str, ReActAgent, ScriptedModel, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel([[ToolUseBlock("c1", "lookup", {"who": "bob"})], "Done."])
    agent = ReActAgent(name="assistant", model=model, toolkit=Toolkit([lookup]),
                       middlewares=[OtelTracingMiddleware(provider, record_content=True),
                                    RedactTools()])
    config = uvicorn.Config(create_app(agent), host="127.0.0.1", port=0, log_level="warning",
                            lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", agent, model, exporter
    finally:
        server.should_exit = True
        thread.join(10)


def _clean(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked into {where}"


def test_redact_at_on_acting_keeps_the_secret_out_of_everything(
    served: tuple[str, ReActAgent, ScriptedModel, InMemorySpanExporter],
) -> None:
    url, agent, model, exporter = served
    with httpx.stream("POST", url + "/v1/sessions/s1/messages", json={"message": "bob?"},
                      timeout=10) as resp:
        assert resp.status_code == 200
        body = "".join(resp.iter_text())
    assert "tool_result_text_delta" in body and "[REDACTED]" in body
    _clean(body, "the SSE stream")

    state = agent.session_store.load(SessionKey("__anon__", "s1"))
    assert state is not None
    (result,) = [b for m in state.context for b in m.tool_results]
    assert result.text == "bob: key [REDACTED], mail [REDACTED]"
    for msg in state.context:
        _clean(msg.model_dump_json(), "the stored session")
    _clean(httpx.get(url + "/v1/sessions/s1").text, "the session served back")

    assert len(model.calls) == 2
    for msg in model.calls[1].messages:
        _clean(msg.model_dump_json(), "the next model request")

    spans = exporter.get_finished_spans()
    assert any(s.name.startswith("execute_tool") for s in spans)
    for span in spans:
        _clean(repr(dict(span.attributes or {})), f"span {span.name!r}")
        for event in span.events:
            _clean(repr(dict(event.attributes or {})), f"an event of span {span.name!r}")
