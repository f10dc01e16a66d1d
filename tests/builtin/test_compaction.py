"""``CompactionMiddleware`` (issue 14, item 1): summarize older messages at the top of a
round once the estimated prompt passes the trigger, keeping the system prompt, the
latest user message and every tool call with its result."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from conftest import add_toolkit, call_add, make_agent, of_type, stream_events

from rx_agent import (
    ChatUsage,
    CompactionMiddleware,
    ContextCompressedEvent,
    ExtensionPoint,
    InMemorySessionStore,
    Msg,
    NestedEvent,
    Role,
    RuntimeContext,
    ScriptedModel,
    SessionKey,
    SqliteSessionStore,
    TextBlockDeltaEvent,
    ToolResultBlock,
    ToolUseBlock,
)
from rx_agent.builtin.compaction import COMPACTION_METADATA_KEY, estimate_tokens

LONG = "x" * 400  # ~100 tokens by the heuristic


def _texts(messages: list[Msg]) -> list[str]:
    return [m.text for m in messages]


def _session(agent: Any, store: Any, *turns: str, session: str = "s") -> list[list[Any]]:
    out = []
    for text in turns:
        out.append(stream_events(agent, text, RuntimeContext(session_id=session)))
    return out


def test_below_the_trigger_nothing_happens() -> None:
    summarizer = ScriptedModel([])
    model = ScriptedModel(["a1", "a2"])
    store = InMemorySessionStore()
    agent = make_agent(model, session_store=store, middlewares=[
        CompactionMiddleware(trigger_tokens=10_000, keep_last=1, summary_model=summarizer)])
    _first, second = _session(agent, store, "q1", "q2")
    assert summarizer.calls == []
    assert not of_type(second, ContextCompressedEvent)
    assert _texts(store.load(SessionKey("__anon__", "s")).context) == ["q1", "a1", "q2", "a2"]


def test_past_the_trigger_older_messages_become_one_summary() -> None:
    summarizer = ScriptedModel(["The user asked twice about x."])
    model = ScriptedModel(["a1", "a2", "a3"])
    store = InMemorySessionStore()
    mw = CompactionMiddleware(trigger_tokens=150, keep_last=1, summary_model=summarizer)
    agent = make_agent(model, session_store=store, sys_prompt="You are terse.",
                       middlewares=[mw])
    _session(agent, store, "q1", "q2")
    assert summarizer.calls == []  # two small turns: under the trigger
    big = LONG * 2
    events = _session(agent, store, big)[0]

    # the summarizer saw the older messages as a transcript
    request = summarizer.calls[0].messages
    assert request[0].role is Role.SYSTEM
    assert "q1" in request[1].text and "a2" in request[1].text and big not in request[1].text
    # the round's model call saw: system prompt, summary, latest user message
    sent = model.calls[2].messages
    assert sent[0].role is Role.SYSTEM and sent[0].text == "You are terse."
    assert "The user asked twice about x." in sent[1].text
    assert sent[1].metadata[COMPACTION_METADATA_KEY]["replaced_messages"] == 4
    assert sent[2].text == big and len(sent) == 3
    # the stored session holds the compacted context
    stored = store.load(SessionKey("__anon__", "s")).context
    assert _texts(stored)[1:] == [big, "a3"]
    assert COMPACTION_METADATA_KEY in stored[0].metadata
    # the event carries the estimates, and the summary's events are nested
    compressed = of_type(events, ContextCompressedEvent)
    assert len(compressed) == 1
    event = compressed[0]
    assert (event.messages_before, event.messages_after) == (5, 2)
    assert event.tokens_before is not None and event.tokens_after is not None
    assert event.tokens_before >= 150 and event.tokens_after > 0
    nested = of_type(events, NestedEvent)
    assert nested and all(n.scope == "compaction" for n in nested)
    assert "The user asked twice about x." in "".join(
        n.event.delta for n in nested if isinstance(n.event, TextBlockDeltaEvent))
    # the reply's own text stream has only the answer
    assert "".join(e.delta for e in of_type(events, TextBlockDeltaEvent)) == "a3"
    assert events[-2].result.text == "a3"


def test_the_agents_model_summarizes_when_no_summary_model_is_given() -> None:
    model = ScriptedModel(["a1", "summary text", "a2"])
    agent = make_agent(model, session_store=InMemorySessionStore(),
                       middlewares=[CompactionMiddleware(trigger_tokens=50, keep_last=0)])
    _session(agent, None, LONG)
    events = _session(agent, None, "q2")[0]
    assert events[-2].result.text == "a2"
    assert "summary text" in model.calls[2].messages[0].text


def test_a_tool_call_is_never_split_from_its_result() -> None:
    # context at round 2: [LONG, call, result]; keep_last=1 would cut between them
    model = ScriptedModel([[call_add()], "three"])
    summarizer = ScriptedModel(["summary"])
    mw = CompactionMiddleware(trigger_tokens=50, keep_last=1, summary_model=summarizer)
    agent = make_agent(model, toolkit=add_toolkit(), middlewares=[mw])
    stream_events(agent, LONG)
    # the latest user message is LONG itself: nothing older to summarize
    assert summarizer.calls == []
    assert mw.cut([Msg(role="user", content=LONG),
                   Msg(role="assistant", content=[ToolUseBlock("c1", "add", {})]),
                   Msg(role="tool", content=[ToolResultBlock("c1", "add", "3")])]) == 0
    history = [
        Msg(role="user", content="old"), Msg(role="assistant", content="old answer"),
        Msg(role="user", content="new"),
        Msg(role="assistant", content=[ToolUseBlock("c1", "add", {})]),
        Msg(role="tool", content=[ToolResultBlock("c1", "add", "3")]),
        Msg(role="assistant", content=[ToolUseBlock("c2", "add", {})]),
        Msg(role="tool", content=[ToolResultBlock("c2", "add", "3")]),
    ]
    assert mw.cut(history) == 2  # the latest user message stays, with what follows
    straddling = [
        Msg(role="user", content="old"), Msg(role="assistant", content="old answer"),
        Msg(role="assistant", content=[ToolUseBlock("c0", "add", {})]),
        Msg(role="tool", content=[ToolResultBlock("c0", "add", "0")]),
        Msg(role="user", content="new"), Msg(role="assistant", content="new answer"),
    ]
    # keep_last=3 would cut between c0's call and its result: the cut moves to the call
    assert CompactionMiddleware(trigger_tokens=1, keep_last=3).cut(straddling) == 2


def test_an_earlier_summary_is_summarized_again_not_stacked() -> None:
    summarizer = ScriptedModel(["first summary", "second summary"])
    model = ScriptedModel(["a1", "a2", "a3"])
    store = InMemorySessionStore()
    mw = CompactionMiddleware(trigger_tokens=60, keep_last=0, summary_model=summarizer)
    agent = make_agent(model, session_store=store, middlewares=[mw])
    _session(agent, store, LONG, LONG, LONG)
    stored = store.load(SessionKey("__anon__", "s")).context
    summaries = [m for m in stored if m.metadata and COMPACTION_METADATA_KEY in m.metadata]
    assert len(summaries) == 1 and "second summary" in summaries[0].text
    assert "[earlier summary]" in summarizer.calls[1].messages[1].text


def test_reported_usage_drives_the_estimate() -> None:
    small = [Msg(role="user", content="q"),
             Msg(role="assistant", content="a", usage=ChatUsage(9_000, 20))]
    assert estimate_tokens(small) == 9_020
    after = [*small, Msg(role="user", content="y" * 40)]
    assert estimate_tokens(after) == 9_020 + 4 + 10
    # without usage: 4 chars per token, 4 per message, the system prompt and tools too
    plain = [Msg(role="user", content="y" * 40)]
    assert estimate_tokens(plain) == 14
    system = Msg(role="system", content="z" * 8)
    tools = [{"name": "t", "description": "", "parameters": {}}]
    assert estimate_tokens(plain, system, tools) == 14 + 6 + 13


def test_usage_older_than_a_summary_is_not_trusted() -> None:
    stale = Msg(role="assistant", content="a", usage=ChatUsage(9_000, 20))
    summary = Msg(role="user", content="summary",
                  metadata={COMPACTION_METADATA_KEY: {"replaced_messages": 3}})
    assert summary.created_at > stale.created_at
    context = [summary, Msg(role="user", content="q"), stale]
    assert estimate_tokens(context) < 100


def test_a_failing_summary_call_leaves_the_context_and_the_reply_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summarizer = ScriptedModel([RuntimeError("summarizer down")])
    model = ScriptedModel(["a1", "a2"])
    store = InMemorySessionStore()
    agent = make_agent(model, session_store=store, middlewares=[
        CompactionMiddleware(trigger_tokens=50, keep_last=0, summary_model=summarizer)])
    _session(agent, store, LONG)
    with caplog.at_level(logging.WARNING, logger="rx_agent"):
        events = _session(agent, store, "q2")[0]
    assert events[-2].result.text == "a2"
    assert not of_type(events, ContextCompressedEvent)
    assert "summarizer down" in caplog.text
    assert _texts(store.load(SessionKey("__anon__", "s")).context) == [LONG, "a1", "q2", "a2"]


async def test_persisted_in_a_real_sqlite_store(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "sessions.db")
    summarizer = ScriptedModel(["compact"])
    agent = make_agent(ScriptedModel(["a1", "a2"]), session_store=store, middlewares=[
        CompactionMiddleware(trigger_tokens=50, keep_last=0, summary_model=summarizer)])
    ctx = RuntimeContext(session_id="db")
    await agent.acall(LONG, ctx)
    await agent.acall("q2", RuntimeContext(session_id="db"))
    store.close()
    reopened = SqliteSessionStore(tmp_path / "sessions.db")
    state = await reopened.aload(SessionKey("__anon__", "db"))
    reopened.close()
    assert state is not None
    assert [m.text for m in state.context][1:] == ["q2", "a2"]
    assert "compact" in state.context[0].text


def test_participates_only_in_compression_and_validates_its_arguments() -> None:
    mw = CompactionMiddleware(trigger_tokens=10)
    assert set(mw.active_points()) == {ExtensionPoint.ON_COMPRESS_CONTEXT}
    agent = make_agent(ScriptedModel([]), middlewares=[mw])
    assert agent.plan.participants(ExtensionPoint.ON_REASONING) == ()
    with pytest.raises(ValueError, match="trigger_tokens"):
        CompactionMiddleware(trigger_tokens=0)
    with pytest.raises(ValueError, match="keep_last"):
        CompactionMiddleware(trigger_tokens=10, keep_last=-1)
    with pytest.raises(TypeError, match="summary_model"):
        CompactionMiddleware(trigger_tokens=10, summary_model="gpt")  # type: ignore[arg-type]


def test_one_instance_serves_concurrent_sessions() -> None:
    import concurrent.futures

    mw = CompactionMiddleware(trigger_tokens=50, keep_last=0)

    def run(i: int) -> str:
        model = ScriptedModel(["a1", f"summary {i}", f"a2-{i}"])
        agent = make_agent(model, session_store=InMemorySessionStore(), middlewares=[mw])
        ctx = RuntimeContext(session_id=f"s{i}")
        agent.call_sync(LONG, ctx)
        reply = agent.call_sync("q", RuntimeContext(session_id=f"s{i}"))
        assert f"summary {i}" in model.calls[2].messages[0].text
        return reply.text

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert sorted(pool.map(run, range(8))) == sorted(f"a2-{i}" for i in range(8))
