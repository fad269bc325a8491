"""Cosine over the vectors an Elasticsearch index stores: for given documents, or the nearest.

Both are knn queries on the index's vector field (`embedding`, or the field `_meta` names after
`quorum embed` computed another model's vectors): its flat (brute-force) index makes them exact,
as the embedded engine's scan is. Elasticsearch scores cosine as (1 + cos) / 2; these return cos.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from infra.search.elastic_schema import vector_field_name

PAGE = 10_000  # index.max_result_window and the knn num_candidates ceiling
# PMIDs come from doc values: loading 10,000 stored _ids costs ~10x more than the search.
IDS_ONLY = {"source": False, "stored_fields": "_none_", "docvalue_fields": ["pmid"]}
HIT_FIELDS = ["hits.total", "hits.hits.fields.pmid", "hits.hits._score"]


class VectorSearch:
    """The vector half of `ElasticIndex` (which gives the client, dims and the error guard)."""

    _client: Any
    index: str
    _meta: dict[str, Any]
    knn_candidates: float

    def rough_similarities(self, pmids: Sequence[str], vector: np.ndarray) -> np.ndarray | None:
        """Return None: the server computes every cosine exactly (`similarities`)."""
        return None

    def similarities(self, pmids: Sequence[str], vector: np.ndarray) -> np.ndarray | None:
        """Return cosine(vector, stored vector) per PMID, computed in the server; 0 if none."""
        dims = self.dims
        if dims is None:
            return None
        query = np.asarray(vector, dtype=np.float32).ravel()
        if query.shape[0] != dims:
            raise ValueError(f"the query vector has {query.shape[0]} dims; the index has {dims}")
        wanted = [str(p) for p in pmids]
        out = np.zeros(len(wanted), dtype=np.float32)
        if not wanted or not np.any(query):
            return out
        unique = list(dict.fromkeys(wanted))
        scores: dict[str, float] = {}
        for start in range(0, len(unique), PAGE):
            chunk = unique[start : start + PAGE]
            # Exact: flat vectors are brute-forced over the ids filter (no graph, no quantizing).
            field = vector_field_name(self._meta)
            knn = {"field": field, "query_vector": query.tolist(), "k": len(chunk)}
            knn |= {"num_candidates": len(chunk), "filter": {"ids": {"values": chunk}}}
            with self._guarded():
                found = self._client.search(
                    index=self.index,
                    query={"knn": knn},
                    size=len(chunk),
                    filter_path=HIT_FIELDS[1:],
                    **IDS_ONLY,
                )
            # knn scores cosine as (1 + cos) / 2.
            scores |= {pmid: 2.0 * score - 1.0 for pmid, score in hit_scores(found)}
        out[:] = [scores.get(p, 0.0) for p in wanted]
        return out

    def nearest(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Return the `k` documents whose stored vectors are closest to `vector`, best first.

        A knn query on `embedding`: a flat (brute-force) index makes it exact, as the embedded
        engine's scan is; on a graph (*_hnsw) it gathers `knn_candidates` × k candidates a shard
        (search.elasticsearch_knn_candidates). Scores are cosines, as `similarities` gives them.
        """
        dims = self.dims
        if dims is None or k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).ravel()
        if query.shape[0] != dims:
            raise ValueError(f"the query vector has {query.shape[0]} dims; the index has {dims}")
        k = min(int(k), PAGE)
        knn = {"field": vector_field_name(self._meta), "query_vector": query.tolist(), "k": k}
        knn["num_candidates"] = knn_candidates(k, self.knn_candidates)
        with self._guarded():
            found = self._client.search(
                index=self.index,
                knn=knn,
                size=k,
                filter_path=HIT_FIELDS[1:],
                **IDS_ONLY,
            )
        # knn scores cosine as (1 + cos) / 2.
        return [(pmid, 2.0 * score - 1.0) for pmid, score in hit_scores(found)]


def knn_candidates(k: int, factor: float) -> int:
    """Return a knn query's num_candidates for `k` results: `factor` a result, within [k, PAGE]."""
    return min(PAGE, max(k, math.ceil(k * factor)))


def hit_scores(found: Any) -> list[tuple[str, float]]:
    """Return (PMID, score) of a search answer's hits (asked for with IDS_ONLY)."""
    hits = found.get("hits", {}).get("hits", [])
    return [(h["fields"]["pmid"][0], float(h["_score"] or 0.0)) for h in hits]
