"""Sessions are slots keyed by (user, session); FIFO per slot (docs/concepts/sessions.md)."""

from __future__ import annotations

import asyncio
import itertools
import time

from conftest import make_agent, stream_events

from rx_agent import ExtensionPoint, MiddlewareBase, RuntimeContext, ScriptedModel


class Timeline(MiddlewareBase):
    """Records [start, end] per call (label = first input text): from the moment the
    session slot is taken (state ready) to on_agent_finish."""

    def __init__(self) -> None:
        self.spans: dict[str, list[float]] = {}

    def active_points(self):  # type: ignore[no-untyped-def]
        return {ExtensionPoint.ON_AGENT_STATE_READY, ExtensionPoint.ON_AGENT_FINISH}

    def on_agent_state_ready(self, agent, ctx, state, input_messages):  # type: ignore[no-untyped-def]
        label = input_messages[0].text
        ctx.put("timeline_label", label)
        self.spans[label] = [time.perf_counter(), 0.0]

    def on_agent_finish(self, agent, ctx, outcome):  # type: ignore[no-untyped-def]
        self.spans[ctx.get("timeline_label")][1] = time.perf_counter()


async def test_same_session_calls_run_one_at_a_time_in_fifo_order() -> None:
    timeline = Timeline()
    agent = make_agent(ScriptedModel(["a", "b", "c"], delay=0.02), middlewares=[timeline])
    ctx = RuntimeContext(session_id="same")
    results = await asyncio.wait_for(
        asyncio.gather(*(agent.acall(q, ctx) for q in ("q1", "q2", "q3"))), 5
    )
    assert [m.text for m in results] == ["a", "b", "c"]
    spans = [timeline.spans[q] for q in ("q1", "q2", "q3")]
    for earlier, later in itertools.pairwise(spans):
        assert earlier[1] <= later[0], "two calls on one session overlapped"


async def test_same_session_calls_see_each_others_messages_in_order() -> None:
    model = ScriptedModel(["a", "b", "c"], delay=0.01)
    agent = make_agent(model)
    ctx = RuntimeContext(session_id="same")
    await asyncio.wait_for(asyncio.gather(*(agent.acall(q, ctx) for q in ("q1", "q2", "q3"))), 5)
    assert [m.text for m in model.calls[2].messages] == ["q1", "a", "q2", "b", "q3"]


async def test_different_sessions_run_concurrently() -> None:
    timeline = Timeline()
    delay = 0.03
    agent = make_agent(ScriptedModel(["a", "b", "c"], delay=delay), middlewares=[timeline])
    start = time.perf_counter()
    await asyncio.wait_for(
        asyncio.gather(*(agent.acall(q, RuntimeContext(session_id=q)) for q in ("q1", "q2", "q3"))),
        5,
    )
    elapsed = time.perf_counter() - start
    spans = [timeline.spans[q] for q in ("q1", "q2", "q3")]
    latest_start = max(s[0] for s in spans)
    earliest_end = min(s[1] for s in spans)
    assert latest_start < earliest_end, "calls on different sessions did not overlap"
    single = spans[0][1] - spans[0][0]
    assert elapsed < 2 * single + 0.05


async def test_same_session_id_for_different_users_are_separate_slots() -> None:
    timeline = Timeline()
    model = ScriptedModel(["a", "b"], delay=0.03)
    agent = make_agent(model, middlewares=[timeline])
    alice = RuntimeContext(session_id="shared", user_id="alice")
    bob = RuntimeContext(session_id="shared", user_id="bob")
    both = asyncio.gather(agent.acall("q-alice", alice), agent.acall("q-bob", bob))
    await asyncio.wait_for(both, 5)
    assert alice.agent_state is not bob.agent_state
    assert next(m.text for m in alice.agent_state.context) == "q-alice"
    assert next(m.text for m in bob.agent_state.context) == "q-bob"
    a, b = timeline.spans["q-alice"], timeline.spans["q-bob"]
    assert max(a[0], b[0]) < min(a[1], b[1])


def test_session_defaults_to_the_agent_name_and_persists_between_calls() -> None:
    model = ScriptedModel(["first", "second"])
    agent = make_agent(model, name="memo")
    events = stream_events(agent, "q1")
    assert events[0].session_id == "memo"
    stream_events(agent, "q2")
    assert [m.text for m in model.calls[1].messages] == ["q1", "first", "q2"]


def test_explicit_session_keeps_its_own_history() -> None:
    model = ScriptedModel(["a1", "b1", "a2"])
    agent = make_agent(model)
    a, b = RuntimeContext(session_id="A"), RuntimeContext(session_id="B")
    stream_events(agent, "qa1", a)
    stream_events(agent, "qb1", b)
    stream_events(agent, "qa2", a)
    assert [m.text for m in model.calls[2].messages] == ["qa1", "a1", "qa2"]


def test_anonymous_and_named_user_are_different_slots() -> None:
    model = ScriptedModel(["x", "y"])
    agent = make_agent(model)
    stream_events(agent, "anon", RuntimeContext(session_id="s"))
    stream_events(agent, "named", RuntimeContext(session_id="s", user_id="carol"))
    assert [m.text for m in model.calls[1].messages] == ["named"]


def test_state_is_shared_by_calls_with_separate_context_objects() -> None:
    agent = make_agent(ScriptedModel(["x", "y"]))
    first, second = RuntimeContext(session_id="s"), RuntimeContext(session_id="s")
    stream_events(agent, "1", first)
    stream_events(agent, "2", second)
    assert [m.text for m in second.agent_state.context] == ["1", "x", "2", "y"]


def test_builder_session_store_is_used() -> None:
    from conftest import builder

    from rx_agent import InMemorySessionStore

    store = InMemorySessionStore()
    agent = builder(ScriptedModel(["x", "y"])).session_store(store).build()
    stream_events(agent, "1", RuntimeContext(session_id="s"))
    model_b = ScriptedModel(["z"])
    other = builder(model_b).session_store(store).build()
    stream_events(other, "2", RuntimeContext(session_id="s"))
    assert [m.text for m in model_b.calls[0].messages] == ["1", "x", "2"]


async def test_disposing_a_queued_call_frees_its_place_in_the_queue() -> None:
    model = ScriptedModel(["a", "c"], delay=0.03)
    agent = make_agent(model)
    ctx = RuntimeContext(session_id="q")
    first = asyncio.ensure_future(agent.acall("q1", ctx))
    await asyncio.sleep(0.01)
    queued = agent.stream("q2", ctx).subscribe(lambda e: None, lambda e: None)
    await asyncio.sleep(0.01)
    queued.dispose()
    assert (await asyncio.wait_for(first, 3)).text == "a"
    third = await asyncio.wait_for(agent.acall("q3", ctx), 3)
    assert third.text == "c"
    assert "q2" not in [m.text for m in model.calls[-1].messages]


async def test_fifo_holds_across_a_plain_thread_and_the_callers_loop() -> None:
    timeline = Timeline()
    agent = make_agent(ScriptedModel(["a", "b"], delay=0.03), middlewares=[timeline])
    ctx = RuntimeContext(session_id="mixed")
    loop = asyncio.get_running_loop()
    from_thread = loop.run_in_executor(None, agent.call_sync, "q-thread", ctx)
    await asyncio.sleep(0.02)
    from_loop = await asyncio.wait_for(agent.acall("q-loop", ctx), 3)
    threaded = await asyncio.wait_for(from_thread, 3)
    assert (threaded.text, from_loop.text) == ("a", "b")
    thread_span, loop_span = timeline.spans["q-thread"], timeline.spans["q-loop"]
    assert thread_span[1] <= loop_span[0]


def test_agent_state_context_is_the_live_session_history() -> None:
    from rx_agent import Msg

    model = ScriptedModel(["x", "y"])
    agent = make_agent(model)
    ctx = RuntimeContext(session_id="live")
    stream_events(agent, "1", ctx)
    ctx.agent_state.context.append(Msg("user", "added by the application"))
    stream_events(agent, "2", RuntimeContext(session_id="live"))
    assert [m.text for m in model.calls[1].messages] == ["1", "x", "added by the application", "2"]
