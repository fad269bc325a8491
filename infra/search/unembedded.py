"""What both engines hand `quorum embed`: a batch of stored documents that lack vectors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Unembedded:
    """Documents without vectors, keyed as their engine writes vectors back, and scan progress."""

    keys: list[Any]
    """Rows (embedded engine) or PMIDs (Elasticsearch), one per document."""
    docs: list[dict[str, Any]]
    """`pmid`, `title` and `abstract` of each."""
    through: int
    """The embedded engine's scan position: every row below it has been looked at."""
