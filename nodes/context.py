"""Per-run dependencies handed to every node (tests pass fakes here, no monkeypatching)."""

from __future__ import annotations

from dataclasses import dataclass

from infra.embeddings import Embedder
from infra.models import ModelPool
from infra.pubmed import PubMedClient
from infra.rerankers import Reranker
from infra.search.base import SearchBackend
from infra.settings import Settings


@dataclass
class Context:
    """What the nodes of one run may use."""

    settings: Settings
    search: SearchBackend
    embedder: Embedder
    models: ModelPool
    pubmed: PubMedClient | None = None
    reranker: Reranker | None = None
    snippet_scorer: Reranker | None = None
