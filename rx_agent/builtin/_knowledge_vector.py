"""``VectorKnowledge``: chunks embedded by an :class:`~rx_agent.Embeddings` model, kept in
an in-process numpy index and ranked by cosine similarity.

numpy comes with the ``rag`` extra and is imported when the first index is built.
The index lives in memory (rebuild it at start-up, or use a vector database behind
the :class:`~rx_agent.Knowledge` protocol for a large or shared corpus).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..model.embeddings import Embeddings
from ._knowledge import (
    Document,
    Passage,
    check_chunking,
    check_filters,
    check_top_k,
    chunk_text,
    documents_of,
    matches,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["VectorKnowledge"]

# Below this many matrix entries a search runs inline: a thread hop costs more than
# the product itself (about 0.3 ms per million float32 entries).
_INLINE_ENTRIES = 1_000_000


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:
        raise ImportError(
            "VectorKnowledge needs numpy: pip install -e '.[rag]' (from a checkout) or "
            "pip install numpy"
        ) from exc
    return numpy


@dataclass(frozen=True, slots=True)
class _Row:
    source: str
    seq: int
    text: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Index:
    rows: tuple[_Row, ...]
    matrix: NDArray[np.float32] | None  # unit vectors, one row per chunk


class VectorKnowledge:
    """A :class:`~rx_agent.Knowledge` base ranked by embedding similarity.

    ``embedder`` turns texts into vectors (:class:`~rx_agent.OpenAIEmbeddings`, or
    any object with ``async embed(texts) -> list[list[float]]``). Documents are split
    into chunks of at most ``chunk_size`` characters overlapping by about
    ``chunk_overlap``; each chunk is embedded once, when added. A search embeds the
    query and returns the chunks with the highest cosine similarity (the score).

    Safe to share: an addition builds a new index and swaps it in, so searches never
    see half of one. Large indexes are searched on a worker thread.
    """

    def __init__(
        self,
        embedder: Embeddings,
        *,
        chunk_size: int = 800,
        chunk_overlap: int = 120,
    ) -> None:
        if not callable(getattr(embedder, "embed", None)):
            raise TypeError(
                f"embedder must have an `async embed(texts) -> list[list[float]]` method, "
                f"got {type(embedder).__name__}"
            )
        self._np = _numpy()
        self.embedder = embedder
        self.chunk_size, self.chunk_overlap = check_chunking(chunk_size, chunk_overlap)
        self._index = _Index((), None)
        self._lock = threading.Lock()  # additions from several loops or threads

    def __repr__(self) -> str:
        return f"VectorKnowledge({self.embedder!r}, chunks={len(self._index.rows)})"

    @property
    def dimensions(self) -> int | None:
        """The vectors' length (``None`` before the first addition)."""
        matrix = self._index.matrix
        return None if matrix is None else int(matrix.shape[1])

    async def add(self, documents: Iterable[Document | str] | Document | str) -> int:
        """Embed and index ``documents`` (replacing any with the same source); the
        chunk count."""
        docs = documents_of(documents)
        rows = [
            _Row(d.source, seq, text, dict(d.metadata))
            for d in docs
            for seq, text in enumerate(chunk_text(d.text, self.chunk_size, self.chunk_overlap))
        ]
        vectors = await self.embedder.embed([r.text for r in rows]) if rows else []
        if len(vectors) != len(rows):
            raise ValueError(f"the embedder returned {len(vectors)} vectors for "
                             f"{len(rows)} chunks")
        xp = self._np
        block = self._unit(xp.asarray(vectors, dtype=xp.float32)) if rows else None
        if block is not None and block.ndim != 2:
            raise ValueError("the embedder must return one flat vector per text")
        replaced = {d.source for d in docs}
        with self._lock:
            old = self._index
            if (block is not None and old.matrix is not None
                    and block.shape[1] != old.matrix.shape[1]):
                raise ValueError(
                    f"the embedder returned {block.shape[1]}-dimensional vectors; this "
                    f"index holds {old.matrix.shape[1]}-dimensional ones"
                )
            keep = [i for i, r in enumerate(old.rows) if r.source not in replaced]
            kept_rows = tuple(old.rows[i] for i in keep)
            parts = []
            if old.matrix is not None and keep:
                parts.append(old.matrix[keep])
            if block is not None:
                parts.append(block)
            matrix = xp.vstack(parts) if parts else None
            self._index = _Index((*kept_rows, *rows), matrix)
        return len(rows)

    async def search(
        self, query: str, top_k: int = 5, filters: Mapping[str, Any] | None = None
    ) -> list[Passage]:
        """The ``top_k`` chunks most similar to ``query`` whose metadata passes
        ``filters``."""
        check_top_k(top_k)
        checked = check_filters(filters)
        index = self._index
        if index.matrix is None or not query.strip():
            return []
        (vector,) = await self.embedder.embed([query])
        xp = self._np
        q = self._unit(xp.asarray(vector, dtype=xp.float32))
        if q.shape != (index.matrix.shape[1],):
            raise ValueError(f"the query vector has {q.size} dimensions; the index holds "
                             f"{index.matrix.shape[1]}-dimensional ones")
        if index.matrix.size <= _INLINE_ENTRIES:
            return self._rank(index, q, top_k, checked)
        return await asyncio.to_thread(self._rank, index, q, top_k, checked)

    async def delete(self, source: str) -> int:
        """Remove the document ``source``; the number of chunks removed."""
        with self._lock:
            old = self._index
            keep = [i for i, r in enumerate(old.rows) if r.source != source]
            if len(keep) == len(old.rows):
                return 0
            matrix = old.matrix[keep] if old.matrix is not None and keep else None
            self._index = _Index(tuple(old.rows[i] for i in keep), matrix)
            return len(old.rows) - len(keep)

    async def count(self) -> int:
        """How many chunks are indexed."""
        return len(self._index.rows)

    def _unit(self, vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        xp = self._np
        norms = xp.linalg.norm(vectors, axis=-1, keepdims=True)
        out: NDArray[np.float32] = vectors / xp.maximum(norms, 1e-12)
        return out

    def _rank(self, index: _Index, q: NDArray[np.float32], top_k: int,
              filters: dict[str, tuple[Any, ...]]) -> list[Passage]:
        xp = self._np
        assert index.matrix is not None
        scores = index.matrix @ q
        if filters:
            # Best first, taking the first top_k that pass: cheap when most do.
            order = xp.argsort(-scores, kind="stable")
            chosen = []
            for i in order:
                if matches(index.rows[i].metadata, filters):
                    chosen.append(int(i))
                    if len(chosen) == top_k:
                        break
        else:
            k = min(top_k, scores.shape[0])
            top = xp.argpartition(-scores, k - 1)[:k]
            chosen = [int(i) for i in top[xp.argsort(-scores[top], kind="stable")]]
        return [
            Passage(text=index.rows[i].text, source=index.rows[i].source,
                    score=float(scores[i]), metadata=dict(index.rows[i].metadata),
                    chunk=index.rows[i].seq)
            for i in chosen
        ]
