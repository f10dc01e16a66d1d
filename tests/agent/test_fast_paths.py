"""The runtime's shortcuts give what the general path gives (issue #18).

* With no ``on_model_call`` layer the chunk converter builds the round's message
  itself; with a layer the accumulator rebuilds it from the events that leave the
  chain. Both must store the same message and emit the same events.
* ``acall`` reads only the result: the runtime drops its other events before the
  caller's observer, yet a result subclass from an ``on_agent`` middleware still
  counts.
* Input text is checked in one walk; a lone surrogate anywhere is still refused and
  named.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import reactivex.operators as ops
from conftest import add_toolkit, make_agent

from rx_agent import (
    AgentEvent,
    AgentResultEvent,
    AgentState,
    ExtensionPoint,
    MiddlewareBase,
    Msg,
    Role,
    RuntimeContext,
    ScriptedModel,
    SessionKey,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from rx_agent._text import is_clean


class _PassModelCall(MiddlewareBase):
    """A real on_model_call layer that changes nothing (the general path)."""

    def on_model_call(self, ctx: Any, inp: Any, next: Any) -> Any:
        return next(inp)


def _script() -> list[Any]:
    return [
        [ThinkingBlock(thinking="plan "), ThinkingBlock(thinking="more"), "Let me add. ",
         ToolUseBlock(id="c1", name="add", input={"a": 1, "b": 2}),
         ToolUseBlock(id="c2", name="add", input={"a": 3, "b": 4})],
        ["Sums: ", ThinkingBlock(thinking="check"), "3 and 7", "."],
    ]


def _shape(msg: Msg) -> tuple[Any, ...]:
    """A message without its ids and timestamps."""
    return (msg.role, msg.name, msg.generate_reason,
            msg.usage.model_dump() if msg.usage else None,
            [b.model_dump() for b in msg.content])


def _event_shape(event: AgentEvent) -> dict[str, Any]:
    data = event.model_dump()
    for key in ("id", "created_at", "reply_id"):
        data.pop(key, None)
    if isinstance(event, AgentResultEvent):
        data["result"] = _shape(event.result)
    return data


@pytest.mark.parametrize("delay", [0.0, 0.001])
async def test_the_converter_builds_what_the_accumulator_builds(delay: float) -> None:
    results = {}
    for label, middlewares in (("direct", []), ("layered", [_PassModelCall()])):
        agent = make_agent(ScriptedModel(_script(), delay=delay), toolkit=add_toolkit(),
                           middlewares=middlewares)
        assert agent.plan.has_layers(ExtensionPoint.ON_MODEL_CALL) is bool(middlewares)
        ctx = RuntimeContext(session_id="s")
        events = await agent.stream("add things", ctx).pipe(ops.to_list())
        state = agent.session_store.load(SessionKey("__anon__", "s"))
        assert isinstance(state, AgentState)
        results[label] = ([_shape(m) for m in state.context], [_event_shape(e) for e in events])
    assert results["direct"] == results["layered"]
    context = results["direct"][0]
    first_reply = context[1][4]
    assert [b["type"] for b in first_reply] == ["thinking", "text", "tool_use", "tool_use"]
    assert first_reply[0]["thinking"] == "plan more"
    assert first_reply[2]["input"] == {"a": 1, "b": 2}
    last = context[-1][4]
    assert [(b["type"], b.get("text") or b.get("thinking")) for b in last] == [
        ("text", "Sums: "), ("thinking", "check"), ("text", "3 and 7.")]


async def test_a_model_failure_after_chunks_leaves_the_partial_round_out() -> None:
    # The converter-built message must not reach the context when the round fails.
    boom = RuntimeError("stream broke")
    agent = make_agent(ScriptedModel([["Hel", "lo", boom]]), max_retries=1)
    ctx = RuntimeContext(session_id="s")
    with pytest.raises(RuntimeError, match="stream broke"):
        await agent.acall("hi", ctx)
    state = agent.session_store.load(SessionKey("__anon__", "s"))
    assert isinstance(state, AgentState)
    assert [m.role for m in state.context] == [Role.USER]


class _Tagged(AgentResultEvent):
    pass


class _RetagResult(MiddlewareBase):
    """An on_agent layer that re-emits the result as a subclass."""

    def on_agent(self, ctx: Any, inp: Any, next: Any) -> Any:
        def retag(event: AgentEvent) -> AgentEvent:
            if type(event) is AgentResultEvent:
                return _Tagged.make(event.source, result=event.result)
            return event

        return next(inp).pipe(ops.map(retag))


async def test_acall_reads_a_result_subclass_from_an_on_agent_layer() -> None:
    agent = make_agent(ScriptedModel([["fine"]]), middlewares=[_RetagResult()])
    msg = await agent.acall("hi")
    assert msg.text == "fine"


async def test_acall_and_stream_give_the_same_result_on_the_quiet_path() -> None:
    agent = make_agent(ScriptedModel([["a", "b"], ["a", "b"]]))
    via_acall = await agent.acall("hi", RuntimeContext(session_id="one"))
    events = await agent.stream("hi", RuntimeContext(session_id="two")).pipe(ops.to_list())
    result = next(e for e in events if isinstance(e, AgentResultEvent)).result
    assert _shape(via_acall) == _shape(result)
    await asyncio.sleep(0)


@pytest.mark.parametrize("value", [
    "\ud800",
    ["ok", "\udc00"],
    ("ok", ["deep", {"k": "\ud800"}]),
    {"\ud800": 1},
    {"k": ["x", "\ud800"]},
    Msg(role=Role.USER, content=[TextBlock(text="ok")], metadata={"note": "\ud800"}),
])
def test_is_clean_finds_a_lone_surrogate_anywhere(value: Any) -> None:
    assert is_clean(value) is False


@pytest.mark.parametrize("value", [
    "plain", "caf\u00e9 \U0001f600", ["a", ("b", {"c": 1.5, "d": None})], 3, None,
    Msg(role=Role.USER, content=[TextBlock(text="ok")], metadata={"n": 1}),
])
def test_is_clean_passes_clean_values(value: Any) -> None:
    assert is_clean(value) is True


async def test_a_bad_input_message_is_still_named() -> None:
    agent = make_agent(ScriptedModel([["never"]]))
    bad = Msg(role=Role.USER, content=[TextBlock(text="ok")], metadata={"k": ["x", "\ud800"]})
    good = Msg(role=Role.USER, content=[TextBlock(text="fine")])
    with pytest.raises(ValueError, match=r"input message #1\.metadata\['k'\]\[1\]"):
        await agent.acall([good, bad])


def test_extension_points_key_dicts_by_identity() -> None:
    table = {point: point.value for point in ExtensionPoint}
    assert all(table[p] == p.value for p in ExtensionPoint)
    assert ExtensionPoint("on_agent") in table


class _Recorder(MiddlewareBase):
    """Records the event types that leave ``next`` at one point."""

    def __init__(self, point: ExtensionPoint) -> None:
        self.point = point
        self.seen: list[str] = []

    def active_points(self) -> set[ExtensionPoint]:
        return {self.point}

    def _record(self, inp: Any, next: Any) -> Any:
        return next(inp).pipe(ops.do_action(lambda e: self.seen.append(e.type)))

    def on_agent(self, ctx: Any, inp: Any, next: Any) -> Any:
        return self._record(inp, next)

    def on_reasoning(self, ctx: Any, inp: Any, next: Any) -> Any:
        return self._record(inp, next)

    def on_model_call(self, ctx: Any, inp: Any, next: Any) -> Any:
        return self._record(inp, next)


@pytest.mark.parametrize("point", [ExtensionPoint.ON_AGENT, ExtensionPoint.ON_REASONING,
                                   ExtensionPoint.ON_MODEL_CALL])
async def test_acall_still_shows_every_event_to_a_layer(point: ExtensionPoint) -> None:
    seen = {}
    for how in ("acall", "stream"):
        recorder = _Recorder(point)
        agent = make_agent(ScriptedModel([["a", "b"]]), middlewares=[recorder])
        if how == "acall":
            await agent.acall("hi")
        else:
            await agent.stream("hi").pipe(ops.to_list())
        seen[how] = recorder.seen
    assert seen["acall"] == seen["stream"]
    assert seen["acall"].count("text_block_delta") == 2


async def test_acall_with_no_layer_builds_no_block_events(monkeypatch: Any) -> None:
    from rx_agent.agent import _blocks

    made: list[Any] = []
    real = _blocks._delta_make

    def counting(*args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_blocks, "_delta_make", counting)
    agent = make_agent(ScriptedModel([["a", "b", "c"], ["a", "b", "c"]]))
    msg = await agent.acall("hi", RuntimeContext(session_id="one"))
    assert msg.text == "abc" and made == []
    await agent.stream("hi", RuntimeContext(session_id="two")).pipe(ops.to_list())
    assert len(made) == 3


def test_a_value_that_contains_itself_gets_the_labelled_walk() -> None:
    from rx_agent._text import check_value

    looped: dict[str, Any] = {}
    looped["self"] = looped
    assert is_clean(looped) is False  # it ends (a budget), rather than walking forever
    with pytest.raises(RecursionError):
        check_value(looped, "input")  # as the labelled walk always did
    big = [["x"] * 1000 for _ in range(200)]  # over the budget, but clean
    assert is_clean(big) is False
    check_value(big, "input")  # passes: only the labelled walk decides


async def test_scripted_delays_follow_a_loop_clock_patched_on_the_instance() -> None:
    import time

    loop = asyncio.get_running_loop()
    real = loop.time
    loop.time = lambda: real() + 1000.0  # type: ignore[method-assign]  # a shifted clock
    try:
        model = ScriptedModel([["a", "b", "c"]], delay=0.05)
        start = time.monotonic()
        chunks = await model.stream([Msg(role=Role.USER, content="hi")]).pipe(ops.to_list())
        elapsed = time.monotonic() - start
    finally:
        del loop.time  # back to the class's method
    assert len(chunks) == 5  # three texts, usage, finish
    assert elapsed >= 0.2  # every one of the five chunks waited its 50 ms
