"""A new model's vectors for an embedded index, computed beside the old ones and swapped in.

`quorum embed` with a model other than the one an index's vectors came from (a retriever just
trained, say) embeds every document again. Writing over the old vectors row by row would leave
the index searching with two models' vectors mixed for hours, and a killed run would leave it
so. Instead the new vectors go into their own files (`vectors.next.i8`, `scales.next.f32`) while
searches keep using the old ones; meta.json's `reembed` records the model, its dimension and the
row below which every document has its new vector, so a killed run resumes there. When the scan
reaches the last row, the files are renamed over the old ones and meta names the new model: a
reader opened before keeps its mapping of the old files, one opened after sees only the new.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from infra.search.ann import drop as drop_ann
from infra.search.embedded_layout import SCALES, VECTORS, quantize, write_meta
from infra.search.row_codes import drop as drop_row_codes

NEXT_VECTORS, NEXT_SCALES = "vectors.next.i8", "scales.next.f32"


class Reembedding:
    """The new vectors being computed for an index, and how far the scan has come."""

    def __init__(self, path: Path, meta: dict[str, Any]):
        self.path, self.meta = path, meta
        state = meta["reembed"]
        self.model, self.dims = str(state["model"]), int(state["dims"])
        self.through = int(state["through"])
        self._fds: tuple[int, int] | None = None

    @classmethod
    def begin(cls, path: Path, meta: dict[str, Any], dims: int, model: str) -> Reembedding:
        """Start computing `model`'s vectors, or resume if an earlier run left them half done."""
        state = meta.get("reembed") or {}
        if state.get("model") != model or int(state.get("dims", 0)) != dims:
            for name in (NEXT_VECTORS, NEXT_SCALES):  # another model's half-done vectors go
                with open(path / name, "wb") as fh:
                    os.fsync(fh.fileno())
            meta["reembed"] = {"model": model, "dims": dims, "through": 0}
            write_meta(path, meta)
        return cls(path, meta)

    def write(self, rows: Sequence[int], vectors: np.ndarray, through: int) -> None:
        """Write these rows' new vectors; `through` becomes the resume point at commit."""
        if len(rows):
            if self._fds is None:
                self._fds = (
                    os.open(self.path / NEXT_VECTORS, os.O_WRONLY),
                    os.open(self.path / NEXT_SCALES, os.O_WRONLY),
                )
            quantized, scales = quantize(np.asarray(vectors, dtype=np.float32))
            for row, vector, scale in zip(rows, quantized, scales, strict=True):
                os.pwrite(self._fds[0], vector.tobytes(), row * self.dims)
                os.pwrite(self._fds[1], scale.tobytes(), row * 4)
        self.through = max(self.through, through)

    def commit(self, rows: int) -> bool:
        """Make the new vectors durable and record the resume point; True once swapped in.

        The swap happens when every one of the index's `rows` has been scanned.
        """
        for fd in self._fds or ():
            os.fsync(fd)
        self.meta["reembed"]["through"] = self.through
        write_meta(self.path, self.meta)
        if self.through < rows:
            return False
        self.close()
        for name, width in ((NEXT_VECTORS, self.dims), (NEXT_SCALES, 4)):
            with open(self.path / name, "rb+") as fh:
                fh.truncate(rows * width)  # rows never written (superseded, empty) read as 0
                os.fsync(fh.fileno())
        self.meta["reembed"].update(swap=True, rows=rows)
        write_meta(self.path, self.meta)
        finish_swap(self.path, self.meta)
        return True

    def close(self) -> None:
        """Release the files the new vectors are written through."""
        for fd in self._fds or ():
            os.close(fd)
        self._fds = None


def finish_swap(path: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Complete a swap of new vectors for old that meta says began (a no-op otherwise).

    Every step can be repeated: a swap cut short by a crash is finished when the index opens.
    """
    state = meta.get("reembed") or {}
    if not state.get("swap"):
        return meta
    # What was built from the old vectors goes first: the IVF index and row codes of another
    # model would name the wrong candidates (rebuilt by the next `quorum embed`/`index`).
    drop_ann(path)
    drop_row_codes(path)
    for name, target in ((NEXT_VECTORS, VECTORS), (NEXT_SCALES, SCALES)):
        if (path / name).exists():
            os.replace(path / name, path / target)
    meta.update(
        dims=int(state["dims"]),
        embedding_model=state["model"],
        embedded_rows=min(int(state["rows"]), int(meta["rows"])),
    )
    del meta["reembed"]
    write_meta(path, meta)
    return meta
