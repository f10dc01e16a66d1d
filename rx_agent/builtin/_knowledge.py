"""What every knowledge base shares: the records, the protocol, chunking and filters.

:class:`Knowledge` is what :class:`~rx_agent.RAGMiddleware` needs of a knowledge base;
:class:`~rx_agent.SqliteKnowledge` (full text, BM25) and
:class:`~rx_agent.VectorKnowledge` (embeddings) implement it, and so can any other
store (a vector database, a search service).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "Document",
    "Knowledge",
    "Passage",
    "check_chunking",
    "check_filters",
    "check_top_k",
    "chunk_text",
    "documents_of",
    "matches",
    "query_terms",
    "render_passages",
]


class Document(BaseModel):
    """A text to index. ``source`` is its identity: adding it again replaces it."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    text: str
    """The whole text; the knowledge base splits it into overlapping chunks."""
    source: str
    """Where it comes from (a file name, a URL); shown to the model with each passage."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """JSON values searches can filter on (``filters={"lang": "en"}``)."""

    @field_validator("source")
    @classmethod
    def _source_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a document's source must not be blank")
        return value


class Passage(BaseModel):
    """One retrieved chunk of a document, best first in a search's answer."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    text: str
    """The chunk's text."""
    source: str
    """The source of the document it belongs to."""
    score: float
    """Relevance (higher is better; comparable within one search only)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """The document's metadata."""
    chunk: int = 0
    """The chunk's position in its document (0-based)."""


@runtime_checkable
class Knowledge(Protocol):
    """A knowledge base a :class:`~rx_agent.RAGMiddleware` searches.

    ``search`` returns at most ``top_k`` passages, best first, whose document
    metadata matches every ``filters`` entry (a value, or a list of accepted values);
    ``add`` indexes documents (a ``str`` is a document whose source is derived from
    its text) and returns how many chunks it stored.
    """

    async def search(
        self, query: str, top_k: int = 5, filters: Mapping[str, Any] | None = None
    ) -> list[Passage]: ...

    async def add(self, documents: Iterable[Document | str]) -> int: ...


# -- arguments ---------------------------------------------------------------------------

_FILTER_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SCALARS = (str, int, float, bool)


def check_top_k(top_k: object, label: str = "top_k") -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"{label} must be an int >= 1, got {top_k!r}")
    return top_k


def check_chunking(chunk_size: object, chunk_overlap: object) -> tuple[int, int]:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 20:
        raise ValueError(f"chunk_size must be an int >= 20 (characters), got {chunk_size!r}")
    if (isinstance(chunk_overlap, bool) or not isinstance(chunk_overlap, int)
            or not 0 <= chunk_overlap < chunk_size // 2):
        raise ValueError(
            f"chunk_overlap must be an int from 0 to less than half of chunk_size "
            f"({chunk_size // 2}), got {chunk_overlap!r}"
        )
    return chunk_size, chunk_overlap


def check_filters(filters: Mapping[str, Any] | None) -> dict[str, tuple[Any, ...]]:
    """``filters`` with every value as a tuple of accepted values, or a clear error."""
    if filters is None:
        return {}
    if not isinstance(filters, Mapping):
        raise TypeError(f"filters must be a mapping of metadata keys to values, "
                        f"got {type(filters).__name__}")
    out: dict[str, tuple[Any, ...]] = {}
    for key, value in filters.items():
        if not isinstance(key, str) or not _FILTER_KEY.fullmatch(key):
            raise ValueError(f"filter key {key!r} is invalid: use 1-64 letters, digits, "
                             "'_' or '-'")
        values = tuple(value) if isinstance(value, (list, tuple, set, frozenset)) else (value,)
        if not values:
            raise ValueError(f"filter {key!r} lists no accepted value")
        for v in values:
            if v is not None and not isinstance(v, _SCALARS):
                raise TypeError(f"filter {key!r} accepts str, int, float, bool or None "
                                f"values, got {type(v).__name__} {v!r}")
        out[key] = values
    return out


def matches(metadata: Mapping[str, Any], filters: Mapping[str, tuple[Any, ...]]) -> bool:
    """Whether ``metadata`` passes checked ``filters`` (``None`` accepts a missing key)."""
    for key, accepted in filters.items():
        value = metadata.get(key)
        if not any(_same(value, a) for a in accepted):
            return False
    return True


def _same(value: Any, accepted: Any) -> bool:
    # JSON (and SQLite's json_extract) keep true apart from 1 only loosely; here a
    # bool filter matches bools only, so {"draft": True} never matches {"draft": 1}.
    if isinstance(accepted, bool) or isinstance(value, bool):
        return type(value) is type(accepted) and value == accepted
    return bool(value == accepted)


def documents_of(documents: Iterable[Document | str] | Document | str) -> list[Document]:
    if isinstance(documents, (str, Document)):
        documents = [documents]
    out: list[Document] = []
    for i, item in enumerate(documents):
        if isinstance(item, str):
            digest = hashlib.sha1(item.encode("utf-8", "surrogatepass")).hexdigest()[:12]
            out.append(Document(text=item, source=f"text:{digest}"))
        elif isinstance(item, Document):
            out.append(item)
        else:
            raise TypeError(f"document #{i} must be a Document or a str, "
                            f"got {type(item).__name__}")
    return out


# -- text ----------------------------------------------------------------------------------


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """``text`` in pieces of at most ``size`` characters; each piece starts about
    ``overlap`` characters before the previous one ended, so a sentence cut at a
    boundary is whole in one of the two. Cuts fall on a paragraph break, else a
    sentence end, else a space, in the second half of the window when there is one."""
    text = text.strip()
    if not text:
        return []
    chunks: list[str] = []
    start, n = 0, len(text)
    while start < n:
        end = min(start + size, n)
        if end < n:
            end = _boundary(text, start + size // 2, end)
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= n:
            break
        nxt = max(end - overlap, start + 1)
        if overlap and not text[nxt - 1].isspace():
            # Start the overlap at a word, not in the middle of one.
            space = _next_space(text, nxt, end)
            if space is not None:
                nxt = space + 1
        start = nxt
    return chunks


def _boundary(text: str, lo: int, hi: int) -> int:
    for sep in ("\n\n", "\n", ". ", "? ", "! ", "; ", " "):
        at = text.rfind(sep, lo, hi)
        if at != -1:
            return at + len(sep)
    return hi  # one long word: a hard cut


def _next_space(text: str, lo: int, hi: int) -> int | None:
    for i in range(lo, hi):
        if text[i].isspace():
            return i
    return None


_WORD = re.compile(r"\w+")
_STOPWORDS = frozenset(re.findall(r"\w+", """
    a an and are as at be by can do does did for from has have how i if in is it its
    me my of on or our so than that the their them then there these they this to us
    was we were what when where which who whom why will with would you your"""))
_MAX_TERMS = 32


def query_terms(query: str) -> list[str]:
    """The words of ``query`` worth searching for (stop words dropped unless nothing
    else is left), lower-cased, each once, at most 32."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    kept = [w for w in words if w not in _STOPWORDS]
    return (kept or words)[:_MAX_TERMS]


def render_passages(passages: Sequence[Passage]) -> str:
    """Passages as the model reads them: numbered, each with its source."""
    # Scores stay out: they mean little to a model and differ between knowledge bases.
    return "\n\n".join(f"[{i}] source: {p.source}\n{p.text}" for i, p in enumerate(passages, 1))
