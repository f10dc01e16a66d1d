"""RAGMiddleware through a real agent loop: inject mode, tool mode, sharing."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from rx_agent import (
    Document,
    ExtensionPoint,
    Passage,
    RAGMiddleware,
    ReActAgent,
    RuntimeContext,
    ScriptedModel,
    SqliteKnowledge,
    TextBlockDeltaEvent,
    Toolkit,
    ToolResultState,
    ToolUseBlock,
)
from rx_agent.builtin.rag import RAG_METADATA_KEY

from .conftest import call, events_of, make_agent
from .rag_corpus import DOCUMENTS, QUESTIONS
from .seeing_model import SeeingModel, tagged


class Counting:
    """A Knowledge that counts searches (and can fail them)."""

    def __init__(self, inner: SqliteKnowledge, fail: BaseException | None = None) -> None:
        self.inner = inner
        self.fail = fail
        self.searches: list[tuple[str, int, Mapping[str, Any] | None]] = []

    async def search(self, query: str, top_k: int = 5,
                     filters: Mapping[str, Any] | None = None) -> list[Passage]:
        self.searches.append((query, top_k, filters))
        if self.fail is not None:
            raise self.fail
        return await self.inner.search(query, top_k, filters)

    async def add(self, documents: Iterable[Document | str]) -> int:
        return await self.inner.add(documents)


@pytest.fixture
async def kb(tmp_path: Path) -> Any:
    knowledge = SqliteKnowledge(tmp_path / "kb.db")
    await knowledge.add(DOCUMENTS)
    yield knowledge
    knowledge.close()


def _no_knowledge(agent: ReActAgent, ctx: RuntimeContext) -> None:
    assert ctx.agent_state is not None
    for msg in ctx.agent_state.context:
        assert "<knowledge>" not in msg.text
        assert RAG_METADATA_KEY not in (msg.metadata or {})


# -- inject ------------------------------------------------------------------------------------


async def test_inject_adds_passages_to_every_round_without_persisting(kb: SqliteKnowledge) -> None:
    counting = Counting(kb)
    model = ScriptedModel([
        [ToolUseBlock("c1", "add", {"a": 1, "b": 2})],
        "Within 30 days [1].",
    ])
    rag = RAGMiddleware(counting, top_k=3)
    agent = make_agent(model, middlewares=[rag])
    ctx = RuntimeContext(session_id="s1")

    reply = await call(agent, "How many days do I have to ask for a refund?", ctx)

    assert reply.text == "Within 30 days [1]."
    assert len(model.calls) == 2
    for sent in model.calls:
        last = sent.messages[-1]
        assert last.role.value == "user"
        assert last.text.startswith("<knowledge>") and last.text.endswith("</knowledge>")
        assert "[1] source: refunds.md" in last.text
        assert "Customers can ask for a refund within 30 days" in last.text
        assert last.metadata is not None and last.metadata[RAG_METADATA_KEY][0] == "refunds.md"
    # The knowledge message is appended after the tool result in round 2.
    assert model.calls[1].messages[-2].tool_results
    # One search per reply, not per round.
    assert counting.searches == [("How many days do I have to ask for a refund?", 3, None)]
    _no_knowledge(agent, ctx)

    # The next reply searches for its own question.
    model2 = ScriptedModel(["Two years."])
    agent2 = make_agent(model2, middlewares=[rag])
    await call(agent2, "Is water damage covered by the warranty?", ctx)
    assert "[1] source: warranty.md" in model2.calls[0].messages[-1].text


async def test_nothing_found_leaves_the_input_unchanged(kb: SqliteKnowledge) -> None:
    plain = ScriptedModel(["ok"])
    with_rag = ScriptedModel(["ok"])
    await call(make_agent(plain), "xyzzy plugh")
    await call(make_agent(with_rag, middlewares=[RAGMiddleware(kb)]), "xyzzy plugh")
    assert [m.text for m in with_rag.calls[0].messages] == [m.text for m in plain.calls[0].messages]


async def test_inject_events_are_those_of_a_plain_agent(kb: SqliteKnowledge) -> None:
    def kinds(events: list[Any]) -> list[str]:
        return [type(e).__name__ for e in events]

    plain = await events_of(make_agent(ScriptedModel(["Refunds: 30 days."])), "refund?")
    rag = await events_of(make_agent(ScriptedModel(["Refunds: 30 days."]),
                                     middlewares=[RAGMiddleware(kb)]), "refund?")
    assert kinds(rag) == kinds(plain)


async def test_filters_and_min_score(kb: SqliteKnowledge) -> None:
    model = ScriptedModel(["a", "b", "c"])
    per_user = RAGMiddleware(kb, filters=lambda ctx: {"lang": ctx.get("lang") or "en"})
    agent = make_agent(model, middlewares=[per_user])
    de = RuntimeContext(session_id="de")
    de.put("lang", "de")
    await call(agent, "Erstattung refund 30 Tagen", de)
    assert re.findall(r"source: (\S+)", model.calls[0].messages[-1].text) == ["erstattung.md"]
    await call(agent, "Erstattung refund 30 Tagen", RuntimeContext(session_id="en"))
    assert "erstattung.md" not in model.calls[1].messages[-1].text

    strict = make_agent(model, middlewares=[RAGMiddleware(kb, min_score=1e9)])
    await call(strict, "refund", RuntimeContext(session_id="strict"))
    assert "<knowledge>" not in model.calls[2].messages[-1].text


async def test_a_failing_search_fails_the_reply(kb: SqliteKnowledge) -> None:
    broken = Counting(kb, fail=OSError("index offline"))
    model = ScriptedModel(["fine"])
    agent = make_agent(model, middlewares=[RAGMiddleware(broken)])
    ctx = RuntimeContext(session_id="flaky")
    with pytest.raises(OSError, match="index offline"):
        await call(agent, "refund?", ctx)
    assert model.calls == []
    # The session stays usable.
    broken.fail = None
    assert (await call(agent, "refund?", ctx)).text == "fine"
    assert len(broken.searches) == 2


# -- tool --------------------------------------------------------------------------------------


async def test_tool_mode_registers_retrieve_knowledge(kb: SqliteKnowledge) -> None:
    rag = RAGMiddleware(kb, mode="tool", top_k=2, max_top_k=4)
    model = ScriptedModel([
        [ToolUseBlock("c1", "retrieve_knowledge", {"query": "express shipping next day"})],
        [ToolUseBlock("c2", "retrieve_knowledge", {"query": "refund", "top_k": 9})],
        [ToolUseBlock("c3", "retrieve_knowledge", {"query": "qqqq zzzz"})],
        "Next working day [1].",
    ])
    agent = make_agent(model, toolkit=Toolkit(), middlewares=[rag])
    registered = agent.toolkit.get("retrieve_knowledge")
    assert registered is not None and registered.source == "middleware RAGMiddleware"
    schema = next(s for s in agent.toolkit.schemas() if s["name"] == "retrieve_knowledge")
    assert list(schema["parameters"]["properties"]) == ["query", "top_k"]
    for point in ExtensionPoint:
        assert rag not in agent.plan.participants(point)
    ctx = RuntimeContext(session_id="tool")

    reply = await call(agent, "How fast is express shipping?", ctx)

    assert reply.text == "Next working day [1]."
    assert ctx.agent_state is not None
    results = [b for m in ctx.agent_state.context for b in m.tool_results]
    assert results[0].state is ToolResultState.SUCCESS
    assert results[0].text.startswith("[1] source: shipping.md")
    assert results[0].text.count("source:") == 2  # top_k
    assert results[1].state is ToolResultState.ERROR
    assert "top_k must be from 1 to 4, got 9" in results[1].text
    assert results[2].text == "No passages found for 'qqqq zzzz'."
    # Tool mode adds nothing to the model input.
    assert all("<knowledge>" not in m.text for c in model.calls for m in c.messages)


async def test_tool_mode_uses_the_calls_filters(kb: SqliteKnowledge) -> None:
    rag = RAGMiddleware(kb, mode="tool", filters=lambda ctx: {"team": ctx.get("team")})
    model = ScriptedModel([[ToolUseBlock("c1", "retrieve_knowledge", {"query": "refund"})],
                           "ok"])
    agent = make_agent(model, middlewares=[rag])
    ctx = RuntimeContext(session_id="t")
    ctx.put("team", "support")
    await call(agent, "go", ctx)
    assert ctx.agent_state is not None
    (result,) = [b for m in ctx.agent_state.context for b in m.tool_results]
    assert "refunds.md" not in result.text  # billing's document is filtered out


def test_active_points_and_tools_per_mode(tmp_path: Path) -> None:
    kb = SqliteKnowledge(tmp_path / "k.db")
    inject = RAGMiddleware(kb)
    assert set(inject.active_points()) == {ExtensionPoint.ON_REASONING}
    assert inject.list_tools() == ()
    tool = RAGMiddleware(kb, mode="tool", tool_name="search_docs")
    assert set(tool.active_points()) == set()
    assert [t.name for t in tool.list_tools()] == ["search_docs"]
    agent = make_agent(ScriptedModel([]), middlewares=[inject, tool])
    assert agent.plan.participants(ExtensionPoint.ON_REASONING) == (inject,)
    assert "search_docs" in agent.toolkit
    kb.close()


def test_constructor_checks(tmp_path: Path) -> None:
    kb = SqliteKnowledge(tmp_path / "k.db")
    with pytest.raises(ValueError, match="mode must be 'inject' or 'tool'"):
        RAGMiddleware(kb, mode="both")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Knowledge protocol"):
        RAGMiddleware(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="top_k must be an int >= 1"):
        RAGMiddleware(kb, top_k=0)
    with pytest.raises(ValueError, match="max_top_k"):
        RAGMiddleware(kb, top_k=5, max_top_k=3)
    with pytest.raises(ValueError, match="filter key"):
        RAGMiddleware(kb, filters={"no spaces": 1})
    kb.close()


# -- sharing -----------------------------------------------------------------------------------


async def test_one_instance_shared_by_agents_and_concurrent_calls(kb: SqliteKnowledge) -> None:
    rag = RAGMiddleware(kb, top_k=1)

    def sources(messages: Any) -> str:
        found = re.findall(r"source: (\S+)", tagged(messages, "knowledge"))
        return ",".join(found) or "none"

    models = [SeeingModel(sources), SeeingModel(sources)]
    agents = [make_agent(m, name=f"a{i}", middlewares=[rag]) for i, m in enumerate(models)]
    jobs = [(agents[i % 2], q, expected, f"s{i}") for i, (q, expected) in
            enumerate(QUESTIONS * 3)]
    replies = await asyncio.gather(*(
        call(agent, q, RuntimeContext(session_id=sid)) for agent, q, _, sid in jobs
    ))
    assert [r.text for r in replies] == [expected for _, _, expected, _ in jobs]
    assert sum(len(m.inputs) for m in models) == len(jobs)


async def test_streamed_text_is_the_models_answer_only(kb: SqliteKnowledge) -> None:
    events = await events_of(make_agent(ScriptedModel(["Thirty days."]),
                                        middlewares=[RAGMiddleware(kb)]), "refund?")
    assert "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent)) == "Thirty days."
