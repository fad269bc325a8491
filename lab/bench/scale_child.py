"""The measured halves of `quorum bench scale`, each run in a fresh interpreter.

`ingest` writes one synthetic corpus into one backend and reports the writer's docs/s, the
index's disk size and the process's peak memory; `query` opens the index (timing the open and
the memory it takes) and times BM25 top-1000, the default 10,000 → 300 path and the dense stage;
`dense` times the dense stage's IVF index at several shares against the exact top 100; `peer` and
`fidelity`, which hold a whole corpus in memory, are in scale_peers.py. None loads a model, so
the memory is the engine's own.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infra.search.ann import ANN_FILE, ANN_META
from infra.search.backends import backend_for, open_backend, open_writer, refresh_dense
from infra.search.embedded import EmbeddedIndex
from infra.search.embedded_layout import SCALES, VECTORS, mapped
from infra.search.row_codes import CENTROIDS, CODES
from infra.search.row_codes import META as CODES_META
from infra.settings import load_settings
from lab.bench.query import TOP_K, default_path, evict, peak_rss_mib, resident_mib
from lab.bench.recall import K, judged, tie_aware_recall
from lab.bench.scale_peers import fidelity, peer, percentile, real_docs
from lab.bench.synthetic import SentencePool, postings_share

VECTOR_SIDE = (VECTORS, SCALES, ANN_FILE, ANN_META, CODES, CENTROIDS, CODES_META)
"""An embedded index's files that hold vectors or are built from them."""

COMMIT_EVERY = 100_000
"""Documents between commits while loading (a journal would record each)."""
DENSE_SHARES = (0.0625, 0.125, 0.25)
"""Shares of the IVF lists the `dense` child times and judges: search.dense_ann_share (1/4, chosen
on real vectors: docs/retrieval.md) and two below it, for what a smaller one would cost in recall
at a size real vectors cannot reach here."""
DENSE_RECALL_QUESTIONS = 100
"""Questions whose exact top 100 is found for the recall (one pass over every vector for all)."""
EXACT_BLOCK = 262_144
"""Rows scored at once by the exact pass (400 MiB as float32 at 384 dims)."""
PROGRESS = "progress: "
"""How a child's stderr line starts when the parent passes it on (the rest stays in its tail)."""
PROGRESS_EVERY_S = 30.0
"""Seconds between progress lines: a 26 M load writes for some 20 minutes, its IVF index 50."""


class Progress:
    """Say on stderr, at most every `every_s` seconds and once at the end, how far `what` is."""

    def __init__(self, what: str, every_s: float = PROGRESS_EVERY_S) -> None:
        self.what, self.every_s = what, every_s
        self.started = self.said = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        """Record that `done` of `total` are done; print a line when one is due."""
        now = time.monotonic()
        if now - self.said < self.every_s and done < total:
            return
        self.said = now
        rate = done / max(now - self.started, 1e-9)
        print(
            f"{PROGRESS}{self.what}: {done:,} of {total:,} ({rate:,.0f}/s)",
            file=sys.stderr,
            flush=True,
        )


@dataclass
class Precomputed:
    """What a writer needs to know of vectors computed elsewhere: their model and size."""

    name: str
    dim: int


def ingest(job: dict[str, Any]) -> dict[str, Any]:
    """Write the job's synthetic corpus into a fresh index; time only the writer."""
    settings = load_settings(**job["settings"])
    docs = real_docs(job)
    vectors = np.load(job["vectors"]) if job.get("vectors") else None
    pool = SentencePool(docs, vectors)
    spec = Precomputed(job["model"], int(vectors.shape[1])) if vectors is not None else None
    started = time.perf_counter()
    writer = open_writer(settings, spec)
    writing = time.perf_counter() - started
    written = since = 0
    progress = Progress("documents written")
    for batch in pool.batches(job["size"], seed=job["seed"]):
        started = time.perf_counter()
        writer.upsert(batch.docs, batch.vectors)
        written += len(batch.docs)
        since += len(batch.docs)
        if since >= COMMIT_EVERY:
            writer.commit()
            since = 0
        writing += time.perf_counter() - started
        progress(written, job["size"])
    started = time.perf_counter()
    writer.close()
    writing += time.perf_counter() - started
    dense: dict[str, Any] = {}
    if vectors is not None:  # what `quorum index` does next: the dense stage's IVF index
        started = time.perf_counter()
        built = refresh_dense(settings, Progress("rows in the dense stage's IVF lists"))
        if built:
            dense = {"dense_index_s": round(time.perf_counter() - started, 1)}
    return {
        "docs": written,
        "docs_per_s": round(written / writing, 1),
        "peak_rss_mib": peak_rss_mib(),
        **dense,
        **disk(settings),
    }


def disk(settings: Any) -> dict[str, Any]:
    """Return the index's size on disk (Elasticsearch: primaries, and the node's heap)."""
    if settings.search.backend == "embedded":
        found = {p: p.stat().st_size for p in settings.index_dir.rglob("*") if p.is_file()}
        sizes = {p.name: n for p, n in found.items() if p.parent == settings.index_dir}
        total = sum(found.values())
        return {
            "disk_mib": round(total / 2**20, 1),
            # what an index without vectors would take: all but the vector side's files
            "text_mib": round((total - sum(sizes.get(n, 0) for n in VECTOR_SIDE)) / 2**20, 1),
            "vectors_mib": round((sizes.get(VECTORS, 0) + sizes.get(SCALES, 0)) / 2**20, 1),
            "dense_index_mib": round(sizes.get(ANN_FILE, 0) / 2**20, 1),
            "row_codes_mib": round(sizes.get(CODES, 0) / 2**20, 2),
        }
    from elasticsearch import Elasticsearch

    client = Elasticsearch(settings.search.elasticsearch_url, request_timeout=600)
    index = settings.search.index
    client.indices.refresh(index=index)
    stats = client.indices.stats(index=index, metric="store,segments,dense_vector")
    primaries = stats["_all"]["primaries"]
    node = client.nodes.stats(metric="jvm")["nodes"]
    heap = max(n["jvm"]["mem"]["heap_used_in_bytes"] for n in node.values())
    # Off-heap vector files (9.1+): raw float32 (vec), int8 (veq), bbq (veb), HNSW graph (vex).
    # Search reads the quantized file and the graph; the raw floats only rescore.
    off_heap = (primaries.get("dense_vector") or {}).get("off_heap") or {}
    files = {k[6:-11]: v for k, v in off_heap.items() if k.startswith("total_") and v}
    return {
        "disk_mib": round(primaries["store"]["size_in_bytes"] / 2**20, 1),
        "segments": primaries["segments"]["count"],
        "node_heap_used_mib": round(heap / 2**20, 1),
        "vector_files_mib": {k: round(v / 2**20, 1) for k, v in files.items() if k},
    }


def query(job: dict[str, Any]) -> dict[str, Any]:
    """Open the index and time the two query paths over the job's questions.

    An embedded index's files are first evicted from the page cache, then every question is asked
    once untimed: the build that ran just before left the whole index cached, and the kernel maps
    cached pages around each page a query touches (fault-around), so without the eviction the
    memory read 11.4 GiB at 26 M against 5.0 on the same index asked cold (docs/measured.md). The
    timed pass then finds in the cache what the questions touch, as a warm server would.
    """
    settings = load_settings(**job["settings"])
    inputs = np.load(job["queries"], allow_pickle=True)
    queries, vectors = list(inputs["queries"]), inputs["vectors"]
    gold = [set(g) for g in inputs["gold"]]
    evicted = evict(settings.index_dir) if settings.search.backend == "embedded" else None
    before = peak_rss_mib()
    started = time.perf_counter()
    backend = open_backend(settings, None)
    opened_s = time.perf_counter() - started
    after_open = peak_rss_mib()
    _ask(backend, settings, queries, vectors, gold)  # the untimed pass
    bm25, default, recall_1000, recall_10, depth = _ask(backend, settings, queries, vectors, gold)
    # The default configuration's query path ends here (search.dense_candidates is 0): its peak
    # before the dense stage's IVF lists, which faiss reads into the heap, join it.
    default_peak = peak_rss_mib()
    dense = []  # the dense stage: the 100 nearest by vector (IVF or exact, as configured)
    # "default_only": the default configuration alone, as a run in a memory cap measures it.
    # Once untimed first, as the paths above: not on first touch (likely, unmeasured, why 10 M
    # read 76 ms here against 40.4 in the dense child, whose exact scan reads every vector first).
    asked = [] if job.get("default_only") else vectors
    for vector in asked:
        backend.nearest(vector, 100)
    for vector in asked:
        started = time.perf_counter()
        backend.nearest(vector, 100)
        dense.append((time.perf_counter() - started) * 1000)
    # what BM25's time grows with, to read against the real abstracts' (`reference_share`)
    shape = backend_for(settings).shape(backend)
    postings = (
        {"query_postings_share": postings_share(queries, shape.doc_freq, backend.count())}
        if shape is not None
        else {}
    )
    return {
        **({"segments": shape.segments, "shards": shape.shards} if shape is not None else {}),
        **({"evicted_mib": evicted} if evicted is not None else {}),
        "open_s": round(opened_s, 3),
        "open_rss_mib": round(after_open - before, 1),
        "bm25_top1000_p50_ms": percentile(bm25, 50),
        "bm25_top1000_p95_ms": percentile(bm25, 95),
        "default_10000_to_300_p50_ms": percentile(default, 50),
        "default_10000_to_300_p95_ms": percentile(default, 95),
        **(
            {
                "dense_top100_p50_ms": percentile(dense, 50),
                "dense_top100_p95_ms": percentile(dense, 95),
            }
            if dense
            else {}
        ),
        **postings,
        "mean_candidates": round(float(np.mean(depth)), 1),
        "recall_at_10_fused": round(float(np.mean(recall_10)), 3),
        "recall_at_1000_bm25": round(float(np.mean(recall_1000)), 3),
        "default_path_peak_rss_mib": default_peak,
        "query_peak_rss_mib": peak_rss_mib(),
        **{f"query_end_{key}": value for key, value in resident_mib().items()},
    }


def _ask(
    backend: Any, settings: Any, queries: list[str], vectors: np.ndarray, gold: list[set[str]]
) -> tuple[list[float], ...]:
    """Ask every question down both paths: BM25 top-1000, then the default 10,000 → 300."""
    bm25, recall_1000, depth = [], [], []
    for text, wanted in zip(queries, gold, strict=True):
        started = time.perf_counter()
        result = backend.search(text, 1000)
        bm25.append((time.perf_counter() - started) * 1000)
        found = set(result.pmids)
        recall_1000.append(len(found & wanted) / len(wanted))
    default, recall_10 = [], []
    shortlist = max(settings.rerank.exact_shortlist, TOP_K)
    for text, vector, wanted in zip(queries, vectors, gold, strict=True):
        started = time.perf_counter()
        top, found = default_path(backend, text, vector, shortlist)
        default.append((time.perf_counter() - started) * 1000)
        depth.append(found)
        recall_10.append(len(set(top[:10]) & wanted) / len(wanted))
    return bm25, default, recall_1000, recall_10, depth


def dense(job: dict[str, Any]) -> dict[str, Any]:
    """Time the dense stage at each of `DENSE_SHARES` and judge it against the exact top 100.

    The exact answer is the one the exact scan gives (the int8 rows × their scales), found for
    the first `DENSE_RECALL_QUESTIONS` questions in one pass over the matrix; recall is
    tie-aware, as in `bench dense` (synthetic vectors repeat).
    """
    settings = load_settings(**job["settings"])
    vectors = np.load(job["queries"], allow_pickle=True)["vectors"].astype(np.float32)
    index = EmbeddedIndex(settings.index_dir)
    rows, dims = int(index.meta["rows"]), int(index.meta["dims"])
    matrix = mapped(settings.index_dir / VECTORS, np.int8, (rows, dims))
    scales = mapped(settings.index_dir / SCALES, np.float32, (rows,))
    kth = _exact_kth(matrix, scales, vectors[:DENSE_RECALL_QUESTIONS], K)
    out: dict[str, Any] = {}
    for share in DENSE_SHARES:
        index.dense_stage(ann_rows=settings.search.dense_ann_rows, share=share)
        took, recalls = [], []
        for i, vector in enumerate(vectors):
            started = time.perf_counter()
            found = index.nearest(vector, K)
            took.append(time.perf_counter() - started)
            if i < len(kth):
                recalls.append(tie_aware_recall(np.array([s for _, s in found]), kth[i], K))
        out[f"{share:g}"] = judged(recalls, took)
    return {"dense_shares": out, "dense_recall_questions": len(kth)}


def _exact_kth(matrix: np.ndarray, scales: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Return each query's exact k-th best score over every row, in one pass over `matrix`."""
    best = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    progress = Progress("rows scored exactly")
    for start in range(0, len(matrix), EXACT_BLOCK):
        block = slice(start, start + EXACT_BLOCK)
        scores = (matrix[block].astype(np.float32) @ queries.T).T * scales[block]
        merged = np.concatenate([best, scores], axis=1)
        keep = min(k, merged.shape[1])
        best = -np.partition(-merged, keep - 1, axis=1)[:, :keep]
        progress(min(start + EXACT_BLOCK, len(matrix)), len(matrix))
    return best.min(axis=1)


def run(kind: str, job: dict[str, Any]) -> dict[str, Any]:
    """Run the job `kind` (ingest, query, dense, peer, fidelity); return its figures."""
    kinds = {"ingest": ingest, "query": query, "dense": dense, "peer": peer, "fidelity": fidelity}
    return kinds[kind](job)


def main() -> None:
    """Run the job named by argv; print the figures."""
    kind, job = sys.argv[1], json.loads(Path(sys.argv[2]).read_text())
    print(json.dumps(run(kind, job)))


if __name__ == "__main__":
    main()
