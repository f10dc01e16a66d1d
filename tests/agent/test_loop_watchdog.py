"""The loop-lag watchdog: a blocking call in an async tool or a hook is reported with
the tool's or the middleware's name; off unless a threshold is set."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest
from conftest import make_agent

from rx_agent import MiddlewareBase, ReActAgent, ScriptedModel, Toolkit, ToolUseBlock, tool

# A 0.5 s stall against a 0.1 s threshold: found even on a loaded machine.
BLOCK, THRESHOLD = 0.5, 0.1
HERE = __file__


@tool
async def slow_lookup(city: str) -> str:
    """Look a city up (blocking, by mistake)."""
    time.sleep(BLOCK)
    return f"{city}: found"


@tool
def threaded_lookup(city: str) -> str:
    """A plain def tool: it runs on a worker thread, so its sleep blocks nobody."""
    time.sleep(BLOCK)
    return f"{city}: found"


class BlockingHook(MiddlewareBase):
    def on_model_call(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        time.sleep(BLOCK)
        return next(input)


class BlockingGenerator(MiddlewareBase):
    async def on_acting(self, agent, ctx, input, next):  # type: ignore[no-untyped-def, override]
        async for event in next(input):
            yield event
        time.sleep(BLOCK)


def _lookup_model() -> ScriptedModel:
    return ScriptedModel([[ToolUseBlock("c1", "lookup", {"city": "Paris"})], "done"])


def _agent(tool_fn: Any, **kwargs: Any) -> ReActAgent:
    toolkit = Toolkit()
    toolkit.register_tool(tool_fn, name="lookup")
    return make_agent(_lookup_model(), toolkit=toolkit, **kwargs)


def _reports(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "rx_agent" and "the event loop was blocked" in r.getMessage()]


async def _wait_for_report(caplog: pytest.LogCaptureFixture, needle: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [r for r in _reports(caplog) if needle in r]
        if found:
            return found[0]
        await asyncio.sleep(0.02)
    raise AssertionError(f"no report naming {needle!r}; got {_reports(caplog)}")


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("RX_AGENT_LOOP_LAG", raising=False)
    caplog.set_level(logging.WARNING, logger="rx_agent")


async def test_a_blocking_async_tool_is_named(caplog: pytest.LogCaptureFixture) -> None:
    agent = _agent(slow_lookup, loop_lag_threshold=THRESHOLD)
    assert (await asyncio.wait_for(agent.acall("hi"), 10)).text == "done"
    report = await _wait_for_report(caplog, "by tool 'lookup'")
    assert f"(slow_lookup at {HERE}:" in report
    assert "(threshold 0.10 s)" in report
    assert "await an async form (asyncio.sleep, an async client)" in report
    seconds = float(report.split("blocked for ")[1].split(" s")[0])
    assert THRESHOLD < seconds <= BLOCK + 1


async def test_a_blocking_hook_is_named(caplog: pytest.LogCaptureFixture) -> None:
    agent = make_agent(ScriptedModel(["done"]), middlewares=[BlockingHook()],
                       loop_lag_threshold=THRESHOLD)
    await asyncio.wait_for(agent.acall("hi"), 10)
    report = await _wait_for_report(caplog, "by middleware BlockingHook.on_model_call()")
    assert f"(BlockingHook.on_model_call at {HERE}:" in report


async def test_a_blocking_generator_hook_is_named(caplog: pytest.LogCaptureFixture) -> None:
    agent = _agent(threaded_lookup, middlewares=[BlockingGenerator()],
                   loop_lag_threshold=THRESHOLD)
    await asyncio.wait_for(agent.acall("hi"), 10)
    await _wait_for_report(caplog, "by middleware BlockingGenerator.on_acting()")


def test_the_runtimes_own_loop_is_watched_too(caplog: pytest.LogCaptureFixture) -> None:
    agent = ReActAgent.builder().name("a").model(_lookup_model()).toolkit(
        _toolkit(slow_lookup)).loop_lag_threshold(THRESHOLD).build()
    assert agent.call_sync("hi").text == "done"
    asyncio.run(_wait_for_report(caplog, "by tool 'lookup'"))


def _toolkit(fn: Any) -> Toolkit:
    toolkit = Toolkit()
    toolkit.register_tool(fn, name="lookup")
    return toolkit


async def test_a_plain_def_tool_blocks_no_loop(caplog: pytest.LogCaptureFixture) -> None:
    agent = _agent(threaded_lookup, loop_lag_threshold=THRESHOLD)
    await asyncio.wait_for(agent.acall("hi"), 10)
    await asyncio.sleep(0.2)
    assert not [r for r in _reports(caplog) if "lookup" in r]


def _watchdogs() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "rx-agent-watchdog"}


async def test_it_is_off_by_default(caplog: pytest.LogCaptureFixture) -> None:
    before = _watchdogs()
    agent = _agent(slow_lookup)
    assert agent.config.loop_lag is None
    await asyncio.wait_for(agent.acall("hi"), 10)
    await asyncio.sleep(0.2)
    assert not [r for r in _reports(caplog) if "lookup" in r]
    assert _watchdogs() - before == set()  # no thread was started


async def test_the_environment_variable_turns_it_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RX_AGENT_LOOP_LAG", "0.1")
    agent = _agent(slow_lookup)
    assert agent.config.loop_lag == 0.1
    await asyncio.wait_for(agent.acall("hi"), 10)
    await _wait_for_report(caplog, "by tool 'lookup'")


def test_the_agent_setting_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RX_AGENT_LOOP_LAG", "0.1")
    assert _agent(slow_lookup, loop_lag_threshold=0).config.loop_lag is None
    assert _agent(slow_lookup, loop_lag_threshold=2).config.loop_lag == 2.0


@pytest.mark.parametrize("raw", ["fast", "-1", "inf"])
def test_a_bad_environment_value_fails_the_build_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("RX_AGENT_LOOP_LAG", raw)
    with pytest.raises(ValueError) as info:
        _agent(slow_lookup)
    assert str(info.value) == (
        f"RX_AGENT_LOOP_LAG must be a number of seconds (0 turns the watchdog off), got {raw!r}"
    )


def test_a_bad_setting_is_refused() -> None:
    with pytest.raises(ValueError, match=r"loop_lag_threshold must be finite and >= 0"):
        _agent(slow_lookup, loop_lag_threshold=-1)
