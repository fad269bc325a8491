"""The embedded engine's vector side: cosines, the dense stage, its IVF index and row codes.

`EmbeddedIndex` reads its documents and BM25 from tantivy and everything vector from the
memory-mapped int8 rows (`infra.search.embedded_layout`), the IVF index of the dense stage
(`infra.search.ann`) and the row codes the default path estimates cosines from
(`infra.search.row_codes`); this is that second half, as a base class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from infra.search.ann import AnnIndex
from infra.search.ann import build as build_ann
from infra.search.embedded_layout import BLOCK, SCALES, VECTORS, mapped
from infra.search.row_codes import RowCodes
from infra.search.row_codes import build as build_row_codes

ANN_ROWS, ANN_SHARE, CODES_ROWS = 100_000, 0.25, 10_000_000
"""search.dense_ann_rows, search.dense_ann_share and search.row_codes_rows' defaults, for an
index opened without settings (`dense_stage` sets them)."""


class EmbeddedVectors(ABC):
    """The vector half of `EmbeddedIndex` (which gives the path, meta and the PMID ↔ row maps)."""

    path: Path
    meta: dict[str, Any]

    def _open_vectors(self, rows: int) -> None:
        """Map the vector files of an index of `rows` rows (nothing when it stores none)."""
        dims = self.meta.get("dims")
        self._vectors = mapped(self.path / VECTORS, np.int8, (rows, dims)) if dims else None
        self._codes = RowCodes.open(self.path) if dims else None
        # With row codes the index is too large to keep its vectors in memory and its rows are
        # read a shortlist at a time: through a second map of the file without the kernel's
        # read-around, which would bring in 32 pages about each scattered row (the scan of
        # every row keeps it). Without codes the whole file is meant to stay cached, and the
        # read-around warms it sooner.
        self._vector_rows = (
            mapped(self.path / VECTORS, np.int8, (rows, dims), scattered=True)
            if dims and self._codes is not None
            else self._vectors
        )
        self._scales = mapped(self.path / SCALES, np.float32, (rows,)) if dims else None
        self._ann: AnnIndex | None = None
        self._ann_looked = False
        self._ann_rows, self._ann_share, self._codes_rows = ANN_ROWS, ANN_SHARE, CODES_ROWS

    @abstractmethod
    def _rows_of(self, pmids: Sequence[str]) -> np.ndarray:
        """Return each PMID's row (-1: not indexed)."""

    @abstractmethod
    def _pmid_list(self, rows: Sequence[int]) -> list[str]:
        """Return the PMIDs of these rows."""

    @abstractmethod
    def _live(self, pmids: Sequence[str]) -> set[int]:
        """Return the rows holding these PMIDs' current, undeleted documents."""

    def dense_stage(self, *, ann_rows: int, share: float, codes_rows: int = CODES_ROWS) -> None:
        """Set when `nearest` uses the IVF index (search.dense_ann_rows, dense_ann_share).

        From `ann_rows` rows on, scanning `share` of its lists; below, the exact scan. Row codes
        are built from `codes_rows` rows on (search.row_codes_rows).
        """
        self._ann_rows, self._ann_share, self._codes_rows = ann_rows, share, codes_rows

    def refresh_row_codes(self, on_progress: Any = None) -> RowCodes | None:
        """Build the row codes once `codes_rows` rows have vectors, and again when stale.

        Stale as the IVF index is: covering less than nine tenths of the rows.

        Returns:
            The codes built, or None when none were needed.
        """
        built = self._refresh(self._codes_rows, RowCodes.open, build_row_codes, on_progress)
        if built is not None:
            self._codes = built
        return built

    def refresh_ann(self, on_progress: Any = None) -> AnnIndex | None:
        """Build the IVF index once `ann_rows` rows have vectors, and again when it is stale.

        Stale: the one built covers less than nine tenths of the rows (rows written since it
        was built are scanned exactly meanwhile).

        Returns:
            The index built, or None when none was needed.
        """
        built = self._refresh(self._ann_rows, AnnIndex.open, build_ann, on_progress)
        if built is not None:
            self._ann = built
        return built

    def _refresh(self, threshold: int, opened: Any, build: Any, on_progress: Any) -> Any:
        """Build from the vectors what `build` makes, if needed; None when nothing was built.

        Needed once `threshold` rows have vectors and while what `opened` finds covers less than
        nine tenths of them.
        """
        if self._vectors is None or self._scales is None:
            return None
        rows = int(self.meta.get("embedded_rows", self._vectors.shape[0]))
        built = opened(self.path)
        if rows < threshold or (built is not None and built.rows >= 0.9 * rows):
            return None
        model = str(self.meta.get("embedding_model") or "")
        return build(
            self.path, self._vectors, self._scales, rows, model=model, on_progress=on_progress
        )

    def similarities(self, pmids: Sequence[str], vector: np.ndarray) -> np.ndarray | None:
        """Return cosine(vector, stored vector) per PMID (unit vectors: a dot product)."""
        if self._vectors is None:
            return None
        rows = self._rows_of(pmids)
        known = rows >= 0
        out = np.zeros(len(rows), dtype=np.float32)
        if known.any():
            out[known] = _scores(self._vector_rows, self._scales, rows[known], vector)
        return out

    def rough_similarities(self, pmids: Sequence[str], vector: np.ndarray) -> np.ndarray | None:
        """Return each PMID's cosine estimated from its row codes; None when none were built.

        Rows written after the codes are scored exactly; rows without a vector score 0.
        """
        codes = self._codes
        if codes is None or self._vector_rows is None or self._scales is None:
            return None
        rows = self._rows_of(pmids)
        coded = (rows >= 0) & (rows < codes.rows)
        later = rows >= codes.rows
        out = np.zeros(len(rows), dtype=np.float32)
        if coded.any():
            kept = rows[coded]
            out[coded] = codes.scores(kept, vector) * (self._scales[kept] > 0)
        if later.any():
            out[later] = _scores(self._vector_rows, self._scales, rows[later], vector)
        return out

    def nearest(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Return the `k` documents whose stored vectors are closest to `vector`, best first.

        Below search.dense_ann_rows, exact over the stored int8 vectors: every row of the
        memory-mapped matrix is scored, a block at a time (a large index never sits in memory
        as float32). Above, the IVF index (`infra.search.ann`) names candidates among the rows it
        covers, rows written since it was built are scanned exactly, and every candidate is
        scored from its int8 vector as the exact scan scores it. Rows of re-indexed or deleted
        PMIDs are skipped.
        """
        if self._vectors is None or k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).ravel()
        if query.shape[0] != self._vectors.shape[1]:
            raise ValueError(
                f"the query vector has {query.shape[0]} dims; the index has "
                f"{self._vectors.shape[1]}"
            )
        rows = self._vectors.shape[0]
        # Superseded and deleted rows are rare: take a few more, then drop them.
        want = k
        while True:
            best = self._nearest_rows(query, min(rows, want + 16))
            pmids = self._pmid_list([r for r, _ in best])
            live = self._live(pmids)
            hits = [(p, s) for p, (r, s) in zip(pmids, best, strict=True) if r in live][:k]
            if len(hits) >= k or len(best) >= rows:
                return hits
            want *= 4

    def _nearest_rows(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Return the best `k` rows for `query`: exactly, or through the IVF index."""
        assert self._vectors is not None and self._scales is not None
        rows = self._vectors.shape[0]
        if not self._ann_looked and rows >= self._ann_rows:
            # Looked for once per opening, not per query (a later build sets `_ann` itself).
            self._ann, self._ann_looked = AnnIndex.open(self.path), True
        ann = self._ann
        if ann is None or rows < self._ann_rows or self._ann_share >= 1:
            return top_rows(self._vectors, self._scales, query, k)
        found = ann.search(query, k, round(ann.lists * self._ann_share))
        tail = np.arange(ann.rows, rows)  # written after the IVF index was built
        candidates = np.union1d(found[found < ann.rows], tail)
        scores = _scores(self._vector_rows, self._scales, candidates, query)
        order = np.lexsort((candidates, -scores))[:k]  # ties: the earlier row, as exactly
        return [(int(candidates[i]), float(scores[i])) for i in order]

    def vectors(self, pmids: Sequence[str]) -> np.ndarray | None:
        """Return the stored vectors of these PMIDs as float32 rows (KeyError for one unknown)."""
        if self._vectors is None:
            return None
        rows = self._rows_of(pmids)
        if (rows < 0).any():
            raise KeyError(
                f"not indexed: {[p for p, r in zip(pmids, rows, strict=True) if r < 0][:5]}"
            )
        assert self._vector_rows is not None
        return self._vector_rows[rows].astype(np.float32) * self._scales[rows][:, None]


def _scores(matrix: np.ndarray, scales: np.ndarray, rows: np.ndarray, query: np.ndarray) -> Any:
    """Return the dot products of `query` with the int8 rows `rows` (× their scales).

    One row at a time (`vecdot`), not a matrix product: for the default path's 10,000 rows
    numpy's BLAS used both cores for 0.34 ms (0.82 here in one), then its threads spun on them
    for the next question's shard threads to fight over. At 1 M of PubMed's length, two shards
    against one, questions asked back to back: BM25 top-1000 p50 10.2 against 9.2 ms and the
    default path 29.5 against 26.7 with the matrix product; 7.8 against 9.2 and 25.5 against
    27.4 with this (`tests/tools/compare_indexes.py`; docs/measured.md, "Two shards on a second
    machine").
    """
    return np.vecdot(matrix[rows].astype(np.float32), np.asarray(query, np.float32)) * scales[rows]


def top_rows(
    matrix: np.ndarray, scales: np.ndarray, query: np.ndarray, k: int
) -> list[tuple[int, float]]:
    """Return the `k` rows of `matrix` with the highest dot product with `query`, best first."""
    best_rows, best_scores = [], []
    for start in range(0, matrix.shape[0], BLOCK):
        block = slice(start, start + BLOCK)
        # as `_scores` scores a row (an IVF candidate scores as it does here), 15% slower than
        # a matrix product (0.56 against 0.49 s a million rows, most of it the conversion)
        scores = np.vecdot(matrix[block].astype(np.float32), query) * scales[block]
        keep = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        best_rows.append(keep + start)
        best_scores.append(scores[keep])
    rows, scores = np.concatenate(best_rows), np.concatenate(best_scores)
    order = np.lexsort((rows, -scores))[:k]  # ties: the earlier row first, so runs repeat
    return [(int(rows[i]), float(scores[i])) for i in order]
