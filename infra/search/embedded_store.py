"""On-disk layout of the embedded engine, and its writer.

An index directory holds:
  tantivy/      BM25 index: pmid, title, abstract, mesh, journal, year, row (fast field)
  pmids.txt     one PMID per row, append-only (row i is line i)
  vectors.f16   float16 vectors, row-major, append-only (when the index stores vectors)
  meta.json     dims, embedding model, committed rows (+ rows of a commit in flight), and
                `embedded_rows`: every row below it has its vector (or needs none)
A re-indexed PMID gets a new row and its old document is deleted, so rows only grow; rows of a
batch whose tantivy commit never happened are cut off when the index is next opened. A row
written without its vector holds zeros until `quorum embed` fills it in place.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from infra.search.unembedded import Unembedded

META, PMIDS, VECTORS, TANTIVY = "meta.json", "pmids.txt", "vectors.f16", "tantivy"
LAYOUT_VERSION = 2


def schema() -> tantivy.Schema:
    """Return the tantivy schema of an embedded index."""
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("pmid", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("abstract", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("mesh", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("journal", stored=True, tokenizer_name="raw")
    builder.add_integer_field("year", stored=True, indexed=True, fast=True)
    builder.add_unsigned_field("row", stored=True, indexed=True, fast=True)
    return builder.build()


def read_meta(path: Path) -> dict[str, Any]:
    """Read an index's meta.json (FileNotFoundError when there is no index)."""
    meta = json.loads((path / META).read_text())
    if meta.get("version") != LAYOUT_VERSION:
        raise ValueError(
            f"index at {path} has layout {meta.get('version')}; rebuild it with `quorum index`"
        )
    return meta


def write_meta(path: Path, meta: dict[str, Any]) -> None:
    """Replace meta.json atomically."""
    tmp = path / (META + ".tmp")
    tmp.write_text(json.dumps(meta))
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    tmp.replace(path / META)


def committed_rows(index: tantivy.Index, meta: dict[str, Any]) -> int:
    """Return the rows that belong to committed documents, settling a commit left in flight."""
    rows, pending = int(meta["rows"]), int(meta.get("pending_rows", meta["rows"]))
    if pending <= rows:
        return rows
    query = tantivy.Query.range_query(
        index.schema, "row", tantivy.FieldType.Unsigned, rows, pending - 1
    )
    landed = index.searcher().search(query, 1).count
    return pending if landed else rows


class EmbeddedWriter:
    """Adds, replaces and deletes documents by PMID; `commit` makes a batch durable.

    With `vectors_later`, an index that stores vectors also takes documents without them (zero
    rows that `quorum embed` fills in later); otherwise every document must come with one.
    """

    def __init__(
        self,
        path: Path,
        *,
        dims: int | None = None,
        embedding_model: str | None = None,
        vectors_later: bool = False,
    ):
        self.path = Path(path)
        if not (self.path / META).exists():
            (self.path / TANTIVY).mkdir(parents=True, exist_ok=True)
            tantivy.Index(schema(), path=str(self.path / TANTIVY))
            (self.path / PMIDS).touch()
            if dims:
                (self.path / VECTORS).touch()
            write_meta(
                self.path,
                {
                    "version": LAYOUT_VERSION,
                    "dims": dims,
                    "embedding_model": embedding_model,
                    "rows": 0,
                },
            )
        self.meta = read_meta(self.path)
        self.dims = self.meta["dims"]
        self._index = tantivy.Index.open(str(self.path / TANTIVY))
        self.rows = committed_rows(self._index, self.meta)
        self._truncate(self.rows)
        self._writer = self._index.writer(heap_size=128_000_000, num_threads=1)
        self._pmids = open(self.path / PMIDS, "a", encoding="utf-8")  # noqa: SIM115
        self._vectors = open(self.path / VECTORS, "ab") if self.dims else None  # noqa: SIM115
        self._next = self.rows
        self.vectors_later = vectors_later
        # Old indexes have no watermark: all their rows were written with vectors, or none were.
        embedded = self.meta.get("embedded_rows", self.rows if self.dims else 0)
        self._embedded = min(int(embedded), self.rows)
        self._in_place: int | None = None  # a descriptor for vectors written into their rows

    def _truncate(self, rows: int) -> None:
        """Cut pmids.txt and vectors.f16 back to `rows` (an uncommitted batch's rows go)."""
        with open(self.path / PMIDS, "rb+") as fh:
            lines = fh.read().split(b"\n")
            keep = b"".join(line + b"\n" for line in lines[:rows])
            if len(keep) != fh.tell():
                fh.seek(0)
                fh.write(keep)
                fh.truncate()
        if self.dims:
            with open(self.path / VECTORS, "rb+") as fh:
                fh.truncate(rows * self.dims * 2)
        if self.meta.get("pending_rows", rows) != rows or self.meta["rows"] != rows:
            self.meta.update(rows=rows, pending_rows=rows)
            write_meta(self.path, self.meta)

    def upsert(self, docs: Sequence[dict[str, Any]], vectors: np.ndarray | None) -> int:
        """Add or replace documents; a PMID written twice keeps only its last version."""
        if self.dims and vectors is None and self.vectors_later:
            vectors = np.zeros((len(docs), self.dims), dtype=np.float16)
        elif self.dims and (vectors is None or vectors.shape != (len(docs), self.dims)):
            raise ValueError(
                f"this index stores {self.dims}-dimensional vectors: give one per document"
            )
        latest = {str(doc["pmid"]): i for i, doc in enumerate(docs)}
        order = sorted(latest.values())
        # Build every document first: a bad one must fail the batch before any row is written.
        built = [self._document(docs[i], self._next + k) for k, i in enumerate(order)]
        for i, document in zip(order, built, strict=True):
            pmid = str(docs[i]["pmid"])
            self._writer.delete_documents_by_term("pmid", pmid)
            self._writer.add_document(document)
            self._pmids.write(pmid + "\n")
        if self.dims and self._embedded == self._next and np.any(vectors[order], axis=1).all():
            self._embedded += len(order)  # still contiguous: nothing for `quorum embed` here
        self._next += len(order)
        if self._vectors is not None and vectors is not None:
            self._vectors.write(np.asarray(vectors[order], dtype=np.float16).tobytes())
        return len(order)

    @staticmethod
    def _document(doc: dict[str, Any], row: int) -> tantivy.Document:
        year = int(doc.get("year") or 0)
        if not -(2**63) <= year < 2**63:
            raise ValueError(f"PMID {doc['pmid']}: year {year} is out of range")
        document = tantivy.Document(
            pmid=str(doc["pmid"]),
            title=doc.get("title") or "",
            abstract=doc.get("abstract") or "",
            mesh=" ; ".join(doc.get("mesh") or []),
            journal=doc.get("journal") or "",
        )
        document.add_integer("year", year)
        document.add_unsigned("row", row)
        return document

    def delete(self, pmids: Sequence[str]) -> int:
        """Delete documents by PMID; return how many were in the index as of the last commit."""
        searcher = self._index.searcher()
        present = 0
        for pmid in pmids:
            query = tantivy.Query.term_query(self._index.schema, "pmid", str(pmid))
            present += searcher.search(query, 1).count > 0
            self._writer.delete_documents_by_term("pmid", str(pmid))
        return present

    def commit(self) -> None:
        """Make every write so far durable and visible to newly opened readers."""
        for fh in (self._pmids, self._vectors):
            if fh is not None:
                fh.flush()
                os.fsync(fh.fileno())
        if self._in_place is not None:  # vectors written into their rows, below the watermark
            os.fsync(self._in_place)
        self.meta["pending_rows"] = self._next
        write_meta(self.path, self.meta)
        self._writer.commit()
        self._index.reload()
        self.meta["rows"] = self.rows = self._next
        self.meta["embedded_rows"] = self._embedded
        write_meta(self.path, self.meta)

    def start_vectors(self, dims: int, model: str) -> None:
        """Store `dims`-dimensional vectors of `model` from now on (rows so far lack them).

        ValueError when the index already stores vectors of another model or dimension.
        """
        if self.dims:
            stored = self.meta.get("embedding_model")
            if self.dims != dims or (stored and stored != model):
                raise ValueError(
                    f"index at {self.path} holds {stored} vectors ({self.dims} dims), "
                    f"not {model} ({dims} dims)"
                )
            return
        with open(self.path / VECTORS, "ab") as fh:
            fh.truncate(self._next * dims * 2)  # sparse: zero rows until embedded
            os.fsync(fh.fileno())
        self.dims = dims
        self.meta.update(dims=dims, embedding_model=model, embedded_rows=0)
        self._embedded = 0
        write_meta(self.path, self.meta)
        self._vectors = open(self.path / VECTORS, "ab")  # noqa: SIM115

    def unembedded(self, batch_size: int) -> Iterator[Unembedded]:
        """Yield the current documents whose rows hold no vector yet, in row order, in batches.

        Rows below the watermark are skipped unread; a superseded row (its PMID re-indexed
        later) and a document without text need no vector.
        """
        if not self.dims or self._embedded >= self.rows:
            return
        matrix = np.memmap(
            self.path / VECTORS, dtype=np.float16, mode="r", shape=(self.rows, self.dims)
        )
        searcher = self._index.searcher()
        with open(self.path / PMIDS, encoding="utf-8") as fh:
            rows = (
                (row, line.rstrip("\n"))
                for row, line in enumerate(fh)
                if self._embedded <= row < self.rows
            )
            while True:
                chunk = [pair for _, pair in zip(range(batch_size), rows, strict=False)]
                if not chunk:
                    return
                start, end = chunk[0][0], chunk[-1][0] + 1
                empty = ~np.any(matrix[start:end], axis=1)
                wanted = {row: pmid for row, pmid in chunk if empty[row - start]}
                docs = _current(searcher, self._index.schema, wanted)
                yield Unembedded([r for r, _ in docs], [d for _, d in docs], end)

    def count_unembedded(self) -> int:
        """Return how many rows may lack a vector (those above the watermark: an upper bound)."""
        return self.rows - self._embedded if self.dims else self.rows

    def set_vectors(self, rows: Sequence[int], vectors: np.ndarray, through: int) -> None:
        """Write vectors into their rows in place; `through` becomes the watermark at commit."""
        if rows:
            if self._in_place is None:
                self._in_place = os.open(self.path / VECTORS, os.O_WRONLY)
            width = self.dims * 2
            for row, vector in zip(rows, np.asarray(vectors, dtype=np.float16), strict=True):
                os.pwrite(self._in_place, vector.tobytes(), row * width)
        self._embedded = max(self._embedded, through)

    def commit_vectors(self) -> None:
        """Make the vectors written in place durable, then move the watermark past them."""
        if self._in_place is not None:
            os.fsync(self._in_place)
        self.meta["embedded_rows"] = self._embedded
        write_meta(self.path, self.meta)

    def close(self) -> None:
        """Commit and release the index."""
        self.commit()
        self._writer.wait_merging_threads()
        for fh in (self._pmids, self._vectors):
            if fh is not None:
                fh.close()
        if self._in_place is not None:
            os.close(self._in_place)
            self._in_place = None


def _current(
    searcher: tantivy.Searcher, schema: tantivy.Schema, wanted: dict[int, str]
) -> list[tuple[int, dict[str, Any]]]:
    """Return (row, document) for the rows that hold their PMID's current text, in row order."""
    if not wanted:
        return []
    query = tantivy.Query.term_set_query(schema, "pmid", list(set(wanted.values())))
    found = []
    for _, address in searcher.search(query, len(wanted)).hits:
        stored = searcher.doc(address).to_dict()
        row = int(stored["row"][0])
        title, abstract = ((stored.get(f) or [""])[0] for f in ("title", "abstract"))
        if wanted.get(row) is not None and (title or abstract):
            found.append((row, {"pmid": wanted[row], "title": title, "abstract": abstract}))
    return sorted(found, key=lambda pair: pair[0])


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
    shutil.rmtree(path, ignore_errors=True)
    staging.replace(path)
