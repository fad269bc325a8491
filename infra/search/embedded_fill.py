"""`quorum embed`'s side of the embedded writer: vectors written into rows that lack them.

Rows written without vectors (`vectors_later`) hold scale 0 until filled in place here, below a
watermark (`embedded_rows`) that moves at each commit; another model's vectors are computed
beside the current ones (`embedded_reembed`) and swapped in once every row has one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from infra.search.embedded_layout import (
    SCALES,
    VECTORS,
    decode,
    mapped,
    pmids_file,
    quantize,
    write_meta,
)
from infra.search.embedded_reembed import Reembedding
from infra.search.embedded_shards import every_hit
from infra.search.unembedded import Unembedded


class VectorFilling:
    """The writer's vector side; `EmbeddedWriter` holds the state it reads and writes."""

    path: Path
    meta: dict[str, Any]
    dims: int | None
    rows: int
    _next: int
    _embedded: int
    _width: int
    _indexes: list[tantivy.Index]
    _index: tantivy.Index
    _vectors: tuple[Any, Any] | None
    _in_place: tuple[int, int] | None
    _next_model: Reembedding | None

    def _open_vectors(self) -> tuple[Any, Any]:
        return open(self.path / VECTORS, "ab"), open(self.path / SCALES, "ab")

    def start_vectors(self, dims: int, model: str) -> None:
        """Store `dims`-dimensional vectors of `model` from now on (rows so far lack them).

        An index holding another model's vectors keeps them for searches while this model's
        are computed beside them (`embedded_reembed`), swapped in once every row has one.
        """
        if self.dims:
            stored = self.meta.get("embedding_model")
            if self.dims != dims or (stored and stored != model):
                self._next_model = Reembedding.begin(self.path, self.meta, dims, model)
            return
        for name, width in ((VECTORS, dims), (SCALES, 4)):
            with open(self.path / name, "ab") as fh:
                fh.truncate(self._next * width)  # sparse: scale-0 rows until embedded
                os.fsync(fh.fileno())
        self.dims = dims
        self.meta.update(dims=dims, embedding_model=model, embedded_rows=0)
        self._embedded = 0
        write_meta(self.path, self.meta)
        self._vectors = self._open_vectors()

    def unembedded(self, batch_size: int) -> Iterator[Unembedded]:
        """Yield the current documents whose rows hold no vector yet, in row order, in batches.

        Rows below the watermark are skipped unread; a superseded row (its PMID re-indexed
        later) and a document without text need no vector. While another model's vectors are
        computed, every row from that scan's resume point lacks one.
        """
        again = self._next_model
        first = again.through if again else self._embedded
        if not self.dims or first >= self.rows:
            return
        scales = mapped(self.path / SCALES, np.float32, (self.rows,))
        pmids = mapped(self.path / pmids_file(self._width), f"S{self._width}", (self.rows,))
        searchers = [index.searcher() for index in self._indexes]
        for start in range(first, self.rows, batch_size):
            end = min(start + batch_size, self.rows)
            if again:
                empty = np.arange(start, end)
            else:
                empty = np.flatnonzero(scales[start:end] == 0) + start
            wanted = dict(zip(empty.tolist(), decode(pmids[empty]), strict=True))
            docs = _current(searchers, self._index.schema, wanted)
            yield Unembedded([r for r, _ in docs], [d for _, d in docs], end)

    def count_unembedded(self) -> int:
        """Return how many rows may lack a vector (those above the watermark: an upper bound)."""
        if self._next_model is not None:
            return self.rows - self._next_model.through
        return self.rows - self._embedded if self.dims else self.rows

    def set_vectors(self, rows: Sequence[int], vectors: np.ndarray, through: int) -> None:
        """Write vectors into their rows in place; `through` becomes the watermark at commit."""
        if self._next_model is not None:
            self._next_model.write(rows, vectors, through)
            return
        if rows:
            if self._in_place is None:
                self._in_place = (
                    os.open(self.path / VECTORS, os.O_WRONLY),
                    os.open(self.path / SCALES, os.O_WRONLY),
                )
            quantized, scales = quantize(vectors)
            for row, vector, scale in zip(rows, quantized, scales, strict=True):
                os.pwrite(self._in_place[0], vector.tobytes(), row * self.dims)
                os.pwrite(self._in_place[1], scale.tobytes(), row * 4)
        self._embedded = max(self._embedded, through)

    def commit_vectors(self) -> None:
        """Make the vectors written in place durable, then move the watermark past them."""
        if self._next_model is not None:
            if self._next_model.commit(self.rows):  # the new model's vectors are the index's now
                self._next_model = None
                for fh in self._vectors or ():
                    fh.close()
                for fd in self._in_place or ():  # they wrote into the old files
                    os.close(fd)
                self._in_place = None
                self.dims, self._embedded = self.meta["dims"], int(self.meta["embedded_rows"])
                self._vectors = self._open_vectors()
            return
        for fd in self._in_place or ():
            os.fsync(fd)
        self.meta["embedded_rows"] = self._embedded
        write_meta(self.path, self.meta)

    def vectors_model(self) -> str | None:
        """Return the model whose vectors searches use (None when the index stores none)."""
        return self.meta.get("embedding_model") if self.dims else None

    def finish_vectors(self) -> None:
        """Nothing to do: another model's vectors are swapped in by the commit reaching the end."""


def _current(
    searchers: list[tantivy.Searcher], schema: tantivy.Schema, wanted: dict[int, str]
) -> list[tuple[int, dict[str, Any]]]:
    """Return (row, document) for the rows that hold their PMID's current text, in row order."""
    if not wanted:
        return []
    query = tantivy.Query.term_set_query(schema, "pmid", list(set(wanted.values())))
    found = []
    for searcher in searchers:
        for address in every_hit(searcher, query, len(wanted)):
            stored = searcher.doc(address).to_dict()
            row = int(stored["row"][0])
            title, abstract = ((stored.get(f) or [""])[0] for f in ("title", "abstract"))
            if wanted.get(row) is not None and (title or abstract):
                found.append((row, {"pmid": wanted[row], "title": title, "abstract": abstract}))
    return sorted(found, key=lambda pair: pair[0])
