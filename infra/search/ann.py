"""The embedded engine's approximate dense stage: an inverted file over 4-bit product codes.

The exact stage scores every stored int8 row: 26 M PubMed abstracts × 384 bytes is 10 GB read per
query. This index (faiss's IVF with product quantization scanned by its "fast scan" kernels,
cosine as inner product) clusters the rows into `lists_for(rows)` lists around k-means centroids
and scans only the `nprobe` lists nearest the query, each row as a code of half a byte per two
dimensions (96 bytes at 384 dims, a quarter of the int8 row). It names `RESCORE` × k candidates,
which are then scored exactly from the int8 vectors, so a row's score is the same whichever stage
found it. Opened memory-mapped; a query pages in only the lists it scans.

Chosen against the 8-bit scalar quantizer it replaced (`bench dense`-style runs, 300 questions,
one thread): on the shared corpus's real vectors, 512 lists, share 1/4, recall@100 0.9666 against
0.9651; on a synthetic million, 4,096 lists, share 1/4, 0.955 against 0.953 at p50 4.0 ms against
8.3 ms. Indexes built with the scalar quantizer still open and search.

On disk, beside the engine's arrays: `ann.faiss` (faiss's own format) and `ann.json` (the rows it
covers, its list count, the model). Rows written after it was built are scanned exactly, so a
stale index is never wrong, only slower; `build` writes both files atomically.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ANN_FILE = "ann.faiss"
ANN_META = "ann.json"
TRAIN_PER_LIST = 40
"""k-means training rows per list: just above the 39 below which faiss warns (training costs
rows × lists × dims per iteration, the largest part of a build at 10 M)."""
KMEANS_ITERATIONS = 10
"""k-means iterations (faiss's default is 25; the lists barely move after 10)."""
DIMS_PER_CODE = 2
"""Dimensions per 4-bit sub-quantizer: 2 gives 96-byte codes at 384 dims. 4 (48 bytes) lost
recall the rescoring could not win back (real vectors, share 1/4: 0.944 with 400 candidates, 0.966
with 1,000, against 0.966 with 400 at 2).

Measured again for the lists' memory (faiss reads them into the heap: 2.7 GiB at 26 M;
2026-11-27, `bench dense`'s sets, 300 questions, share 1/4, p50 with a test run beside the
first): real vectors 0.964 at 2 and 0.963 at 4 (the lists scanned, not the codes, bound it
there); the synthetic million 0.9885 at 2 (7.9 ms), 0.953 at 4 (4.8 ms), 0.976 at 4 with twice
the candidates (6.9 ms).
Kept at 2: halving the lists' heap would cost recall on crowded cosines, or twice the int8 rows
read from a 9.3 GiB file that an 8 GiB machine cannot keep cached at 26 M."""
RESCORE = 10
"""Candidates named per row wanted, then scored from the int8 vectors: 4 kept 0.9664 of the exact
top 100 on real vectors but 0.9375 on the synthetic million, where 10 kept 0.955 (the codes'
errors matter more among crowded synthetic cosines)."""
ADD_BLOCK = 65_536
"""Rows dequantized and added at a time (their float32 copy is 100 MB at 384 dims).

Each added row is compared with every centroid (a matrix product: 125 µs a row at 16,384 lists
on these 2 cores). Assigning rows through a graph over the centroids instead — faiss's HNSW, its
guideline for many lists — was measured and rejected (2026-11-27, 500,000 synthetic rows,
16,384 lists trained on 655,360, M = 32): the inner product to unnormalised centroids is no
metric a graph navigates well, so efSearch 16 / 32 / 64 found the nearest centroid for 41% /
48% / 58% of rows at 3.1× / 1.7× / 1.0× the speed. With spherical k-means (unit centroids) the
graph navigates (2026-11-27, 1 M synthetic rows, 16,384 lists, 2-core AVX2 EPYC): 95% / 98% / 99%
of rows found their nearest centroid at efSearch 16 / 32 / 64, but at 42 / 61 / 120 µs a row
against the matrix product's 99 (a graph's distances come one at a time, the product's from
BLAS), and k-means with the graph assigning took 528 s (with the product, 800 s at 26 M on
this machine class, docs/measured.md); at 4,096 lists the graph's build was no faster at all
(train 51 s / add 36 s against 46 / 31) and recall@100 moved by noise (real vectors 0.9652 both
ways; the synthetic million 0.9887 against 0.9869). At most 2.4× on the adding for 5% of rows
in a worse list: not taken."""


def lists_for(rows: int) -> int:
    """Return the list count for `rows` vectors: the power of two nearest 4·√rows (≥ 16).

    faiss's guideline is 4·√N to 16·√N lists. At the same share of lists scanned, more lists
    find more of the exact top 100 (real MiniLM vectors of the shared corpus, share 1/4: 0.850
    with 16 lists, 0.935 with 128, 0.964 with 512) but cost more to build (assigning a row
    compares it with every centroid), so the guideline's low end: 1 M rows → 4,096 lists,
    10 M → 16,384, 26 M → 16,384.
    """
    return max(16, 2 ** round(math.log2(4 * math.sqrt(max(rows, 1)))))


@dataclass
class AnnIndex:
    """A built IVF index over the rows [0, rows) of an embedded index's vectors."""

    index: object
    """The faiss IndexIVFPQFastScan (or, built before it, IndexIVFScalarQuantizer)."""
    rows: int
    """Rows it covers: every row below it that has a vector."""
    lists: int

    @classmethod
    def open(cls, directory: Path) -> AnnIndex | None:
        """Open the index in `directory` memory-mapped, or None when none was built."""
        meta_path, path = directory / ANN_META, directory / ANN_FILE
        if not (meta_path.is_file() and path.is_file()):
            return None
        import faiss

        meta = json.loads(meta_path.read_text())
        index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        return cls(index=index, rows=int(meta["rows"]), lists=int(meta["lists"]))

    def search(self, query: np.ndarray, k: int, nprobe: int) -> np.ndarray:
        """Return up to `RESCORE` × `k` candidate rows from the `nprobe` lists nearest `query`.

        In no particular order: the caller scores them exactly. Lists holding `PARALLEL_ROWS`
        rows or more are scanned by every core (`parallel`).
        """
        nprobe = max(1, min(nprobe, self.lists))
        self.index.nprobe = nprobe  # type: ignore[attr-defined]
        # Set on the shared index as nprobe is: callers at once agree but for the share, and
        # either kernel names the same candidates.
        if hasattr(self.index, "implem"):  # the fast-scan index; the earlier one has no choice
            wide = parallel(self.rows * nprobe // self.lists)
            self.index.implem = LIST_PARALLEL if wide else 0  # type: ignore[attr-defined]
        x = np.asarray(query, np.float32).reshape(1, -1)
        _, rows = self.index.search(x, k * RESCORE)  # type: ignore[attr-defined]
        found = rows[0]
        return found[found >= 0]


PARALLEL_ROWS = 1_000_000
"""Rows a query's lists hold (on average: rows × share) from which faiss scans them on every
core (`LIST_PARALLEL`) instead of one.

faiss's fast scan searches one query in one thread by default (it splits a batch by query), and
at 10 M rows, share 1/4, that scan of 2.5 M codes is the dense stage's time. Measured 2026-11-28
on the 5 M and 10 M indexes at PubMed's length (2-core AVX2 EPYC, 120 questions, the candidates
`nearest` asks for; p50 one thread → every core, and questions a second):

| index, lists scanned (rows) | 1 caller | 2 callers at once | 2 other processes spinning |
|---|---|---|---|
| 5 M, 512 (312 k) | 8.5 → 5.9 ms | — | 12.2 → **16.2** ms (p95 22 → 40) |
| 5 M, 2,048 (1.25 M) | 25.6 → 16.1 ms | — | — |
| 10 M, 1,024 (625 k) | 19.8 → 12.9 ms | 84.3 → 82.2/s | — |
| 10 M, 2,048 (1.25 M) | 35.7 → 19.8 ms | 48.2 → 46.0/s | — |
| 10 M, 4,096 (2.5 M) | 58.7 → **32.8** ms | 30.3 → 31.3/s | 93.8 → 102.8 ms (p95 149 → 121) |

The same candidates (0.9986 of them; the rest ties of the 16-bit sums). A lone question — a chat,
`quorum ask` — is answered 1.4–1.8× sooner; questions of this process filling the cores keep
their rate. Cores busy with other work are where OpenMP loses: its threads wait for each other,
which cost a small scan a third more (and had made 14,448 rows take 24 ms for 1.6, measured
earlier) and a scan of millions about nothing (p50 +10%, p95 −19%); hence the threshold at a
million rows. Python threads scanning halves of the lists instead (faiss's
`search_preassigned`, the GIL released) did less: 42.1 ms alone at 10 M, 4,096 lists."""
LIST_PARALLEL = 14
"""faiss's `IndexIVFFastScan.implem` that splits one query's lists over its OpenMP threads."""


def parallel(rows_scanned: int) -> bool:
    """Tell whether a scan of `rows_scanned` rows is worth every core."""
    return rows_scanned >= PARALLEL_ROWS


def build(
    directory: Path,
    vectors: np.ndarray,
    scales: np.ndarray,
    rows: int,
    *,
    model: str,
    seed: int = 0,
    on_progress: Callable[[int, int], None] | None = None,
) -> AnnIndex:
    """Build the index over rows [0, rows) of the int8 `vectors` (× `scales`) and save it.

    Rows with scale 0 (no vector yet, or a document without text) are left out. Training takes
    `TRAIN_PER_LIST` rows per list, drawn evenly with `seed`; `on_progress(done, rows)` follows
    the adding.
    """
    import faiss

    dims = int(vectors.shape[1])
    lists = lists_for(rows)
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(rows, size=min(rows, lists * TRAIN_PER_LIST), replace=False))
    train = dequantize(vectors, scales, sample)
    train = train[scales[sample] > 0]
    if len(train) < lists:
        raise ValueError(f"{len(train):,} rows with vectors cannot train {lists:,} lists")
    quantizer = faiss.IndexFlatIP(dims)
    codes = dims // DIMS_PER_CODE if dims % DIMS_PER_CODE == 0 else dims
    index = faiss.IndexIVFPQFastScan(quantizer, dims, lists, codes, 4, faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = KMEANS_ITERATIONS
    index.train(train)
    for start in range(0, rows, ADD_BLOCK):
        block = np.arange(start, min(rows, start + ADD_BLOCK))
        kept = block[scales[block] > 0]
        if kept.size:
            index.add_with_ids(dequantize(vectors, scales, kept), kept.astype(np.int64))
        if on_progress is not None:
            on_progress(int(block[-1]) + 1, rows)
    path, meta_path = directory / ANN_FILE, directory / ANN_META
    faiss.write_index(index, str(path.with_name(path.name + ".tmp")))
    os.replace(path.with_name(path.name + ".tmp"), path)
    meta = {"rows": rows, "lists": lists, "dims": dims, "model": model, "seed": seed}
    meta_path.with_name(meta_path.name + ".tmp").write_text(json.dumps(meta))
    os.replace(meta_path.with_name(meta_path.name + ".tmp"), meta_path)
    opened = AnnIndex.open(directory)
    assert opened is not None
    return opened


def drop(directory: Path) -> None:
    """Remove a built index (the exact stage then serves every query)."""
    for name in (ANN_FILE, ANN_META):
        (directory / name).unlink(missing_ok=True)


def dequantize(vectors: np.ndarray, scales: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Return the rows `rows` of the int8 `vectors` as float32 (× their `scales`)."""
    return np.ascontiguousarray(vectors[rows].astype(np.float32) * scales[rows, None])
