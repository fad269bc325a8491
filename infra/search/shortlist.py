"""The cosines the default path fuses: estimated for every candidate, exact for a shortlist.

With row codes (`infra.search.row_codes`, built for large embedded indexes), every candidate's
cosine is first estimated from its codes and fused with BM25 as usual; the `shortlist` best by
that fused score are then scored exactly from their int8 rows, and so are the `FLOOR` lowest and
highest by the estimate, so that the min-max scaling of the cosines in the fusion rests on the
exact floor and ceiling as it does when every cosine is exact; candidates still estimated that
the exact scores let into the head (`keep`, rerank.top_k) are read exactly in turn, so every
cosine the head is ranked by is exact. Without codes (small indexes,
Elasticsearch), or with no more candidates than the shortlist, every cosine is exact.

Measured on the shared corpus's real vectors (2,307 golden questions, their keyword queries'
candidates, fused as `rerank` fuses; tests/tools/measure_row_codes.py): with 1,000 rescored and
the floor, 0.99991 of the exact top 300 kept (5th percentile 1.0, worst 0.9933), recall@10 the
same to four places; 500 kept 0.9897, 300 0.909. Without the floor, 1,000 kept 0.9943: the
estimated lowest cosine moved the scaling of all the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infra.search.base import SearchBackend
from infra.search.fusion import fuse

FLOOR = 32
"""Lowest- and highest-estimated candidates scored exactly. The ceiling matters where the best
cosine has a low BM25 score and so misses the shortlist (synthetic 26 M: the top 300 of a few
questions changed wholly among documents tied at the 300th place). On the real vectors 32 and
128 at the floor kept the same share of the exact top 300 (0.99991, 0.99994): the estimates'
errors are mostly a few hundredths (mean 0.024) but reach tenths (99.99th percentile 0.17),
which no bound of practical width covers: so a count, measured."""


def fusion_cosines(
    search: SearchBackend,
    pmids: Sequence[str],
    bm25: np.ndarray,
    vector: np.ndarray,
    *,
    method: str,
    alpha: float,
    rrf_k: int,
    shortlist: int,
    keep: int,
) -> np.ndarray | None:
    """Return each candidate's cosine for fusing with `bm25` (None when no vectors are stored).

    The best `keep` by the fused score returned all carry exact cosines.
    """
    estimate = search.rough_similarities(pmids, vector) if len(pmids) > shortlist + FLOOR else None
    if estimate is None:
        return search.similarities(pmids, vector)
    fused = fuse(bm25, estimate, method, alpha, rrf_k)
    by_estimate = np.argsort(estimate, kind="stable")
    picked = np.union1d(
        np.argsort(-fused, kind="stable")[:shortlist],
        np.concatenate([by_estimate[:FLOOR], by_estimate[len(by_estimate) - FLOOR :]]),
    )
    out, exact = estimate.copy(), np.zeros(len(pmids), dtype=bool)
    while picked.size:
        scored = search.similarities([pmids[i] for i in picked], vector)
        assert scored is not None  # codes exist only beside stored vectors
        out[picked], exact[picked] = scored, True
        # Shortlisted candidates whose estimates ran high may fall below others still
        # estimated: those that now reach the head are read exactly too, until none is left.
        head = np.argsort(-fuse(bm25, out, method, alpha, rrf_k), kind="stable")[:keep]
        picked = head[~exact[head]]
    return out
