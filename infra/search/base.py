"""The search backend interface every engine implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


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
        """Return the top `limit` BM25 hits for a validated query."""
        ...

    def fetch(self, pmids: Sequence[str]) -> list[dict[str, Any]]:
        """Return the stored documents for these PMIDs, in order, skipping unknown ones."""
        ...

    def vectors(self, pmids: Sequence[str]) -> np.ndarray | None:
        """Return the precomputed unit vectors of these PMIDs (rows in order), if stored."""
        ...

    def count(self) -> int:
        """Return how many documents the index holds."""
        ...
