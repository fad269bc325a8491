"""The embedded engine's arrays on disk: PMIDs by row, PMID → row, int8 vectors with scales.

Every per-document structure is a file the reader memory-maps, so opening an index costs the
same at 14 thousand documents as at 26 million, and the heap holds no per-document Python
object (a dict from PMID to row was ~160 MiB and 0.4 s at 1 M documents, ~4 GiB at 26 M):

  pmids.S<w>          row → PMID, fixed-width bytes (w in meta.json; widened when a longer ID
                      arrives), append-only
  lookup.<n>.keys     the PMIDs of rows < n, sorted, each once (its last row wins) ...
  lookup.<n>.rows     ... and their rows (uint32); rows ≥ n are few and read into a dict
  vectors.i8          int8 vectors, row-major, append-only
  scales.f32          one float32 per row: vector ≈ int8 row × scale; 0 = no vector yet

Vectors are int8 with a per-row scale, not float16: numpy converts float16 to float32 at
~0.8 GB/s on this CPU (5 ms for the 10,000 candidates of a question, 490 ms for a 1 M-row
dense scan) and int8 at ~12 GB/s (0.3 ms). The rounding error per component is at most
scale/2 (≈ 0.001 for unit vectors of 384 dims); `quorum bench scale` reports recall@10 fused
and the dense stage against float32 vectors.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

META, TANTIVY = "meta.json", "tantivy"
VECTORS, SCALES = "vectors.i8", "scales.f32"
LAYOUT_VERSION = 3
MIN_WIDTH = 10
"""Bytes a PMID takes at least (PubMed's reach 9 digits; longer IDs widen the file)."""
BLOCK = 65_536
"""Rows converted at once when upgrading an index or scanning all vectors."""


def pmids_file(width: int) -> str:
    """Return the file name of row → PMID at this width."""
    return f"pmids.S{width}"


def lookup_files(rows: int) -> tuple[str, str]:
    """Return the file names of the sorted PMID → row lookup over the first `rows` rows."""
    return f"lookup.{rows}.keys", f"lookup.{rows}.rows"


def write_meta(path: Path, meta: dict[str, Any]) -> None:
    """Replace meta.json atomically."""
    tmp = path / (META + ".tmp")
    tmp.write_text(json.dumps(meta))
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    tmp.replace(path / META)


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return int8 rows and float32 scales with row ≈ int8 × scale; a zero row gets scale 0."""
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"vectors must be a matrix, not shape {x.shape}")
    peak = np.abs(x).max(axis=1) if x.shape[1] else np.zeros(len(x), dtype=np.float32)
    scales = (peak / 127).astype(np.float32)
    safe = np.where(scales > 0, scales, 1).astype(np.float32)
    return np.clip(np.rint(x / safe[:, None]), -127, 127).astype(np.int8), scales


def mapped(
    path: Path, dtype: Any, shape: tuple[int, ...], *, scattered: bool = False
) -> np.ndarray:
    """Memory-map a file read-only (an empty array when the shape holds nothing).

    `scattered`: the map is read a row here and there, so the kernel reads no pages around
    each one (madvise MADV_RANDOM; where the platform has none, the map is as it would be).
    """
    if not all(shape):
        return np.zeros(shape, dtype=dtype)
    array = np.memmap(path, dtype=dtype, mode="r", shape=shape)
    if scattered and hasattr(mmap, "MADV_RANDOM"):
        array._mmap.madvise(mmap.MADV_RANDOM)  # type: ignore[attr-defined]
    return array


def decode(raw: np.ndarray) -> list[str]:
    """Return fixed-width PMID bytes as strings."""
    parts = raw.tolist()  # bytes without their padding
    try:
        # ASCII, the PubMed case: one join, decode and split in C (numpy's astype(str) took
        # twice as long, 0.1 ms of a top-1000 search).
        text = b"\n".join(parts).decode("ascii")
    except UnicodeDecodeError:
        return [b.decode("utf-8") for b in parts]
    out = text.split("\n")
    return out if len(out) == len(parts) else [b.decode("ascii") for b in parts]


def encode(pmids: Any) -> np.ndarray:
    """Return PMIDs as a bytes array as wide as the longest."""
    try:
        return np.array([str(p) for p in pmids], dtype=bytes)  # ASCII: numpy encodes in C
    except UnicodeEncodeError:
        return np.array([str(p).encode("utf-8") for p in pmids], dtype=bytes)


def row_pmids(path: Path) -> list[str]:
    """Return every row's PMID, in row order, as the committed meta.json counts them."""
    meta = json.loads((path / META).read_text())
    width, rows = int(meta["pmid_width"]), int(meta["rows"])
    return decode(mapped(path / pmids_file(width), f"S{width}", (rows,)))


class PmidLookup:
    """PMID → row over memory-mapped sorted keys, plus a dict for rows written since."""

    def __init__(self, path: Path, meta: dict[str, Any], pmids: np.ndarray):
        built = meta.get("lookup") or {"rows": 0}
        start = min(int(built["rows"]), len(pmids))
        if start:
            keys, rows = lookup_files(int(built["rows"]))
            size = int(built["keys"])
            self._keys = mapped(path / keys, f"S{int(built['width'])}", (size,))
            self._rows = mapped(path / rows, np.uint32, (size,))
        else:
            self._keys, self._rows = np.zeros(0, dtype="S1"), np.zeros(0, dtype=np.uint32)
        # Rows past the sorted part: normally none (the writer sorts them in when it closes).
        self._tail = {p: start + i for i, p in enumerate(decode(pmids[start:]))}

    def rows_of(self, pmids: Any) -> np.ndarray:
        """Return each PMID's current row, -1 for a PMID never indexed."""
        out = np.full(len(pmids), -1, dtype=np.int64)
        if not len(pmids):
            return out
        if len(self._keys):
            wanted = encode(pmids)
            at = np.minimum(np.searchsorted(self._keys, wanted), len(self._keys) - 1)
            found = self._keys[at] == wanted
            out[found] = self._rows[at[found]]
        if self._tail:
            for i, pmid in enumerate(pmids):
                row = self._tail.get(str(pmid))
                if row is not None:
                    out[i] = row
        return out


class RecentRows:
    """A search's hits as PMID → row, for the similarities and vectors asked of them next.

    At 10 M rows, finding 9,500 PMIDs' rows in the sorted lookup (a binary search over
    fixed-width byte strings) took 16 of the default path's 41 ms; the search had read those
    rows already. Rows are the reader's, fixed for its lifetime, so a PMID's row here is the one
    the lookup would give; a PMID not among the hits is looked up as before.
    """

    __slots__ = ("_map", "pmids", "rows")

    def __init__(self, pmids: list[str], rows: np.ndarray):
        self.pmids, self.rows = pmids, rows
        self._map: dict[str, int] | None = None  # built on first use: many searches never need it

    def rows_of(self, pmids: Sequence[str], lookup: PmidLookup) -> np.ndarray:
        """Return each PMID's row (-1: not indexed): from the hits, else from `lookup`."""
        if self._map is None:
            self._map = dict(zip(self.pmids, self.rows.tolist(), strict=True))
        get = self._map.get
        rows = np.fromiter((get(p, -2) for p in pmids), np.int64, len(pmids))
        missing = np.flatnonzero(rows == -2)
        if missing.size:
            rows[missing] = lookup.rows_of([pmids[i] for i in missing])
        return rows


def build_lookup(path: Path, meta: dict[str, Any], rows: int) -> None:
    """Sort the first `rows` PMIDs into a fresh lookup, point meta.json at it, drop the old one.

    A reader holding the old files keeps reading them (they are unlinked, not rewritten).
    """
    width = int(meta["pmid_width"])
    old = meta.get("lookup") or {"rows": 0}
    if rows == int(old["rows"]) and old.get("width") == width:
        return
    if rows >= 2**32:
        raise ValueError("an embedded index holds at most 4,294,967,295 rows")
    pmids = mapped(path / pmids_file(width), f"S{width}", (rows,))
    order = np.argsort(pmids, kind="stable")
    keys = pmids[order]
    last = np.ones(len(keys), dtype=bool)  # a re-indexed PMID: its latest row wins
    last[:-1] = keys[1:] != keys[:-1]
    keys_name, rows_name = lookup_files(rows)
    for name, array in ((keys_name, keys[last]), (rows_name, order[last].astype(np.uint32))):
        with open(path / name, "wb") as fh:
            fh.write(np.ascontiguousarray(array).tobytes())
            os.fsync(fh.fileno())
    meta["lookup"] = {"rows": rows, "keys": int(last.sum()), "width": width}
    write_meta(path, meta)
    if int(old["rows"]) and int(old["rows"]) != rows:
        for name in lookup_files(int(old["rows"])):
            (path / name).unlink(missing_ok=True)


def upgrade(path: Path, meta: dict[str, Any], rows: int) -> dict[str, Any]:
    """Rewrite a layout-2 index (pmids.txt, float16 vectors) as layout 3 in place.

    The new files are written first and meta.json last, so an upgrade cut short is redone.
    """
    lines = (path / "pmids.txt").read_text(encoding="utf-8").split("\n")[:rows]
    width = max([MIN_WIDTH, *(len(p.encode("utf-8")) for p in lines)])
    with open(path / pmids_file(width), "wb") as fh:
        fh.write(np.array([p.encode("utf-8") for p in lines], dtype=f"S{width}").tobytes())
    dims = meta.get("dims")
    if dims:
        old = mapped(path / "vectors.f16", np.float16, (rows, dims))
        with open(path / VECTORS, "wb") as vectors, open(path / SCALES, "wb") as scales:
            for start in range(0, rows, BLOCK):
                q, s = quantize(old[start : start + BLOCK])
                vectors.write(q.tobytes())
                scales.write(s.tobytes())
    meta = {**meta, "version": LAYOUT_VERSION, "pmid_width": width, "rows": rows}
    meta["pending_rows"] = rows
    meta.pop("lookup", None)
    build_lookup(path, meta, rows)
    for name in ("pmids.txt", "vectors.f16"):
        (path / name).unlink(missing_ok=True)
    return meta
