"""On-disk layout of the embedded engine, and its writer (an index is opened by `embedded_open`).

An index directory holds:
  tantivy/      BM25 index: pmid, title, abstract, text (both), mesh, journal, year, row
                (`embedded_schema`); with shards, tantivy-1/ … beside it (`embedded_shards`)
  pmids.S<w>, lookup.*, vectors.i8, scales.f32
                the memory-mapped arrays of `embedded_layout` (row → PMID, PMID → row, vectors)
  meta.json     dims, embedding model, committed rows (+ rows of a commit in flight), the PMID
                width, the lookup's extent, and `embedded_rows`: every row below it has its
                vector (or needs none)
A re-indexed PMID gets a new row and its old document is deleted, so rows only grow; rows of a
batch whose tantivy commit never happened are cut off when the index is next opened. A row
written without its vector has scale 0 until `quorum embed` fills it in place (`embedded_fill`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from infra.search.embedded_fill import VectorFilling
from infra.search.embedded_layout import (
    LAYOUT_VERSION,
    META,
    MIN_WIDTH,
    SCALES,
    VECTORS,
    build_lookup,
    mapped,
    pmids_file,
    quantize,
    write_meta,
)
from infra.search.embedded_open import open_layout, remove_index
from infra.search.embedded_reembed import Reembedding
from infra.search.embedded_schema import document, has_combined, schema
from infra.search.embedded_shards import (
    PENDING_DELETES,
    any_older,
    apply_deletes,
    read_pending,
    row_range,
    shard_dirs,
    write_pending,
)

WRITER_HEAP = 256_000_000
"""Bytes tantivy's writer may fill before it writes a segment out (~300,000 short abstracts)."""
# One indexing thread, not one per core: each thread writes a segment of its own at every commit,
# and a search pays per segment (each collects and sorts its own top 1,000; tantivy-py offers no
# merge). At 1 M documents, 100,000 to a commit: 2 threads left 6 segments and BM25 top-1000
# took 1.75 ms in tantivy, 1 thread 3 segments and 1.40 ms, for 12% fewer documents a second.

RESORT_AT = 1_000_000
"""Rows written since the lookup was sorted that make a commit sort it again (each `close`
does): readers keep those rows in a dict, so it stays small, and re-sorting only when the tail
reaches max(this, the sorted rows) keeps the total sorting work linear in the rows."""


class EmbeddedWriter(VectorFilling):
    """Adds, replaces and deletes documents by PMID; `commit` makes a batch durable.

    With `vectors_later`, an index that stores vectors also takes documents without them (rows
    of scale 0 that `quorum embed` fills in later); otherwise every document must come with one.
    """

    def __init__(
        self,
        path: Path,
        *,
        dims: int | None = None,
        embedding_model: str | None = None,
        vectors_later: bool = False,
        shards: int = 1,
    ):
        self.path = Path(path)
        if not (self.path / META).exists():
            for directory in shard_dirs(self.path, shards):
                directory.mkdir(parents=True, exist_ok=True)
                tantivy.Index(schema(), path=str(directory))
            (self.path / pmids_file(MIN_WIDTH)).touch()
            for name in (VECTORS, SCALES) if dims else ():
                (self.path / name).touch()
            write_meta(
                self.path,
                {
                    "version": LAYOUT_VERSION,
                    "dims": dims,
                    "embedding_model": embedding_model,
                    "rows": 0,
                    "pmid_width": MIN_WIDTH,
                    **({"shards": shards} if shards > 1 else {}),
                },
            )
        self._indexes, self.meta, self.rows = open_layout(self.path)
        self._index = self._indexes[0]
        self._combined = has_combined(self._index.schema)  # older indexes: title, abstract only
        self.dims = self.meta["dims"]
        heap = max(WRITER_HEAP // len(self._indexes), 50_000_000)
        self._writers = [i.writer(heap_size=heap, num_threads=1) for i in self._indexes]
        self._writer = self._writers[0]
        # A sharded commit's deletes, until it commits: PMID → its row in this batch, PMIDs
        # deleted, rows superseded within the batch (`embedded_shards`: two phases).
        self._batch: dict[str, int] = {}
        self._deleted: set[str] = set()
        self._superseded: list[int] = []
        if len(self._indexes) > 1:
            self._recover()
        self._truncate(self.rows)
        self._width = int(self.meta["pmid_width"])
        self._pmids = open(self.path / pmids_file(self._width), "ab")  # noqa: SIM115
        self._vectors = self._open_vectors() if self.dims else None
        self._next = self.rows
        self.vectors_later = vectors_later
        # Old indexes have no watermark: all their rows were written with vectors, or none were.
        embedded = self.meta.get("embedded_rows", self.rows if self.dims else 0)
        self._embedded = min(int(embedded), self.rows)
        self._in_place: tuple[int, int] | None = None  # descriptors for vectors written in place
        self._next_model: Reembedding | None = None  # another model's vectors being computed

    @property
    def shards(self) -> int:
        """Return how many tantivy shards the index is written into."""
        return len(self._indexes)

    def _recover(self) -> None:
        """Settle a sharded commit a crash interrupted: take back phase 1, or finish phase 2."""
        pending_rows = int(self.meta.get("pending_rows", self.meta["rows"]))
        if pending_rows > self.rows:  # some shard lacks the batch: remove it from the others
            for writer in self._writers:
                writer.delete_documents_by_query(
                    row_range(self._index.schema, self.rows, pending_rows - 1)
                )
                writer.commit()
        pending = read_pending(self.path)
        if pending is not None:
            if int(pending["through"]) <= self.rows:  # the batch landed: finish its deletes
                apply_deletes(self._index.schema, self._writers, pending)
            (self.path / PENDING_DELETES).unlink()
        for index in self._indexes:
            index.reload()

    def _files(self) -> list[Any]:
        return [self._pmids, *(self._vectors or ())]

    def _truncate(self, rows: int) -> None:
        """Cut the row files back to `rows` (an uncommitted batch's rows go)."""
        widths = [(pmids_file(int(self.meta["pmid_width"])), int(self.meta["pmid_width"]))]
        if self.dims:
            widths += [(VECTORS, self.dims), (SCALES, 4)]
        for name, width in widths:
            with open(self.path / name, "rb+") as fh:
                fh.truncate(rows * width)
        if self.meta.get("pending_rows", rows) != rows or self.meta["rows"] != rows:
            self.meta.update(rows=rows, pending_rows=rows)
            write_meta(self.path, self.meta)

    def upsert(self, docs: Sequence[dict[str, Any]], vectors: np.ndarray | None) -> int:
        """Add or replace documents; a PMID written twice keeps only its last version."""
        if self.dims and vectors is None and self.vectors_later:
            vectors = np.zeros((len(docs), self.dims), dtype=np.float32)
        elif self.dims and (vectors is None or vectors.shape != (len(docs), self.dims)):
            raise ValueError(
                f"this index stores {self.dims}-dimensional vectors: give one per document"
            )
        latest = {str(doc["pmid"]): i for i, doc in enumerate(docs)}
        order = sorted(latest.values())
        # Build every document first: a bad one must fail the batch before any row is written.
        built = [
            document(docs[i], self._next + k, combined=self._combined) for k, i in enumerate(order)
        ]
        pmids = [str(docs[i]["pmid"]).encode("utf-8") for i in order]
        self._widen(max((len(p) for p in pmids), default=0))
        shards = len(self._writers)
        for row, (pmid, written) in enumerate(zip(pmids, built, strict=True), self._next):
            if shards == 1:
                self._writer.delete_documents_by_term("pmid", pmid.decode("utf-8"))
            else:  # deleted in phase 2, after every shard has the new documents
                earlier = self._batch.get(key := pmid.decode("utf-8"))
                if earlier is not None:
                    self._superseded.append(earlier)
                self._batch[key] = row
            self._writers[row % shards].add_document(written)
        self._pmids.write(np.array(pmids, dtype=f"S{self._width}").tobytes())
        if self.dims and self._embedded == self._next and np.any(vectors[order], axis=1).all():
            self._embedded += len(order)  # still contiguous: nothing for `quorum embed` here
        self._next += len(order)
        if self._vectors is not None and vectors is not None:
            quantized, scales = quantize(vectors[order])
            self._vectors[0].write(quantized.tobytes())
            self._vectors[1].write(scales.tobytes())
        return len(order)

    def _widen(self, needed: int) -> None:
        """Rewrite row → PMID wider when a PMID does not fit (the new file first, then meta)."""
        if needed <= self._width:
            return
        self._pmids.close()
        old = mapped(self.path / pmids_file(self._width), f"S{self._width}", (self._next,))
        with open(self.path / pmids_file(needed), "wb") as fh:
            fh.write(np.asarray(old, dtype=f"S{needed}").tobytes())
            fh.flush()
            os.fsync(fh.fileno())
        del old
        stale = self.path / pmids_file(self._width)
        self.meta["pmid_width"] = self._width = needed
        write_meta(self.path, self.meta)
        stale.unlink()
        self._pmids = open(self.path / pmids_file(needed), "ab")  # noqa: SIM115

    def delete(self, pmids: Sequence[str]) -> int:
        """Delete documents by PMID; return how many were in the index as of the last commit."""
        searchers = [index.searcher() for index in self._indexes]
        present = 0
        for pmid in map(str, pmids):
            query = tantivy.Query.term_query(self._index.schema, "pmid", pmid)
            present += any(s.search(query, 1).count > 0 for s in searchers)
            if len(self._writers) == 1:
                self._writer.delete_documents_by_term("pmid", pmid)
                continue
            earlier = self._batch.pop(pmid, None)
            if earlier is not None:
                self._superseded.append(earlier)
            self._deleted.add(pmid)
        return present

    def commit(self, *, sort: bool = False) -> None:
        """Make every write so far durable and visible to newly opened readers."""
        for fh in self._files():
            fh.flush()
            os.fsync(fh.fileno())
        for fd in self._in_place or ():  # vectors written into their rows, below the watermark
            os.fsync(fd)
        pending = None
        if (
            self._deleted
            or self._superseded
            or any_older(self._indexes, list(self._batch), self.rows)
        ):
            # sharded: the deletes wait for phase 2 (a batch of new PMIDs has none to do)
            pmids = sorted(set(self._batch) | self._deleted)
            pending = write_pending(self.path, pmids, self.rows, self._superseded, self._next)
        self.meta["pending_rows"] = self._next
        write_meta(self.path, self.meta)
        for writer in self._writers:
            writer.commit()
        self.meta["rows"] = self.rows = self._next
        self.meta["embedded_rows"] = self._embedded
        write_meta(self.path, self.meta)
        if pending is not None:
            apply_deletes(self._index.schema, self._writers, pending)
            (self.path / PENDING_DELETES).unlink()
        self._batch, self._deleted, self._superseded = {}, set(), []
        for index in self._indexes:
            index.reload()
        sorted_rows = int((self.meta.get("lookup") or {"rows": 0})["rows"])
        if sort or self.rows - sorted_rows >= max(RESORT_AT, sorted_rows):
            build_lookup(self.path, self.meta, self.rows)

    def close(self) -> None:
        """Commit (sorting every row into the PMID lookup) and release the index."""
        self.commit(sort=True)
        for writer in self._writers:
            writer.wait_merging_threads()
        for fh in self._files():
            fh.close()
        for fd in self._in_place or ():
            os.close(fd)
        self._in_place = None
        if self._next_model is not None:
            self._next_model.close()


def build_fresh(
    path: Path,
    docs: Sequence[dict[str, Any]],
    vectors: np.ndarray | None,
    embedding_model: str | None,
) -> None:
    """Write a complete index at `path` atomically (a half-built index is never opened)."""
    path = Path(path)
    if vectors is not None and len(vectors) != len(docs):
        raise ValueError(f"{len(vectors)} vectors for {len(docs)} documents")
    staging = path.with_name(path.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        dims = int(vectors.shape[1]) if vectors is not None else None
        writer = EmbeddedWriter(
            staging, dims=dims, embedding_model=embedding_model if dims else None
        )
        writer.upsert(list(docs), vectors)
        writer.close()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    remove_index(path)
    staging.replace(path)
