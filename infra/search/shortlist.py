"""The cosines the default path fuses: estimated for every candidate, exact for a shortlist.

With row codes (`infra.search.row_codes`, built for large embedded indexes), every candidate's
cosine is first estimated from its codes and fused with BM25 as usual. Read exactly from the int8
rows are then: the `shortlist` best by that fused score; the `keep` (rerank.top_k) highest and
the `FLOOR` lowest by the estimated cosine alone, so that the min-max scaling of the fusion rests
on the exact ceiling and floor, and the cosines the codes underestimate most (the highest) are
read whatever their BM25 scores; and, in turn, any candidate still estimated that the exact
scores let into the top `keep`, so every cosine the head is ranked by is exact. Without codes
(small indexes, Elasticsearch), or with no more candidates than the shortlist, every cosine is
exact.

Measured (tests/tools/measure_row_codes.py; the exact path's top 300 against this one's, fused as
`rerank` fuses): on the shared corpus's real vectors, 2,301 golden questions' keyword queries
(1,610 candidates on average), a shortlist of 1,000 keeps 0.99993 of the exact top 300 (5th
percentile 1.0, worst 0.9933) with recall@10 unchanged (0.7939); 500 keeps 0.9915. On the 26 M
synthetic index (9,759 candidates) 0.988 of the top 300 found score at least the exact 300th
(5th percentile 1.0), recall@10 0.1557 against 0.1563: its text repeats, and a block of
identical documents shares one estimate, so one error moves hundreds of them at once (a few
questions lose their whole top 300 to an equally scored block that way).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infra.search.base import SearchBackend
from infra.search.fusion import fuse

FLOOR = 32
"""Lowest-estimated candidates read exactly, for the floor of the min-max scaling. On the real
vectors 32 and 128 kept the same share of the exact top 300 (0.99991, 0.99994; none, 0.9943):
the estimates' errors are mostly a few hundredths (mean 0.024) but reach tenths (99.99th
percentile 0.17), which no bound of practical width covers, so a count, measured."""


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
) -> tuple[np.ndarray | None, int]:
    """Return each candidate's cosine for fusing with `bm25`, and how many were read exactly.

    The cosines are None when no vectors are stored. The best `keep` by the fused score all
    carry exact cosines; the others may be estimates (read < len(pmids)).
    """
    estimate = search.rough_similarities(pmids, vector) if len(pmids) > shortlist + FLOOR else None
    if estimate is None:
        return search.similarities(pmids, vector), len(pmids)
    fused = fuse(bm25, estimate, method, alpha, rrf_k)
    picked = np.union1d(
        _best(fused, shortlist), np.concatenate([_best(-estimate, FLOOR), _best(estimate, keep)])
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
    return out, int(exact.sum())


def _best(values: np.ndarray, count: int) -> np.ndarray:
    """Return the positions of the `count` highest `values`, in no order."""
    if count <= 0:
        return np.zeros(0, dtype=np.intp)
    if count >= len(values):
        return np.arange(len(values))
    return np.argpartition(-values, count - 1)[:count]
