"""Search backends from settings: open one for searching, or a writer for ingestion."""

from __future__ import annotations

from pathlib import Path

from infra.embeddings import Embedder
from infra.errors import UserError
from infra.ingest.corpus import DEMO_MODEL, IndexMissing, demo_documents, ensure_index
from infra.search.base import IndexWriter, SearchBackend
from infra.search.embedded_store import EmbeddedWriter
from infra.settings import Settings, secret_from_env


def _elastic(settings: Settings, *, create: bool, dims: int | None = None):
    from infra.search.elastic import ElasticIndex

    key = secret_from_env(settings.search.elasticsearch_api_key_env)
    return ElasticIndex(
        url=settings.search.elasticsearch_url,
        index=settings.search.index,
        api_key=key.get_secret_value() if key else None,
        timeout_s=settings.search.timeout_s,
        dims=dims,
        create=create,
    )


class IndexMismatch(UserError):
    """An index holds vectors of another kind than this run would write."""


def open_backend(settings: Settings, embedder: Embedder | None) -> SearchBackend:
    """Open the configured index for searching; the demo index is built on first use."""
    if settings.search.backend == "embedded":
        index = ensure_index(
            settings.index_dir,
            settings.search.index,
            embedder,
            max_prefix=settings.search.max_prefix_expansions,
        )
        stored = index.meta.get("embedding_model")
        if embedder is not None and stored and stored != embedder.name:
            raise IndexMismatch(
                f"index {settings.search.index!r} holds {stored} vectors but the configured "
                f"embedder is {embedder.name}; re-index it or configure {stored}"
            )
        return index
    backend = _elastic(settings, create=False)
    if backend.exists():
        return backend
    if settings.search.index != "demo":
        raise IndexMissing(f"Elasticsearch index {settings.search.index!r} does not exist")
    docs, vectors = demo_documents(embedder)
    writer = _elastic(settings, create=True, dims=vectors.shape[1] if vectors is not None else None)
    writer.upsert(docs, vectors)
    writer.commit()
    return writer


def open_writer(settings: Settings, embedder: Embedder | None) -> IndexWriter:
    """Open (creating if needed) the configured index for writing."""
    dims = embedder.dim if embedder is not None else None
    model = embedder.name if embedder is not None else None
    if settings.search.backend == "embedded":
        path: Path = settings.index_dir
        writer = EmbeddedWriter(path, dims=dims, embedding_model=model)
        stored = writer.meta.get("embedding_model")
        if writer.dims != dims or (dims and stored != model):
            writer.close()
            _mismatch(
                settings, f"{stored} ({writer.dims} dims)" if writer.dims else None, model, dims
            )
        return writer
    writer = _elastic(settings, create=True, dims=dims)
    if writer.dims != dims:
        _mismatch(
            settings, f"{writer.dims}-dimensional vectors" if writer.dims else None, model, dims
        )
    return writer


def _mismatch(settings: Settings, have: str | None, model: str | None, dims: int | None) -> None:
    want = f"{model} ({dims} dims)" if dims else "no vectors"
    raise IndexMismatch(
        f"index {settings.search.index!r} holds {have or 'no vectors'}; "
        f"this run would write {want} "
        "(use --embeddings/--no-embeddings to match, or another --index)"
    )


def drop_index(settings: Settings) -> None:
    """Delete the configured index and its ingestion journal (benchmarks start from nothing)."""
    import shutil

    if settings.search.backend == "embedded":
        shutil.rmtree(settings.index_dir, ignore_errors=True)
    else:
        _elastic(settings, create=False).drop()
    # Journals live in the embedded index or are keyed by the Elasticsearch index's UUID.


__all__ = ["DEMO_MODEL", "drop_index", "open_backend", "open_writer"]
