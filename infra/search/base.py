"""The search backend interface every engine implements: read side, write side, lifecycle."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from infra.records import Document

if TYPE_CHECKING:
    from infra.embeddings import Embedder
    from infra.settings import Settings


class SearchResult:
    """BM25 hits, best first, and how many documents matched in all.

    An engine may hand over its hits as a PMID list and a float32 score array (10,000 hits as
    Python (PMID, score) tuples cost more than tantivy's search); `hits` pairs them on demand.
    """

    def __init__(
        self,
        total: int,
        hits: Sequence[tuple[str, float]] | None = None,
        *,
        pmids: Sequence[str] | None = None,
        scores: np.ndarray | None = None,
    ):
        self.total = int(total)
        if hits is not None:
            pmids = [p for p, _ in hits]
            scores = np.array([s for _, s in hits], dtype=np.float32)
        self.pmids: list[str] = list(pmids or [])
        self.scores: np.ndarray = (
            np.asarray(scores, dtype=np.float32) if scores is not None else np.zeros(0, np.float32)
        )
        if len(self.pmids) != len(self.scores):
            raise ValueError(f"{len(self.pmids)} PMIDs for {len(self.scores)} scores")

    @property
    def hits(self) -> list[tuple[str, float]]:
        """The hits as (PMID, score) pairs, best first."""
        return list(zip(self.pmids, self.scores.tolist(), strict=True))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SearchResult):
            return NotImplemented
        return self.total == other.total and self.hits == other.hits

    def __repr__(self) -> str:
        return f"SearchResult(total={self.total}, hits={len(self.pmids)})"


class SearchBackend(Protocol):
    """A BM25 index over PubMed title+abstract with precomputed document vectors."""

    name: str

    def validate(self, query: str) -> None:
        """Raise QueryError with the reason when `query` may not run here."""
        ...

    def search(self, query: str, limit: int) -> SearchResult:
        """Return the top `limit` BM25 hits (at most 10,000 per request page) and the total."""
        ...

    def fetch(self, pmids: Sequence[str]) -> list[Document]:
        """Return the stored documents for these PMIDs, in order, skipping unknown ones."""
        ...

    def similarities(self, pmids: Sequence[str], vector: np.ndarray) -> np.ndarray | None:
        """Return cosine(vector, stored vector) per PMID, in order; None when no vectors are stored.

        PMIDs without a stored vector score 0. The stored vectors never leave the engine.
        """
        ...

    def rough_similarities(self, pmids: Sequence[str], vector: np.ndarray) -> np.ndarray | None:
        """Return estimates of `similarities` from compact codes; None when the engine keeps none.

        For scoring many candidates in little memory, then
        reading a shortlist exactly (`infra.search.shortlist`).
        """
        ...

    def nearest(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Return the `k` documents whose stored vectors are closest to `vector` (PMID, cosine).

        Best first and exact (every stored vector is compared); empty when no vectors are stored.
        """
        ...

    def has(self, pmid: str) -> bool:
        """Tell whether the index holds this PMID."""
        ...

    def count(self) -> int:
        """Return how many documents the index holds."""
        ...


class IndexWriter(Protocol):
    """Writes documents into an index, idempotently by PMID."""

    def upsert(self, docs: Sequence[dict[str, Any]], vectors: np.ndarray | None) -> int:
        """Add or replace documents (a PMID indexed twice is stored once); return how many."""
        ...

    def delete(self, pmids: Sequence[str]) -> int:
        """Remove documents by PMID; return how many were present."""
        ...

    def commit(self) -> None:
        """Make everything written so far durable and searchable."""
        ...

    def close(self) -> None:
        """Commit and release the index."""
        ...


@dataclass(frozen=True)
class IndexShape:
    """How an opened index is built, as the scale bench reports it beside its timings."""

    shards: int
    """Shards a search runs on at once."""
    segments: int
    """Segments a search walks (each collects its own top hits)."""
    doc_freq: Callable[[str], int]
    """How many documents hold an index term: what BM25's time grows with."""


class Backend(Protocol):
    """One kind of search engine, as `search.backend` names it: opens, writes and drops indexes."""

    def open(self, settings: Settings, embedder: Embedder | None) -> SearchBackend:
        """Open the configured index for searching (the demo index may be built on first use)."""
        ...

    def open_writer(self, settings: Settings, embedder: Embedder | None) -> IndexWriter:
        """Open (creating if needed) the configured index for writing vectors of `embedder`."""
        ...

    def exists(self, settings: Settings) -> bool:
        """Tell whether the configured index exists."""
        ...

    def existing_journal(self, settings: Settings) -> Path | None:
        """Return the configured index's ingestion journal without opening it for writing."""
        ...

    def stored_dims(self, settings: Settings) -> int | None:
        """Return the dimension of the existing index's vectors; None when it stores none."""
        ...

    def drop(self, settings: Settings) -> None:
        """Delete the configured index, if there is one."""
        ...

    def journal_path(self, settings: Settings, writer: IndexWriter) -> Path:
        """Return the ingestion journal of the index `writer` writes, tied to that very index."""
        ...

    def refresh_dense(
        self, settings: Settings, on_progress: Callable[[int, int], None] | None = None
    ) -> str | None:
        """Bring the dense stage up to date after a load (building what it needs); say what."""
        ...

    def shape(self, index: SearchBackend) -> IndexShape | None:
        """Return how `index` (opened by this backend) is built; None where the engine keeps it."""
        ...
