"""Row codes: every stored vector as one-byte product codes, for estimating many cosines at once.

The default path scores BM25's 10,000 candidates by cosine before fusing. Read from the int8
rows, that is 10,000 rows scattered over the vector file a question: at 26 M abstracts (a 9.3
GiB file) 500 questions kept all of it in memory, and the query path wanted ~14 GiB
(docs/measured.md). These codes — 8 dimensions a byte, 48 bytes a row at 384 dims, an eighth of
the int8 row: 1.2 GiB at 26 M — estimate every candidate's cosine (one table of the query's inner
products with each sub-quantizer's 256 centroids, then a lookup per byte), and the int8 rows are
read for a shortlist only (`infra.search.shortlist`).

Product quantization with 8-bit sub-quantizers, trained by faiss; the centroids are saved as a
plain array, so answering needs numpy only. On disk beside the engine's arrays: `rowcodes.u8`
(rows × bytes), `rowcodes.npy` (the centroids) and `rowcodes.json` (the rows covered, last: an
index without it has no codes). Rows written after the codes are scored from their int8 rows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infra.search.ann import dequantize
from infra.search.embedded_layout import mapped

CODES, CENTROIDS, META = "rowcodes.u8", "rowcodes.npy", "rowcodes.json"
DIMS_PER_BYTE = 8
"""Dimensions per one-byte sub-quantizer: 48 bytes at 384 dims. On the shared corpus's real
vectors and the 2,307 golden questions' candidates (tests/tools/measure_row_codes.py), 96 bytes
(4 dims a byte) kept the exact top 300 whole with 1,000 candidates rescored and 48 bytes kept
0.99991 of it (an early form of the shortlist); 48 bytes because at 26 M the codes are held in
memory beside the postings and the whole query path must fit 8 GiB (docs/measured.md)."""
CENTROIDS_PER_BYTE = 256
TRAIN_ROWS = 65_536
"""Rows the sub-quantizers are trained on (256 centroids each: 256 rows a centroid)."""
BLOCK = 262_144
"""Rows dequantized and encoded at a time (their float32 copy is 400 MB at 384 dims)."""


@dataclass
class RowCodes:
    """Product codes of the rows [0, rows) of an embedded index's vectors."""

    codes: np.ndarray
    """rows × bytes, memory-mapped."""
    centroids: np.ndarray
    """bytes × 256 × dims a byte, float32."""
    rows: int

    def __post_init__(self) -> None:
        # Each sub-quantizer's centroids' squared norms: a row's reconstruction's is their sum.
        self._norms = (self.centroids.astype(np.float32) ** 2).sum(axis=2)

    @classmethod
    def open(cls, directory: Path) -> RowCodes | None:
        """Open the codes in `directory`, or None when none were built."""
        meta_path = directory / META
        if not meta_path.is_file():
            return None
        meta = json.loads(meta_path.read_text())
        centroids = np.load(directory / CENTROIDS)
        rows = int(meta["rows"])
        codes = mapped(directory / CODES, np.uint8, (rows, centroids.shape[0]))
        return cls(codes, centroids, rows)

    def scores(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Return the estimated cosines of `query` with the rows `rows` (all < `self.rows`).

        The query's dot product with each row's reconstruction, divided by the reconstruction's
        norm: a code stands for its cell's centroid, shorter than the unit vectors it codes,
        so the bare dot product runs low, most where the cosine is high (26 M synthetic, the
        documents tied at a question's 300th place: 0.176 low, 0.099 divided by the norm).
        """
        parts, _, dims = self.centroids.shape
        table = np.einsum(
            "pcd,pd->pc", self.centroids, np.asarray(query, np.float32).reshape(parts, dims)
        )
        # Dot product and squared norm looked up together, as one complex number a cell, one
        # byte position at a time: 0.4 ms for 10,000 rows against 5.5 for one gather of all.
        cells = (table + 1j * self._norms).astype(np.complex64)
        picked = np.ascontiguousarray(self.codes[np.asarray(rows, dtype=np.intp)].T)
        total = np.zeros(picked.shape[1], dtype=np.complex64)
        for part in range(parts):
            total += cells[part].take(picked[part])
        return total.real / np.maximum(np.sqrt(total.imag), 1e-12)


def bytes_for(dims: int) -> int:
    """Return the code bytes a row of `dims` gets: the most that divide `dims`, ≤ dims / 8."""
    return max(b for b in range(1, max(1, dims // DIMS_PER_BYTE) + 1) if dims % b == 0)


def build(
    directory: Path,
    vectors: np.ndarray,
    scales: np.ndarray,
    rows: int,
    *,
    model: str,
    seed: int = 0,
    on_progress: Callable[[int, int], None] | None = None,
) -> RowCodes:
    """Train product codes on rows of the int8 `vectors` (× `scales`), encode [0, rows), save.

    Rows with scale 0 (no vector) get codes too; their estimate is discarded by the caller, as
    their exact score is 0. Training takes `TRAIN_ROWS` rows with vectors, drawn with `seed`.
    """
    import faiss

    dims = int(vectors.shape[1])
    parts = bytes_for(dims)
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(rows, size=min(rows, TRAIN_ROWS), replace=False))
    train = dequantize(vectors, scales, sample)
    train = train[scales[sample] > 0]
    if len(train) < CENTROIDS_PER_BYTE:
        raise ValueError(
            f"{len(train):,} rows with vectors cannot train {CENTROIDS_PER_BYTE} codes"
        )
    quantizer = faiss.ProductQuantizer(dims, parts, 8)
    # faiss warns once per byte position below 39 training rows a centroid; at the default
    # threshold (10 M rows) there are 256, and a smaller index asked for codes gets them quietly.
    quantizer.cp.min_points_per_centroid = 1
    quantizer.train(np.ascontiguousarray(train))
    tmp = directory / (CODES + ".tmp")
    out = np.memmap(tmp, dtype=np.uint8, mode="w+", shape=(rows, parts))
    for start in range(0, rows, BLOCK):
        stop = min(rows, start + BLOCK)
        out[start:stop] = quantizer.compute_codes(
            dequantize(vectors, scales, np.arange(start, stop))
        )
        if on_progress is not None:
            on_progress(stop, rows)
    out.flush()
    del out
    centroids = faiss.vector_to_array(quantizer.centroids).reshape(parts, CENTROIDS_PER_BYTE, -1)
    (directory / META).unlink(missing_ok=True)  # codes without their meta are never read
    os.replace(tmp, directory / CODES)
    with open(directory / (CENTROIDS + ".tmp"), "wb") as handle:
        np.save(handle, centroids.astype(np.float32))
    os.replace(directory / (CENTROIDS + ".tmp"), directory / CENTROIDS)
    meta = {"rows": rows, "bytes": parts, "dims": dims, "model": model, "seed": seed}
    (directory / (META + ".tmp")).write_text(json.dumps(meta))
    os.replace(directory / (META + ".tmp"), directory / META)
    opened = RowCodes.open(directory)
    assert opened is not None
    return opened


def drop(directory: Path) -> None:
    """Remove built codes (every cosine is then read from the int8 rows)."""
    for name in (META, CODES, CENTROIDS):
        (directory / name).unlink(missing_ok=True)
