"""How an approximate top k is judged against the exact one, in `bench dense`'s two measurements."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

K = 100
"""The depth recall is measured at (issue 31: recall@100 against the exact scan): the share of
the approximate top 100 scoring at least the exact 100th score."""


def tie_aware_recall(scores: np.ndarray, kth: float, k: int) -> float:
    """Return the share of `k` found rows scoring at least the exact k-th score.

    Tie-aware: synthetic vectors repeat (a one-sentence document's is its source's), so rows
    tied at the k-th score are equally right whichever of them comes back.
    """
    return min(k, int((np.asarray(scores) >= kth - 1e-6).sum())) / k


def judged(recalls: Sequence[float], took: Sequence[float]) -> dict[str, float]:
    """Return the mean and 5th-percentile recall and the p50/p95 time of one way of searching."""
    return {
        "recall_at_100": round(float(np.mean(recalls)), 4),
        "recall_p5": round(float(np.percentile(recalls, 5)), 4),
        "p50_ms": ms(took, 50),
        "p95_ms": ms(took, 95),
    }


def ms(seconds: Sequence[float], q: float) -> float:
    """Return the `q`th percentile of `seconds`, in milliseconds."""
    return round(float(np.percentile(seconds, q)) * 1000, 2)
