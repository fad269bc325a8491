"""Search backends by their settings name: open one for searching, or a writer for ingestion.

BACKENDS is the one list of backends: `search.backend` names a key (its settings Literal is
checked against these keys by a test), the CLI's --backend choices are these keys, and a name
that is not here is a one-line settings error, never another backend.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import cast

from infra.embeddings import Embedder
from infra.errors import UserError
from infra.search.base import Backend, IndexShape, IndexWriter, SearchBackend
from infra.search.corpus import DEMO_MODEL, IndexMissing, demo_documents, ensure_index
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_open import read_meta
from infra.search.embedded_store import META, EmbeddedWriter
from infra.settings import Settings, SettingsError, secret_from_env


class IndexMismatch(UserError):
    """An index holds vectors of another kind than this run would write."""


class Embedded:
    """tantivy and numpy files under QUORUM_HOME/indexes/<index>: no server."""

    def open(self, settings: Settings, embedder: Embedder | None) -> SearchBackend:
        """Open the index directory; the demo index is built there on first use."""
        try:
            index = ensure_index(
                settings.index_dir,
                settings.search.index,
                embedder,
                max_prefix=settings.search.max_prefix_expansions,
            )
        except IndexMissing:
            raise _missing(settings, self.index_names(settings), "") from None
        index.dense_stage(
            ann_rows=settings.search.dense_ann_rows, share=settings.search.dense_ann_share
        )
        stored = index.meta.get("embedding_model")
        if embedder is not None and stored and stored != embedder.name:
            raise IndexMismatch(
                f"index {settings.search.index!r} holds {stored} vectors but the configured "
                f"embedder is {embedder.name}; compute its vectors with `quorum embed --index "
                f"{settings.search.index}`, or configure {stored}"
            )
        return index

    def open_writer(self, settings: Settings, embedder: Embedder | None) -> IndexWriter:
        """Open (creating if needed) the index directory for writing.

        Without an embedder, an index that stores vectors takes the documents without them:
        `quorum embed` fills them in later.
        """
        dims = embedder.dim if embedder is not None else None
        model = embedder.name if embedder is not None else None
        writer = EmbeddedWriter(
            settings.index_dir,
            dims=dims,
            embedding_model=model,
            vectors_later=dims is None,
            shards=settings.search.embedded_shards,
        )
        stored = writer.meta.get("embedding_model")
        if (dims and writer.dims != dims) or (dims and stored != model):
            writer.close()
            _mismatch(
                settings, f"{stored} ({writer.dims} dims)" if writer.dims else None, model, dims
            )
        return writer

    def exists(self, settings: Settings) -> bool:
        """Tell whether the configured index holds a committed index."""
        return (settings.index_dir / META).exists()

    def index_names(self, settings: Settings) -> list[str]:
        """Return the indexes under QUORUM_HOME/indexes."""
        root = settings.index_dir.parent
        return sorted(p.name for p in root.glob("*") if (p / META).exists())

    def drop(self, settings: Settings) -> None:
        """Delete the index directory, its journal with it."""
        shutil.rmtree(settings.index_dir, ignore_errors=True)

    def journal_path(self, settings: Settings, writer: IndexWriter) -> Path:
        """Return the journal inside the index directory: a re-created index starts over."""
        return settings.index_dir / "ingest-journal.json"

    def existing_journal(self, settings: Settings) -> Path | None:
        """Return the journal of the configured index if the index exists (nothing is opened)."""
        return settings.index_dir / "ingest-journal.json" if self.exists(settings) else None

    def stored_dims(self, settings: Settings) -> int | None:
        """Return the existing index's vector dimension from its meta file (nothing opened)."""
        return read_meta(settings.index_dir).get("dims") if self.exists(settings) else None

    def refresh_dense(
        self, settings: Settings, on_progress: Callable[[int, int], None] | None = None
    ) -> str | None:
        """Build the IVF index and row codes when the vectors have outgrown the last ones."""
        if not self.exists(settings):
            return None
        index = EmbeddedIndex(settings.index_dir)
        index.dense_stage(
            ann_rows=settings.search.dense_ann_rows,
            share=settings.search.dense_ann_share,
            codes_rows=settings.search.row_codes_rows,
        )
        said = []
        built = index.refresh_ann(on_progress)
        if built is not None:
            said.append(
                f"the dense stage's IVF index: {built.rows:,} rows in {built.lists:,} lists"
            )
        codes = index.refresh_row_codes(on_progress)
        if codes is not None:
            said.append(f"row codes for reranking: {codes.rows:,} rows")
        return "built " + "; ".join(said) if said else None

    def shape(self, index: SearchBackend) -> IndexShape:
        """Return the tantivy shards and segments a search walks, and its term counts."""
        embedded = cast(EmbeddedIndex, index)  # what `open` returns
        return IndexShape(embedded.shards, embedded.segments(), embedded.doc_freq)


class Elasticsearch:
    """An Elasticsearch index at `search.elasticsearch_url`."""

    def open(self, settings: Settings, embedder: Embedder | None) -> SearchBackend:
        """Open the index; only the demo index is created (and filled) when missing."""
        backend = _elastic(settings, create=False)
        if backend.exists():
            return backend
        if settings.search.index != "demo":
            raise _missing(settings, backend.index_names(), f"on {backend.url}")
        docs, vectors = demo_documents(embedder)
        dims = vectors.shape[1] if vectors is not None else None
        writer = _elastic(settings, create=True, dims=dims)
        writer.upsert(docs, vectors)
        writer.commit()
        return writer

    def open_writer(self, settings: Settings, embedder: Embedder | None) -> IndexWriter:
        """Open (creating if needed) the index for a bulk load (settings put back at close).

        Without an embedder, an index that stores vectors takes the documents without them:
        `quorum embed` adds them later.
        """
        dims = embedder.dim if embedder is not None else None
        model = embedder.name if embedder is not None else None
        writer = _elastic(settings, create=True, dims=dims, model=model)
        if dims is not None and writer.dims != dims:
            _mismatch(
                settings, f"{writer.dims}-dimensional vectors" if writer.dims else None, model, dims
            )
        writer.begin_bulk()
        return writer

    def exists(self, settings: Settings) -> bool:
        """Tell whether the configured index exists on the server."""
        return _elastic(settings, create=False).exists()

    def drop(self, settings: Settings) -> None:
        """Delete the index; its journal is keyed by the index's UUID, so it is never reused."""
        _elastic(settings, create=False).drop()

    def journal_path(self, settings: Settings, writer: IndexWriter) -> Path:
        """Return a journal under QUORUM_HOME keyed by the index's UUID."""
        return _es_journal(settings, writer.identity())  # the index UUID open_writer made

    def existing_journal(self, settings: Settings) -> Path | None:
        """Return the journal of the configured index if it exists on the server."""
        index = _elastic(settings, create=False)
        return _es_journal(settings, index.identity()) if index.exists() else None

    def stored_dims(self, settings: Settings) -> int | None:
        """Return the index's vector dimension from its mapping."""
        return _elastic(settings, create=False).dims

    def refresh_dense(
        self, settings: Settings, on_progress: Callable[[int, int], None] | None = None
    ) -> str | None:
        """Build nothing: Elasticsearch indexes vectors as they arrive.

        search.elasticsearch_vector_index chooses an exact scan or Elasticsearch's HNSW graph.
        """
        return None

    def shape(self, index: SearchBackend) -> None:
        """Return nothing: the node reports its segments itself (the scale bench reads them)."""
        return None


BACKENDS: dict[str, Backend] = {"embedded": Embedded(), "elasticsearch": Elasticsearch()}
"""Every search backend by its `search.backend` name."""


def backend_for(settings: Settings) -> Backend:
    """Return the configured backend; an unknown name is a one-line settings error."""
    name = settings.search.backend
    if name not in BACKENDS:
        raise SettingsError(
            f"invalid setting search.backend: unknown backend {name!r}; "
            f"choose {' or '.join(BACKENDS)}"
        )
    return BACKENDS[name]


def open_backend(settings: Settings, embedder: Embedder | None) -> SearchBackend:
    """Open the configured index for searching; the demo index is built on first use."""
    return backend_for(settings).open(settings, embedder)


def open_writer(settings: Settings, embedder: Embedder | None) -> IndexWriter:
    """Open (creating if needed) the configured index for writing."""
    return backend_for(settings).open_writer(settings, embedder)


def existing_journal(settings: Settings) -> Path | None:
    """Return the configured index's ingestion journal, or None when the index does not exist."""
    return backend_for(settings).existing_journal(settings)


def stored_dims(settings: Settings) -> int | None:
    """Return the configured index's vector dimension; None when it stores no vectors."""
    return backend_for(settings).stored_dims(settings)


def check_index_named(settings: Settings) -> None:
    """Refuse, at once, an embedded index that does not exist (before any model loads).

    Opening one is where the same error otherwise comes, after torch and the embedder loaded
    (7 s on 2 cores); the demo index is built on first use, and Elasticsearch is asked when
    the index opens (a server is no file to look at).
    """
    if settings.search.backend != "embedded" or settings.search.index == "demo":
        return
    embedded = BACKENDS["embedded"]
    if not embedded.exists(settings):
        raise _missing(settings, embedded.index_names(settings), "")


def index_exists(settings: Settings) -> bool:
    """Tell whether the configured index exists."""
    return backend_for(settings).exists(settings)


def check_elasticsearch(settings: Settings) -> None:
    """Fail at once, naming the URL and how to start a node, when the settings' node is silent.

    The check `open_backend` makes, with the API key named by the settings, for a command that
    is about to spend hours before it first reaches the node.
    """
    _elastic(settings, create=False)


def refresh_dense(
    settings: Settings, on_progress: Callable[[int, int], None] | None = None
) -> str | None:
    """Bring the configured index's dense stage up to date after a load; say what was built."""
    return backend_for(settings).refresh_dense(settings, on_progress)


def drop_index(settings: Settings) -> None:
    """Delete the configured index and its ingestion journal (benchmarks start from nothing)."""
    backend_for(settings).drop(settings)


def journal_path(settings: Settings, writer: IndexWriter) -> Path:
    """Return the ingestion journal of the index `writer` writes: a re-created one starts over."""
    return backend_for(settings).journal_path(settings, writer)


def _elastic(
    settings: Settings, *, create: bool, dims: int | None = None, model: str | None = None
):
    from infra.search.elastic import ElasticIndex

    search = settings.search
    key = secret_from_env(search.elasticsearch_api_key_env)
    index = ElasticIndex(
        url=search.elasticsearch_url,
        index=search.index,
        api_key=key.get_secret_value() if key else None,
        timeout_s=search.timeout_s,
        max_prefix_expansions=search.max_prefix_expansions,
        shards=search.elasticsearch_shards,
        replicas=search.elasticsearch_replicas,
        vector_index=search.elasticsearch_vector_index,
        knn_candidates=search.elasticsearch_knn_candidates,
        embedding_model=model,
        bulk_threads=search.elasticsearch_bulk_threads,
        bulk_docs=search.elasticsearch_bulk_docs,
    )
    index.check_reachable()
    if create:
        index.create(dims)
    return index


def _es_journal(settings: Settings, identity: str) -> Path:
    return settings.home / "ingest" / f"elasticsearch-{settings.search.index}-{identity}.json"


def _missing(settings: Settings, names: list[str], where: str) -> IndexMissing:
    name = settings.search.index
    there = f" {where}" if where else ""
    known = f"existing: {', '.join(names)}" if names else "no index exists yet"
    return IndexMissing(
        f"index {name!r} does not exist{there} ({known}); build it with "
        f"`quorum index FILE... --index {name}`, or name another with --index"
    )


def _mismatch(settings: Settings, have: str | None, model: str | None, dims: int | None) -> None:
    want = f"{model} ({dims} dims)" if dims else "no vectors"
    raise IndexMismatch(
        f"index {settings.search.index!r} holds {have or 'no vectors'}; "
        f"this run would write {want} "
        "(use --embeddings/--no-embeddings to match, or another --index)"
    )


__all__ = [
    "BACKENDS",
    "DEMO_MODEL",
    "backend_for",
    "drop_index",
    "journal_path",
    "open_backend",
    "open_writer",
    "stored_dims",
]
