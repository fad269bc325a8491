"""`quorum bench retrieval`: the embedded engine and Elasticsearch side by side.

Figures: ingestion docs/s without vectors and with precomputed vectors, embedding docs/s,
query latency for 10,000 BM25 candidates → cosine fusion → top 300, and the embedded query
path's peak resident memory (measured in a child process that loads no model).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from infra.bioasq.formats import Question
from infra.embeddings import Embedder, HuggingFaceEmbedder, document_text
from infra.ingest.sources import normalize
from infra.search.backends import drop_index, open_backend, open_writer
from infra.search.corpus import read_jsonl
from infra.search.keywords import keyword_query
from infra.settings import Settings
from lab.bench.query import CANDIDATES, TOP_K, query_latency

# Every abstract contains "the": OR-ing it in makes each query return the full 10,000 candidates.
BROADEN = " OR the"


def corpus_vectors(
    settings: Settings, docs: Sequence[dict[str, Any]], embedder: Embedder
) -> tuple[np.ndarray, float]:
    """Embed the corpus once (cached in QUORUM_HOME/bench); return vectors and docs/s."""
    digest = hashlib.sha256("".join(d["pmid"] for d in docs).encode()).hexdigest()[:16]
    cache = settings.home / "bench" / f"vectors-{embedder.name}-{digest}.npz"
    if cache.exists():
        stored = np.load(cache)
        return stored["vectors"], float(stored["docs_per_s"])
    started = time.perf_counter()
    vectors = embedder.embed_documents([document_text(d["title"], d["abstract"]) for d in docs])
    rate = len(docs) / (time.perf_counter() - started)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, vectors=vectors, docs_per_s=rate)
    return vectors, rate


def ingest_rate(
    settings: Settings,
    docs: list[dict[str, Any]],
    vectors: np.ndarray | None,
    dims_from: Embedder | None,
) -> float:
    """Index the corpus into a fresh bench index; return docs/s (vectors precomputed when given)."""
    writer = open_writer(settings, dims_from)
    started = time.perf_counter()
    for i in range(0, len(docs), 1000):
        writer.upsert(docs[i : i + 1000], None if vectors is None else vectors[i : i + 1000])
    writer.close()
    return len(docs) / (time.perf_counter() - started)


def bench_retrieval(
    settings: Settings, corpus: Path, questions: Sequence[Question], backends: Sequence[str]
) -> dict[str, Any]:
    """Run the side-by-side benchmark; return one JSON-able report."""
    docs = [normalize(d) for d in read_jsonl(corpus)]
    embedder = HuggingFaceEmbedder(settings.embeddings)
    vectors, embed_rate = corpus_vectors(settings, docs, embedder)
    queries = [keyword_query(q.body) + BROADEN for q in questions]
    started = time.perf_counter()
    question_vectors = embedder.embed_documents([q.body for q in questions])
    embed_query_ms = (time.perf_counter() - started) * 1000 / max(1, len(questions))
    report: dict[str, Any] = {
        "corpus_docs": len(docs),
        "questions": len(questions),
        "candidates": CANDIDATES,
        "top_k": TOP_K,
        "embedding_docs_per_s": round(embed_rate, 1),
        "embed_question_ms": round(embed_query_ms, 2),
        "machine": f"{multiprocessing.cpu_count()} cores",
    }
    for name in backends:
        plain = _with(settings, name, "bench-plain")
        dense = _with(settings, name, "bench-vectors")
        figures: dict[str, Any] = {
            "ingest_docs_per_s_without_vectors": round(ingest_rate(plain, docs, None, None), 1),
            "ingest_docs_per_s_with_precomputed_vectors": round(
                ingest_rate(dense, docs, vectors, embedder), 1
            ),
        }
        figures["ingest_docs_per_s_with_embedding"] = round(
            1 / (1 / figures["ingest_docs_per_s_with_precomputed_vectors"] + 1 / embed_rate), 1
        )
        if name == "embedded":
            figures |= _embedded_in_child(dense, queries, question_vectors)
        else:
            figures |= query_latency(open_backend(dense, None), queries, question_vectors)
        report[name] = figures
        print(f"{name}: {figures}", file=sys.stderr)
    return report


def _embedded_in_child(
    settings: Settings, queries: list[str], vectors: np.ndarray
) -> dict[str, Any]:
    """Time the embedded query path in a fresh interpreter that imports no model (honest memory)."""
    inputs = settings.home / "bench" / "queries.npz"
    np.savez(inputs, queries=np.array(queries, dtype=object), vectors=vectors)
    done = subprocess.run(
        [sys.executable, "-m", "lab.bench.query", str(settings.index_dir), str(inputs)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def _with(settings: Settings, backend: str, index: str) -> Settings:
    changed = settings.model_copy(
        update={"search": settings.search.model_copy(update={"backend": backend, "index": index})}
    )
    drop_index(changed)
    return changed
