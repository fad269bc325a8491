"""Fusing BM25 and cosine scores of the same candidates (pure numpy: no model needed)."""

from __future__ import annotations

import numpy as np


def _minmax(values: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    return np.ones_like(values) if high - low < 1e-12 else (values - low) / (high - low)


def fuse(bm25: np.ndarray, cosine: np.ndarray, method: str, alpha: float, rrf_k: int) -> np.ndarray:
    """Combine BM25 and cosine scores of the same candidates into one score (higher is better)."""
    if method == "cosine":
        return cosine
    if method == "rrf":
        bm25_rank = np.empty(len(bm25))
        bm25_rank[np.argsort(-bm25, kind="stable")] = np.arange(len(bm25))
        cos_rank = np.empty(len(cosine))
        cos_rank[np.argsort(-cosine, kind="stable")] = np.arange(len(cosine))
        return 1.0 / (rrf_k + bm25_rank + 1) + 1.0 / (rrf_k + cos_rank + 1)
    return blend(bm25, cosine, alpha)


def blend(first: np.ndarray, second: np.ndarray, weight: float) -> np.ndarray:
    """Mix two scorings of the same items, each min-max normalised: `weight` on `second`.

    rerank blends the fused first stage with a cross-encoder's scores over the head: weight 1
    is the cross-encoder's order alone, 0 leaves the first stage's order.
    """
    return (1 - weight) * _minmax(first) + weight * _minmax(second)
