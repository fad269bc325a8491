"""Fixtures over the in-process fakes, defined once; each suite's conftest imports them by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from infra.models import ModelPool
from infra.search.embedded import EmbeddedIndex
from infra.settings import Settings
from nodes.context import Context
from tests.support.data import DOCS
from tests.support.fakes import HashEmbedder


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def index(tmp_path: Path, embedder: HashEmbedder) -> EmbeddedIndex:
    """A small real tantivy index with hash vectors."""
    vectors = embedder.embed_documents([f"{d['title']}. {d['abstract']}" for d in DOCS])
    return EmbeddedIndex.build(
        tmp_path / "index", DOCS, vectors=vectors, embedding_model=embedder.name
    )


@pytest.fixture
def make_context(settings: Settings, index: EmbeddedIndex, embedder: HashEmbedder):
    """Build a Context whose every model role is the given scripted model(s)."""

    def make(
        model: BaseChatModel | None = None,
        *,
        ensemble: list[BaseChatModel] | None = None,
        settings_: Settings | None = None,
        pubmed: Any = None,
        **roles: BaseChatModel,
    ) -> Context:
        chosen = settings_ or settings
        overrides = {
            role: [model]
            for role in ("query", "refine", "organize", "synthesis", "verify")
            if model
        }
        overrides |= {role: [m] for role, m in roles.items()}
        if ensemble or model:
            overrides["ensemble"] = ensemble or [model]
        return Context(
            settings=chosen,
            search=index,
            embedder=embedder,
            models=ModelPool(chosen, overrides=overrides),
            pubmed=pubmed,
        )

    return make
