"""OpenAIEmbeddings against a real loopback /v1/embeddings server, and VectorKnowledge."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest

from rx_agent import (
    Document,
    Embeddings,
    Knowledge,
    ModelError,
    OpenAIEmbeddings,
    RAGMiddleware,
    RuntimeContext,
    ScriptedModel,
    VectorKnowledge,
)
from rx_agent.builtin import _knowledge_vector
from rx_agent.model.errors import (
    ModelAuthenticationError,
    ModelResponseError,
    ModelServerError,
)

from .conftest import call, make_agent
from .embeddings_server import EmbeddingsServer
from .rag_corpus import DOCUMENTS, QUESTIONS, recall_at


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    srv = EmbeddingsServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
async def embedder(server: EmbeddingsServer) -> AsyncIterator[OpenAIEmbeddings]:
    emb = OpenAIEmbeddings("hash-bow", base_url=server.url, api_key="sk-test", batch_size=5)
    try:
        yield emb
    finally:
        await emb.aclose()


# -- OpenAIEmbeddings -------------------------------------------------------------------------


async def test_request_shape_batching_and_order(server: EmbeddingsServer,
                                                embedder: OpenAIEmbeddings) -> None:
    assert isinstance(embedder, Embeddings)
    server.reverse = True  # rows come back reversed; the client sorts them by index
    texts = [f"text number {i}" for i in range(12)]
    vectors = await embedder.embed(texts)
    assert len(vectors) == 12 and {len(v) for v in vectors} == {256}
    # Same text, same vector: each vector belongs to its own input.
    assert vectors[7] == (await embedder.embed(["text number 7"]))[0]
    batches = [r.body["input"] for r in server.requests[:3]]
    assert [len(b) for b in batches] == [5, 5, 2]
    first = server.requests[0]
    assert first.path == "/v1/embeddings"
    assert first.headers["Authorization"] == "Bearer sk-test"
    assert first.body["model"] == "hash-bow"
    assert first.body["encoding_format"] == "float"
    assert "dimensions" not in first.body
    assert await embedder.embed([]) == []


async def test_dimensions_are_sent(server: EmbeddingsServer) -> None:
    async with OpenAIEmbeddings("m", base_url=server.url, dimensions=64) as emb:
        (vector,) = await emb.embed(["hello"])
    assert len(vector) == 64
    assert server.requests[-1].body["dimensions"] == 64
    assert "Authorization" not in server.requests[-1].headers or emb.api_key


async def test_errors_are_typed(server: EmbeddingsServer, embedder: OpenAIEmbeddings) -> None:
    server.fail_next(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
    with pytest.raises(ModelAuthenticationError, match=r"bad key.*OPENAI_API_KEY"):
        await embedder.embed(["x"])
    server.fail_next(503, {"error": {"message": "overloaded"}})
    with pytest.raises(ModelServerError, match="overloaded"):
        await embedder.embed(["x"])
    server.fail_next(200, {"data": [{"index": 0, "embedding": "AAAA"}]})
    with pytest.raises(ModelResponseError, match="malformed embedding at position 0"):
        await embedder.embed(["x"])
    server.fail_next(200, {"data": []})
    with pytest.raises(ModelResponseError, match="answered 0 embeddings for 1 inputs"):
        await embedder.embed(["x"])
    server.fail_next(200, b"not json")
    with pytest.raises(ModelResponseError, match="not JSON"):
        await embedder.embed(["x"])
    with pytest.raises(ValueError, match="text #1 to embed must be a non-empty str"):
        await embedder.embed(["x", ""])
    with pytest.raises(TypeError, match="not one str"):
        await embedder.embed("x")


async def test_connection_refused_is_a_model_error() -> None:
    async with OpenAIEmbeddings("m", base_url="http://127.0.0.1:9/v1") as emb:
        with pytest.raises(ModelError, match="cannot connect"):
            await emb.embed(["x"])


def test_constructor_checks() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        OpenAIEmbeddings("m", base_url="ftp://x")
    with pytest.raises(ValueError, match="batch_size"):
        OpenAIEmbeddings("m", base_url="http://x", batch_size=0)
    with pytest.raises(ValueError, match="dimensions"):
        OpenAIEmbeddings("m", base_url="http://x", dimensions=0)


# -- VectorKnowledge -----------------------------------------------------------------------


async def test_recall_at_3_on_the_corpus(embedder: OpenAIEmbeddings) -> None:
    kb = VectorKnowledge(embedder)
    assert isinstance(kb, Knowledge)
    assert await kb.add(DOCUMENTS) == len(DOCUMENTS)
    assert kb.dimensions == 256
    recall, missed = await recall_at(kb.search, 3)
    print(f"\nVectorKnowledge recall@3 = {recall:.2f} over {len(QUESTIONS)} questions")
    assert recall >= 0.9, f"recall@3 = {recall:.2f}; missed: {missed}"
    found = await kb.search("two-factor authentication backup codes", 3)
    assert found[0].source == "security.md"
    assert [p.score for p in found] == sorted((p.score for p in found), reverse=True)
    assert 0 < found[0].score <= 1.0 + 1e-6


async def test_filters_replace_and_delete(embedder: OpenAIEmbeddings) -> None:
    kb = VectorKnowledge(embedder, chunk_size=100, chunk_overlap=20)
    await kb.add(DOCUMENTS)
    de = await kb.search("Erstattung Kauf", 3, {"lang": "de"})
    assert {p.source for p in de} == {"erstattung.md"}
    billing = await kb.search("refund", 10, {"team": "billing", "lang": "en"})
    assert {p.source for p in billing} == {"refunds.md", "invoices.md"}
    before = await kb.count()
    await kb.add(Document(text="Refunds are no longer possible.", source="refunds.md",
                          metadata={"lang": "en", "team": "billing"}))
    assert await kb.count() < before
    hits = [p for p in await kb.search("refund", 10) if p.source == "refunds.md"]
    assert [p.text for p in hits] == ["Refunds are no longer possible."]
    assert await kb.delete("refunds.md") == 1
    assert await kb.delete("refunds.md") == 0
    assert all(p.source != "refunds.md" for p in await kb.search("refund", 10))


class _FixedEmbeddings:
    def __init__(self, dim: int) -> None:
        self.dim = dim

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * (self.dim - 1) for _ in texts]


async def test_dimension_mismatch_and_empty_index() -> None:
    kb = VectorKnowledge(_FixedEmbeddings(4))
    assert await kb.search("anything", 3) == []
    await kb.add("first")
    kb.embedder = _FixedEmbeddings(8)
    with pytest.raises(ValueError, match="8-dimensional vectors; this index holds 4"):
        await kb.add("second")
    with pytest.raises(ValueError, match="query vector has 8 dimensions"):
        await kb.search("q", 1)
    with pytest.raises(TypeError, match="async embed"):
        VectorKnowledge(object())  # type: ignore[arg-type]


def test_missing_numpy_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[rag\]'"):
        _knowledge_vector._numpy()


async def test_large_index_is_searched_off_the_loop(monkeypatch: pytest.MonkeyPatch,
                                                    embedder: OpenAIEmbeddings) -> None:
    import threading

    threads: list[str] = []
    real = VectorKnowledge._rank

    def rank(self: Any, *args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(self, *args)

    monkeypatch.setattr(VectorKnowledge, "_rank", rank)
    kb = VectorKnowledge(embedder)
    await kb.add(DOCUMENTS)
    await kb.search("refund", 3)
    monkeypatch.setattr(_knowledge_vector, "_INLINE_ENTRIES", 10)
    found = await kb.search("refund", 3)
    assert found[0].source == "refunds.md"
    assert threads[0] == threading.current_thread().name
    assert threads[1] != threading.current_thread().name


async def test_inject_through_an_agent_with_vector_knowledge(
    embedder: OpenAIEmbeddings,
) -> None:
    kb = VectorKnowledge(embedder)
    await kb.add(DOCUMENTS)
    model = ScriptedModel(["Five business days [1]."])
    agent = make_agent(model, middlewares=[RAGMiddleware(kb, top_k=2)])
    ctx = RuntimeContext(session_id="vec")
    reply = await call(agent, "When are refunds paid back to my card?", ctx)
    assert reply.text == "Five business days [1]."
    sent = model.calls[0].messages[-1]
    assert sent.text.startswith("<knowledge>") and "source: refunds.md" in sent.text
    assert ctx.agent_state is not None
    assert all("<knowledge>" not in m.text for m in ctx.agent_state.context)
