"""The search backend interface every engine implements: read side, write side, lifecycle."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from infra.embeddings import Embedder
    from infra.settings import Settings


@dataclass
class SearchResult:
    """BM25 hits, best first, and how many documents matched in all."""

    total: int
    hits: list[tuple[str, float]] = field(default_factory=list)


class SearchBackend(Protocol):
    """A BM25 index over PubMed title+abstract with precomputed document vectors."""

    name: str

    def validate(self, query: str) -> None:
        """Raise QueryError with the reason when `query` may not run here."""
        ...

    def search(self, query: str, limit: int) -> SearchResult:
        """Return the top `limit` BM25 hits (at most 10,000 per request page) and the total."""
        ...

    def fetch(self, pmids: Sequence[str]) -> list[dict[str, Any]]:
        """Return the stored documents for these PMIDs, in order, skipping unknown ones."""
        ...

    def similarities(self, pmids: Sequence[str], vector: np.ndarray) -> np.ndarray | None:
        """Return cosine(vector, stored vector) per PMID, in order; None when no vectors are stored.

        PMIDs without a stored vector score 0. The stored vectors never leave the engine.
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
