"""LongTermMemoryMiddleware through a real agent loop: tools, extraction, isolation."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from rx_agent import (
    ExtensionPoint,
    GenerateReason,
    LongTermMemoryMiddleware,
    ModelCallStartEvent,
    Msg,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    SqliteLongTermMemory,
    TextBlockDeltaEvent,
    Toolkit,
    ToolResultState,
    ToolUseBlock,
)
from rx_agent.builtin.memory import MEMORY_METADATA_KEY

from .conftest import call, events_of, make_agent
from .seeing_model import SeeingModel, tagged


@pytest.fixture
def memory(tmp_path: Path) -> Any:
    mem = SqliteLongTermMemory(tmp_path / "memory.db")
    yield mem
    mem.close()


def memory_text(messages: Any) -> str:
    return tagged(messages, "long-term-memory")


def results(ctx: RuntimeContext) -> list[Any]:
    assert ctx.agent_state is not None
    return [b for m in ctx.agent_state.context for b in m.tool_results]


def stored_memory_messages(ctx: RuntimeContext) -> list[Msg]:
    assert ctx.agent_state is not None
    return [m for m in ctx.agent_state.context
            if "<long-term-memory>" in m.text or MEMORY_METADATA_KEY in (m.metadata or {})]


# -- tool mode ---------------------------------------------------------------------------------


async def test_remembered_facts_reach_the_next_session_of_the_user(
    memory: SqliteLongTermMemory,
) -> None:
    ltm = LongTermMemoryMiddleware(memory)
    first = ScriptedModel([
        [ToolUseBlock("c1", "remember", {"fact": "The user's name is Ada."})],
        "Nice to meet you, Ada.",
    ])
    agent = make_agent(first, middlewares=[ltm])
    ctx1 = RuntimeContext(session_id="monday", user_id="ada")
    await call(agent, "Hi, I'm Ada.", ctx1)

    (done,) = results(ctx1)
    assert done.state is ToolResultState.SUCCESS
    assert re.fullmatch(r"Remembered \[m[0-9a-f]{12}\]: The user's name is Ada\.", done.text)
    (fact,) = await memory.recent("ada")
    assert fact.text == "The user's name is Ada." and fact.metadata == {"via": "tool"}
    # Round 2 of the same reply already shows the new fact.
    assert f"[{fact.id}] The user's name is Ada." in memory_text(first.calls[1].messages)
    assert memory_text(first.calls[0].messages) == ""

    second = ScriptedModel(["Your name is Ada."])
    agent2 = make_agent(second, middlewares=[ltm])
    ctx2 = RuntimeContext(session_id="friday", user_id="ada")
    await call(agent2, "What's my name?", ctx2)

    sent = second.calls[0].messages[-1]
    assert sent.text.startswith("<long-term-memory>")
    assert f"- [{fact.id}] The user's name is Ada." in sent.text
    assert sent.metadata == {MEMORY_METADATA_KEY: [fact.id]}
    assert stored_memory_messages(ctx1) == stored_memory_messages(ctx2) == []


async def test_forget_deletes_and_the_next_round_no_longer_shows_it(
    memory: SqliteLongTermMemory,
) -> None:
    fact = await memory.add("ada", "The user lives in Porto.")
    model = ScriptedModel([
        [ToolUseBlock("c1", "forget", {"fact_id": fact.id})],
        [ToolUseBlock("c2", "forget", {"fact_id": fact.id})],
        "Forgotten.",
    ])
    agent = make_agent(model, middlewares=[LongTermMemoryMiddleware(memory)])
    ctx = RuntimeContext(session_id="s", user_id="ada")
    await call(agent, "I moved away from Porto, forget that.", ctx)

    ok, again = results(ctx)
    assert ok.state is ToolResultState.SUCCESS and ok.text == f"Forgot [{fact.id}]."
    assert again.state is ToolResultState.ERROR
    assert f"no remembered fact with id {fact.id!r} for this user" in again.text
    assert "Porto" in memory_text(model.calls[0].messages)
    assert memory_text(model.calls[1].messages) == ""
    assert await memory.count("ada") == 0


async def test_recall_searches_the_users_facts(memory: SqliteLongTermMemory) -> None:
    await memory.add("ada", "The user is allergic to peanuts.")
    await memory.add("bob", "The user is allergic to cats.")
    model = ScriptedModel([[ToolUseBlock("c1", "recall", {"query": "allergic"})],
                           [ToolUseBlock("c2", "recall", {"query": "boats"})], "ok"])
    agent = make_agent(model, middlewares=[LongTermMemoryMiddleware(memory)])
    ctx = RuntimeContext(session_id="s", user_id="ada")
    await call(agent, "anything I can't eat?", ctx)
    found, nothing = results(ctx)
    assert "peanuts" in found.text and "cats" not in found.text
    assert nothing.text == "Nothing remembered about 'boats'."


async def test_user_a_never_sees_user_bs_facts(memory: SqliteLongTermMemory) -> None:
    ltm = LongTermMemoryMiddleware(memory)
    bob_model = ScriptedModel([
        [ToolUseBlock("c1", "remember", {"fact": "The user's bank PIN is 8642."})], "Noted.",
    ])
    bob = RuntimeContext(session_id="shared-name", user_id="bob")
    await call(make_agent(bob_model, middlewares=[ltm]), "My PIN is 8642.", bob)
    (secret,) = await memory.recent("bob")

    ada_model = ScriptedModel([
        [ToolUseBlock("c1", "recall", {"query": "bank PIN 8642"})],
        [ToolUseBlock("c2", "forget", {"fact_id": secret.id})],
        "I don't know any PIN.",
    ])
    ada = RuntimeContext(session_id="shared-name", user_id="ada")  # same session id
    await call(make_agent(ada_model, middlewares=[ltm]), "What is the bank PIN 8642?", ada)

    everything_ada_saw = " ".join(m.text for c in ada_model.calls for m in c.messages)
    assert "PIN is 8642" not in everything_ada_saw
    assert secret.id not in memory_text(ada_model.calls[-1].messages)
    recalled, forgot = results(ada)
    assert recalled.text == "Nothing remembered about 'bank PIN 8642'."
    assert forgot.state is ToolResultState.ERROR
    assert [f.id for f in await memory.recent("bob")] == [secret.id]  # untouched


async def test_without_a_user_id_memory_is_neither_read_nor_written(
    memory: SqliteLongTermMemory,
) -> None:
    await memory.add("ada", "The user's name is Ada.")
    extractor = ScriptedModel([])
    model = ScriptedModel([[ToolUseBlock("c1", "remember", {"fact": "x"})], "ok"])
    agent = make_agent(model, middlewares=[
        LongTermMemoryMiddleware(memory, "both", extract_model=extractor)])
    ctx = RuntimeContext(session_id="anon")
    await call(agent, "What's my name?", ctx)
    assert all(memory_text(c.messages) == "" for c in model.calls)
    (res,) = results(ctx)
    assert res.state is ToolResultState.ERROR and "no user id" in res.text
    assert extractor.calls == []


# -- extract mode ------------------------------------------------------------------------------


async def test_extraction_records_facts_without_leaking_into_the_reply(
    memory: SqliteLongTermMemory,
) -> None:
    await memory.add("ada", "The user's name is Ada.")
    extractor = ScriptedModel(
        ['{"facts": ["The user drinks green tea.", "The user\'s name is Ada."]}'])
    model = ScriptedModel(["Green tea it is."])
    ltm = LongTermMemoryMiddleware(memory, "extract", extract_model=extractor)
    agent = make_agent(model, toolkit=Toolkit(), middlewares=[ltm])
    assert "remember" not in agent.toolkit

    events = await events_of(agent, "I only drink green tea.",
                             RuntimeContext(session_id="s1", user_id="ada"))

    text = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    assert text == "Green tea it is."
    assert sum(isinstance(e, ModelCallStartEvent) for e in events) == 1
    assert all("facts" not in e.model_dump_json() for e in events)
    # The extractor saw the exchange and the known facts.
    (seen,) = extractor.calls
    assert seen.tools == ()
    assert "Already known:\n- The user's name is Ada." in seen.messages[0].text
    assert seen.messages[1].text == ("User: I only drink green tea.\n\n"
                                     "Assistant: Green tea it is.")
    facts = {f.text: f.metadata for f in await memory.recent("ada")}
    assert facts == {"The user's name is Ada.": {},
                     "The user drinks green tea.": {"via": "extraction"}}

    # The next reply of the same user sees it.
    later = ScriptedModel(["Tea."])
    extractor2 = ScriptedModel(['{"facts": []}'])
    agent2 = make_agent(later, middlewares=[
        LongTermMemoryMiddleware(memory, "extract", extract_model=extractor2)])
    await call(agent2, "What do I drink?", RuntimeContext(session_id="s2", user_id="ada"))
    assert "The user drinks green tea." in memory_text(later.calls[0].messages)
    assert "`remember`" not in memory_text(later.calls[0].messages)  # no tools to mention


async def test_extraction_defaults_to_the_agents_model(memory: SqliteLongTermMemory) -> None:
    model = ScriptedModel(["Berlin is lovely.", '{"facts": ["The user lives in Berlin."]}'])
    agent = make_agent(model, middlewares=[LongTermMemoryMiddleware(memory, "extract")])
    reply = await call(agent, "I live in Berlin.", RuntimeContext(session_id="s", user_id="u"))
    assert reply.text == "Berlin is lovely."
    assert [f.text for f in await memory.recent("u")] == ["The user lives in Berlin."]
    assert len(model.calls) == 2


@pytest.mark.parametrize("failure", ["not json at all", RuntimeError("extractor down")])
async def test_a_failed_extraction_does_not_fail_the_reply(
    memory: SqliteLongTermMemory, caplog: pytest.LogCaptureFixture, failure: Any,
) -> None:
    extractor = ScriptedModel([failure])
    agent = make_agent(ScriptedModel(["Fine."]), middlewares=[
        LongTermMemoryMiddleware(memory, "extract", extract_model=extractor)])
    with caplog.at_level(logging.WARNING, logger="rx_agent.memory"):
        reply = await call(agent, "I like jazz.", RuntimeContext(session_id="s", user_id="u"))
    assert reply.text == "Fine."
    assert await memory.count("u") == 0
    assert "long-term memory extraction failed for user 'u'" in caplog.text


async def test_a_paused_reply_is_not_extracted(memory: SqliteLongTermMemory) -> None:
    toolkit = Toolkit()

    def wire_money(amount: int) -> str:
        """Send money."""
        return "sent"

    toolkit.register_tool(wire_money, permission="ask")
    extractor = ScriptedModel([])
    model = ScriptedModel([[ToolUseBlock("c1", "wire_money", {"amount": 5})]])
    agent = make_agent(model, toolkit=toolkit, middlewares=[
        LongTermMemoryMiddleware(memory, "extract", extract_model=extractor)])
    reply = await call(agent, "Send 5 euros to my mum.", RuntimeContext(session_id="s",
                                                                         user_id="u"))
    assert reply.generate_reason is GenerateReason.PERMISSION_ASKING
    assert extractor.calls == []


# -- shape and sharing ---------------------------------------------------------------------------


def test_points_and_tools_per_mode(memory: SqliteLongTermMemory) -> None:
    tool = LongTermMemoryMiddleware(memory)
    assert set(tool.active_points()) == {ExtensionPoint.ON_REASONING}
    assert [t.name for t in tool.list_tools()] == ["remember", "forget", "recall"]
    extract = LongTermMemoryMiddleware(memory, "extract")
    assert set(extract.active_points()) == {ExtensionPoint.ON_REASONING,
                                            ExtensionPoint.ON_AGENT_FINISH}
    assert extract.list_tools() == ()
    both = LongTermMemoryMiddleware(memory, "both")
    assert set(both.active_points()) == set(extract.active_points())
    agent = make_agent(ScriptedModel([]), toolkit=Toolkit(), middlewares=[both])
    assert agent.toolkit.names == ["remember", "forget", "recall"]
    schema = {s["name"]: s for s in agent.toolkit.schemas()}
    assert list(schema["remember"]["parameters"]["properties"]) == ["fact"]
    assert agent.plan.participants(ExtensionPoint.ON_AGENT_FINISH) == (both,)


def test_constructor_checks(memory: SqliteLongTermMemory) -> None:
    with pytest.raises(ValueError, match="mode must be 'tool', 'extract' or 'both'"):
        LongTermMemoryMiddleware(memory, "auto")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="LongTermMemory protocol"):
        LongTermMemoryMiddleware(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="extract_model must be a ChatModel"):
        LongTermMemoryMiddleware(memory, "extract", extract_model="gpt-4o")
    with pytest.raises(ValueError, match="top_k"):
        LongTermMemoryMiddleware(memory, top_k=0)


async def test_one_instance_serves_many_users_at_once(memory: SqliteLongTermMemory) -> None:
    ltm = LongTermMemoryMiddleware(memory)
    users = [f"user{i}" for i in range(12)]

    def act(messages: Any) -> Any:
        said = next(m.text for m in reversed(messages) if m.role.value == "user"
                    and not m.text.startswith("<"))
        if any(m.tool_results for m in messages):
            return "saved"
        seen = re.findall(r"\] (.+)", memory_text(messages))
        if said.startswith("remember "):
            return [ToolUseBlock("c1", "remember", {"fact": said.removeprefix("remember ")})]
        return "|".join(seen) or "nothing"

    models = [SeeingModel(act), SeeingModel(act)]
    agents: list[ReActAgent] = [make_agent(m, name=f"a{i}", middlewares=[ltm])
                                for i, m in enumerate(models)]
    await asyncio.gather(*(
        call(agents[i % 2], f"remember The code of {u} is {i}.",
             RuntimeContext(session_id="one", user_id=u))
        for i, u in enumerate(users)
    ))
    replies = await asyncio.gather(*(
        call(agents[(i + 1) % 2], "what do you know?", RuntimeContext(session_id="two",
                                                                      user_id=u))
        for i, u in enumerate(users)
    ))
    assert [r.text for r in replies] == [f"The code of {u} is {i}." for i, u in enumerate(users)]


async def test_an_unusable_extracted_fact_is_skipped_alone(
    memory: SqliteLongTermMemory, caplog: pytest.LogCaptureFixture,
) -> None:
    long_fact = "word " * 500
    extractor = ScriptedModel([f'{{"facts": ["{long_fact}", "The user plays chess."]}}'])
    agent = make_agent(ScriptedModel(["Nice."]), middlewares=[
        LongTermMemoryMiddleware(memory, "extract", extract_model=extractor)])
    with caplog.at_level(logging.WARNING, logger="rx_agent.memory"):
        await call(agent, "I play chess.", RuntimeContext(session_id="s", user_id="u"))
    assert [f.text for f in await memory.recent("u")] == ["The user plays chess."]
    assert "skipped an extracted fact: a fact is at most 2000 characters" in caplog.text
    await memory.aclose()
