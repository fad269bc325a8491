"""`quorum bench dense --elasticsearch`: Elasticsearch's quantized vectors beside the IVF stage.

The same vectors the embedded engine holds (its int8 rows × scale, given to the node as float32,
so both sides rank the very same vectors) are written into an Elasticsearch index of each
quantized graph type, through the product's own writer; each question's 100 nearest come back
through the product's own `nearest` at each `search.elasticsearch_knn_candidates` asked, and are
judged as the IVF stage's are: the share of them scoring at least the exact 100th score.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from infra.search.backends import drop_index, open_backend, open_writer
from infra.search.elastic_vectors import knn_candidates
from infra.settings import Settings
from lab.bench.recall import judged, tie_aware_recall
from lab.bench.scale_child import Precomputed, disk

TYPES = ("int8_hnsw", "bbq_hnsw")
"""The graph types over quantized codes: a byte a dimension, and a bit (both rescored from the
float32 vectors Elasticsearch keeps beside them)."""
BATCH = 5_000


def measure(
    settings: Settings,
    vectors: np.ndarray,
    scales: np.ndarray,
    queries: np.ndarray,
    kth: Sequence[float],
    candidates: Sequence[float],
    *,
    k: int,
) -> dict[str, Any]:
    """Write the set into one index per type, time its knn at each candidates factor; drop it."""
    figures: dict[str, Any] = {}
    rows = len(vectors)
    for kind in TYPES:
        search = settings.search.model_copy(
            update={
                "backend": "elasticsearch",
                "index": f"bench-dense-{kind.replace('_', '-')}",
                "elasticsearch_vector_index": kind,
            }
        )
        chosen = settings.model_copy(update={"search": search})
        drop_index(chosen)
        started = time.perf_counter()
        writer = open_writer(chosen, Precomputed("bench", int(vectors.shape[1])))
        for start in range(0, rows, BATCH):
            block = np.arange(start, min(rows, start + BATCH))
            floats = vectors[block].astype(np.float32) * scales[block, None]
            writer.upsert(
                [{"pmid": str(r), "title": f"v{r}", "abstract": ""} for r in block], floats
            )
        writer.close()
        written = time.perf_counter() - started
        kind_figures: dict[str, Any] = {
            "write_s": round(written, 1),
            **{key: value for key, value in disk(chosen).items() if key != "node_heap_used_mib"},
            "candidates": {},
        }
        for factor in candidates:
            asked = chosen.model_copy(
                update={
                    "search": search.model_copy(update={"elasticsearch_knn_candidates": factor})
                }
            )
            backend = open_backend(asked, None)
            recalls, took = [], []
            for query, best in zip(queries, kth, strict=True):
                began = time.perf_counter()
                found = backend.nearest(query, k)
                took.append(time.perf_counter() - began)
                got = np.array([int(p) for p, _ in found], np.int64)
                scores = (vectors[got].astype(np.float32) @ query) * scales[got]
                recalls.append(tie_aware_recall(scores, best, k))
            kind_figures["candidates"][f"{factor:g}"] = {
                "num_candidates": knn_candidates(k, factor),
                **judged(recalls, took),
            }
        drop_index(chosen)
        figures[kind] = kind_figures
    return figures
