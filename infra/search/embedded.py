"""The embedded engine: a tantivy BM25 index on disk plus memory-mapped float16 vectors."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from infra.search.base import SearchResult
from infra.search.query import Node, Phrase, QueryError, Term, parse_query

_SPECIAL = set('+-&|!(){}[]^"~*?:\\/ ')
META = "meta.json"
VECTORS = "vectors.f16.npy"
PMIDS = "pmids.txt"


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("pmid", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("abstract", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("mesh", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("journal", stored=True, tokenizer_name="raw")
    builder.add_integer_field("year", stored=True, indexed=True, fast=True)
    builder.add_unsigned_field("row", stored=True, indexed=True, fast=True)
    return builder.build()


class EmbeddedIndex:
    """A read-mostly index: build once with `build`, then open and search."""

    name = "embedded"

    def __init__(self, path: Path, *, max_prefix_expansions: int = 64):
        self.path = Path(path)
        if not (self.path / META).exists():
            raise FileNotFoundError(f"no embedded index at {self.path}")
        self.meta = json.loads((self.path / META).read_text())
        self._index = tantivy.Index.open(str(self.path / "tantivy"))
        self._searcher = self._index.searcher()
        self._pmids = np.array((self.path / PMIDS).read_text().split("\n"), dtype=object)
        self._row_of = {pmid: row for row, pmid in enumerate(self._pmids)}
        vec_path = self.path / VECTORS
        self._vectors = np.load(vec_path, mmap_mode="r") if vec_path.exists() else None
        self._max_prefix = max_prefix_expansions

    @classmethod
    def build(
        cls,
        path: Path,
        docs: Iterable[dict[str, Any]],
        *,
        vectors: np.ndarray | None = None,
        embedding_model: str | None = None,
    ) -> EmbeddedIndex:
        """Write a fresh index at `path` atomically (a half-built index is never opened)."""
        path = Path(path)
        staging = path.with_name(path.name + ".building")
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "tantivy").mkdir(parents=True)
        try:
            cls._write(staging, docs, vectors, embedding_model)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        shutil.rmtree(path, ignore_errors=True)
        staging.replace(path)
        return cls(path)

    @staticmethod
    def _write(
        staging: Path,
        docs: Iterable[dict[str, Any]],
        vectors: np.ndarray | None,
        embedding_model: str | None,
    ) -> None:
        index = tantivy.Index(_schema(), path=str(staging / "tantivy"))
        writer = index.writer(heap_size=128_000_000, num_threads=1)
        pmids: list[str] = []
        for doc in docs:
            pmid = str(doc["pmid"])
            document = tantivy.Document(
                pmid=pmid,
                title=doc.get("title") or "",
                abstract=doc.get("abstract") or "",
                mesh=" ; ".join(doc.get("mesh") or []),
                journal=doc.get("journal") or "",
            )
            document.add_integer("year", int(doc.get("year") or 0))
            document.add_unsigned("row", len(pmids))
            writer.add_document(document)
            pmids.append(pmid)
        writer.commit()
        writer.wait_merging_threads()
        if vectors is not None:
            if len(vectors) != len(pmids):
                raise ValueError(f"{len(vectors)} vectors for {len(pmids)} documents")
            np.save(staging / VECTORS, np.asarray(vectors, dtype=np.float16))
        (staging / PMIDS).write_text("\n".join(pmids))
        meta = {
            "documents": len(pmids),
            "embedding_model": embedding_model if vectors is not None else None,
        }
        (staging / META).write_text(json.dumps(meta))

    def count(self) -> int:
        """Return how many documents the index holds."""
        return int(self._searcher.num_docs)

    def compile(self, query: str) -> tantivy.Query:
        """Compile a quorum query to tantivy (QueryError when it may not run)."""
        text = self._render(parse_query(query))
        if text is None:
            return None
        try:
            return self._index.parse_query(text, ["title", "abstract"])
        except ValueError as exc:
            raise QueryError(f"the embedded engine rejects the query: {exc}") from None

    def validate(self, query: str) -> None:
        """Raise QueryError with the reason when `query` may not run here."""
        self.compile(query)

    def search(self, query: str, limit: int) -> SearchResult:
        """Return the top `limit` BM25 hits, best first, with the total match count."""
        compiled = self.compile(query)
        if compiled is None:
            return SearchResult(total=0)
        found = self._searcher.search(compiled, limit, count=True)
        addresses = [address for _, address in found.hits]
        rows = self._searcher.fast_field_values("row", addresses) if addresses else []
        hits = [
            (str(self._pmids[row]), float(score))
            for (score, _), row in zip(found.hits, rows, strict=True)
        ]
        return SearchResult(total=int(found.count or 0), hits=hits)

    def fetch(self, pmids: Sequence[str]) -> list[dict[str, Any]]:
        """Return stored documents for these PMIDs, in order, skipping unknown ones."""
        out = []
        for pmid in pmids:
            query = (
                self._index.parse_query(f'pmid:"{pmid}"', ["pmid"])
                if pmid in self._row_of
                else None
            )
            if query is None:
                continue
            hits = self._searcher.search(query, 1).hits
            if hits:
                stored = self._searcher.doc(hits[0][1]).to_dict()
                out.append(
                    {
                        "pmid": pmid,
                        "title": _first(stored, "title"),
                        "abstract": _first(stored, "abstract"),
                        "year": _first(stored, "year", 0) or None,
                        "mesh": [m for m in _first(stored, "mesh").split(" ; ") if m],
                        "journal": _first(stored, "journal"),
                    }
                )
        return out

    def vectors(self, pmids: Sequence[str]) -> np.ndarray | None:
        """Return the precomputed unit vectors of these PMIDs as float32 rows."""
        if self._vectors is None:
            return None
        rows = [self._row_of[p] for p in pmids]
        return np.asarray(self._vectors[rows], dtype=np.float32)

    def has(self, pmid: str) -> bool:
        """Tell whether the index holds this PMID."""
        return pmid in self._row_of

    def _render(self, node: Node) -> str | None:
        """Render for tantivy's parser; None when the clause can match nothing."""
        if isinstance(node, Term) and node.prefix:
            return self._expand_prefix(node)
        if isinstance(node, Term | Phrase):
            words = node.text
            quoted = isinstance(node, Phrase) or any(ch in _SPECIAL for ch in words)
            body = '"' + words.replace('"', " ") + '"' if quoted else words
            if isinstance(node, Phrase) and node.slop:
                body += f"~{node.slop}"
            boost = f"^{node.boost:g}" if node.boost else ""
            return _over_fields(body + boost, node.fields, boost)
        must = [self._render(n) for n in node.must]
        should = [p for p in map(self._render, node.should) if p is not None]
        must_not = [p for p in map(self._render, node.must_not) if p is not None]
        if None in must or (not must and not should):
            return None
        parts = [f"+{p}" for p in must] + should + [f"-{p}" for p in must_not]
        return "(" + " ".join(parts) + ")"

    def _expand_prefix(self, term: Term) -> str | None:
        found: dict[str, int] = {}
        for field in term.fields:
            for word, freq in self._searcher.terms_with_prefix(field, term.text):
                found[word] = max(found.get(word, 0), freq)
        if not found:
            return None
        best = sorted(found, key=lambda w: -found[w])[: self._max_prefix]
        inner = " ".join(f"{field}:{w}" for w in best for field in term.fields)
        return f"({inner})"


def _over_fields(body: str, fields: tuple[str, ...], boost: str) -> str:
    if fields == ("title", "abstract"):
        return body
    if len(fields) == 1:
        return f"{fields[0]}:{body}"
    return "(" + " ".join(f"{f}:{body}" for f in fields) + ")"


def _first(stored: dict[str, list[Any]], field: str, default: Any = "") -> Any:
    values = stored.get(field) or [default]
    return values[0]
