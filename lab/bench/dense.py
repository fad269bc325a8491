"""`quorum bench dense`: the approximate dense stage against the exact scan it stands in for.

For the real documents' own vectors (the shared corpus, embedded once by `bench scale`'s cache)
and for synthetic sets of the sizes asked for, the vectors are stored as the embedded engine
stores them (int8 rows × a scale, memory-mapped from disk), the IVF index is built
(`infra.search.ann`), and each question's top 100 by the exact scan is compared with the top
100 the IVF index finds and the int8 vectors rescore, at each probed share of the lists.

A synthetic vector is what `bench scale` gives a synthetic document: the normalised mean of the
real vectors of the abstracts its sentences were drawn from. Such means crowd together (their
cosines nearly tie), which makes any approximate search harder than on real vectors: recall is
judged on the real vectors, and reported on the synthetic ones.
"""

from __future__ import annotations

import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infra.errors import UserError
from infra.search.ann import build
from infra.search.embedded_layout import quantize
from infra.search.embedded_vectors import top_rows
from infra.settings import Settings
from lab.bench.recall import K, judged, ms, tie_aware_recall
from lab.bench.synthetic import SentencePool


@dataclass
class DenseInputs:
    """What `bench_dense` measures on: the real documents, their vectors, the query vectors."""

    sets: tuple[list[dict[str, Any]], np.ndarray, np.ndarray]
    work: Path
    model: str


def dense_inputs(
    settings: Settings, corpus: Path, files: Sequence[Path], limit: int, sizes: Sequence[int]
) -> DenseInputs:
    """Read the real documents and up to `limit` questions and embed them, once.

    The vectors are cached where `bench scale` keeps its own (QUORUM_HOME/bench/scale).
    """
    from infra.bioasq.formats import load_questions
    from infra.embeddings import HuggingFaceEmbedder
    from infra.ingest.sources import normalize
    from infra.search.corpus import read_jsonl
    from lab.bench.scale import real_vectors_file, save_queries

    docs = [normalize(d) for d in read_jsonl(corpus) if isinstance(d, dict)]
    if sizes and min(sizes) < len(docs):
        raise UserError(f"--sizes: each synthetic set holds at least the {len(docs):,} real ones")
    work = settings.home / "bench" / "scale"
    work.mkdir(parents=True, exist_ok=True)
    embedder = HuggingFaceEmbedder(settings.embeddings)
    real = np.load(real_vectors_file(work, docs, embedder))
    loaded = [q for path in files for q in load_questions(path) if q.documents][:limit]
    saved = save_queries(work, docs, loaded, embedder, "queries-dense.npz")["path"]
    queries = np.load(saved, allow_pickle=True)["vectors"]
    return DenseInputs(sets=(docs, real, queries), work=work, model=embedder.name)


BLOCK = 100_000


def bench_dense(
    docs: list[dict[str, Any]],
    real_vectors: np.ndarray,
    queries: np.ndarray,
    sizes: Sequence[int],
    shares: Sequence[float],
    *,
    seed: int = 0,
    work: Path | None = None,
    elasticsearch: Settings | None = None,
    candidates: Sequence[float] = (1.5,),
) -> dict[str, Any]:
    """Measure exact and approximate top-100 on the real vectors and each synthetic size.

    With `elasticsearch` (settings naming a node), each set is also written into Elasticsearch's
    quantized graph types and their knn measured the same way at each `candidates` factor.
    """
    queries = np.asarray(queries, np.float32)
    report: dict[str, Any] = {"queries": len(queries), "k": K, "seed": seed, "sets": {}}
    pool = SentencePool(docs, real_vectors)
    sets: list[tuple[str, int]] = [("real", len(docs)), *((f"synthetic-{n}", n) for n in sizes)]
    for name, rows in sets:
        where = Path(tempfile.mkdtemp(prefix="quorum-dense-", dir=work))
        try:
            vectors, scales = _store(where, pool, rows, seed, real=name == "real")
            figures, kth = _measure(where, vectors, scales, queries, shares, seed)
            if elasticsearch is not None:
                from lab.bench.dense_es import measure as measure_es

                figures["elasticsearch"] = measure_es(
                    elasticsearch, vectors, scales, queries, kth, candidates, k=K
                )
            report["sets"][name] = figures
        finally:
            shutil.rmtree(where, ignore_errors=True)
        print(f"{name}: {report['sets'][name]}", file=sys.stderr, flush=True)
    return report


def _store(
    where: Path, pool: SentencePool, rows: int, seed: int, *, real: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Write `rows` int8 vectors and scales as the engine lays them out; return them mapped."""
    dims = pool.vectors.shape[1]  # type: ignore[union-attr]
    vectors = np.lib.format.open_memmap(where / "vectors.npy", "w+", np.int8, (rows, dims))
    scales = np.empty(rows, np.float32)
    rng = np.random.default_rng(seed)
    for start in range(0, rows, BLOCK):
        n = min(BLOCK, rows - start)
        block = pool.vectors[start : start + n] if real else _synthetic(pool, rng, n)  # type: ignore[index]
        vectors[start : start + n], scales[start : start + n] = quantize(block)
    vectors.flush()
    del vectors
    return np.load(where / "vectors.npy", mmap_mode="r"), scales


def _synthetic(pool: SentencePool, rng: np.random.Generator, n: int) -> np.ndarray:
    """Return `n` vectors drawn as `SentencePool` draws a synthetic document's vector."""
    assert pool.vectors is not None
    lengths = pool.sentence_counts(rng, n)
    picks = rng.integers(len(pool.sentences), size=int(lengths.sum()))
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    summed = np.add.reduceat(pool.vectors[pool.owners[picks]], offsets, axis=0)
    norms = np.linalg.norm(summed, axis=1, keepdims=True)
    return summed / np.where(norms > 0, norms, 1.0)


def _measure(
    where: Path,
    vectors: np.ndarray,
    scales: np.ndarray,
    queries: np.ndarray,
    shares: Sequence[float],
    seed: int,
) -> tuple[dict[str, Any], list[float]]:
    """Return the IVF stage's figures, and each query's exact 100th score."""
    rows = len(vectors)
    exact, exact_s = [], []
    for query in queries:
        started = time.perf_counter()
        best = top_rows(vectors, scales, query, K)
        exact_s.append(time.perf_counter() - started)
        exact.append(best[-1][1])  # the 100th score: rows scoring as much are as right
    started = time.perf_counter()
    ann = build(where, vectors, scales, rows, model="bench", seed=seed)
    built = time.perf_counter() - started
    figures: dict[str, Any] = {
        "rows": rows,
        "lists": ann.lists,
        "build_s": round(built, 1),
        "ann_mib": round((where / "ann.faiss").stat().st_size / 2**20, 1),
        "vectors_mib": round(vectors.nbytes / 2**20, 1),
        "exact_p50_ms": ms(exact_s, 50),
        "exact_p95_ms": ms(exact_s, 95),
        "shares": {},
    }
    for share in shares:
        nprobe = max(1, round(ann.lists * share))
        recalls, took = [], []
        for query, kth in zip(queries, exact, strict=True):
            started = time.perf_counter()
            found = np.sort(ann.search(query, K, nprobe))
            scores = (vectors[found].astype(np.float32) @ query) * scales[found]
            top = np.sort(scores)[::-1][:K]
            took.append(time.perf_counter() - started)
            recalls.append(tie_aware_recall(top, kth, K))
        figures["shares"][f"{share:g}"] = {"nprobe": nprobe, **judged(recalls, took)}
    figures["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return figures, exact
