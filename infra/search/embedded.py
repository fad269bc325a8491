"""The embedded engine: tantivy BM25 on disk plus memory-mapped float16 vectors (no server)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from infra.search.analysis import analyzer
from infra.search.base import SearchResult
from infra.search.embedded_store import (
    PMIDS,
    TANTIVY,
    VECTORS,
    build_fresh,
    committed_rows,
    read_meta,
)
from infra.search.query import Bool, Node, Phrase, QueryError, Term, parse_query

_SPECIAL = set("+-&|!(){}[]^\"~*?:\\/<>=' ")
NEAREST_BLOCK = 65_536
"""Rows scored at once by `nearest` (25 MB of float32 at 384 dimensions)."""
_OCCUR = tantivy.Occur


class EmbeddedIndex:
    """Search side of an embedded index; write with `EmbeddedWriter` or `EmbeddedIndex.build`."""

    name = "embedded"

    def __init__(self, path: Path, *, max_prefix_expansions: int = 64):
        self.path = Path(path)
        self.meta = read_meta(self.path)
        self._index = tantivy.Index.open(str(self.path / TANTIVY))
        self._schema = self._index.schema
        self._searcher = self._index.searcher()
        rows = committed_rows(self._index, self.meta)
        with open(self.path / PMIDS, encoding="utf-8") as fh:
            pmids = fh.read().split("\n")[:rows]
        self._pmids = np.array(pmids, dtype=object)
        self._row_of = {
            pmid: row for row, pmid in enumerate(pmids)
        }  # a re-indexed PMID: last row wins
        dims = self.meta.get("dims")
        self._vectors = (
            np.memmap(self.path / VECTORS, dtype=np.float16, mode="r", shape=(rows, dims))
            if dims and rows
            else None
        )
        self._max_prefix = max_prefix_expansions
        self._analyzer = analyzer()

    @classmethod
    def build(
        cls,
        path: Path,
        docs: Iterable[dict[str, Any]],
        *,
        vectors: np.ndarray | None = None,
        embedding_model: str | None = None,
    ) -> EmbeddedIndex:
        """Write a fresh index at `path` atomically and open it."""
        build_fresh(path, list(docs), vectors, embedding_model)
        return cls(path)

    def count(self) -> int:
        """Return how many documents the index holds."""
        return int(self._searcher.num_docs)

    def compile(self, query: str) -> tantivy.Query | None:
        """Compile a quorum query for tantivy; None when it can match nothing."""
        node = parse_query(query)
        try:
            return self._compile(node)
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
        pmids = self._pmids[np.asarray(rows, dtype=np.int64)] if rows else []
        hits = [(str(p), float(score)) for p, (score, _) in zip(pmids, found.hits, strict=True)]
        return SearchResult(total=int(found.count or 0), hits=hits)

    def fetch(self, pmids: Sequence[str]) -> list[dict[str, Any]]:
        """Return stored documents for these PMIDs, in order, skipping unknown ones."""
        wanted = [str(p) for p in pmids]
        if not wanted:
            return []
        query = tantivy.Query.term_set_query(self._schema, "pmid", wanted)
        found = {}
        for _, address in self._searcher.search(query, len(wanted)).hits:
            stored = self._searcher.doc(address).to_dict()
            doc = {
                "pmid": _first(stored, "pmid"),
                "title": _first(stored, "title"),
                "abstract": _first(stored, "abstract"),
                "year": _first(stored, "year", 0) or None,
                "mesh": [m for m in _first(stored, "mesh").split(" ; ") if m],
                "journal": _first(stored, "journal"),
            }
            found[doc["pmid"]] = doc
        return [found[p] for p in wanted if p in found]

    def similarities(self, pmids: Sequence[str], vector: np.ndarray) -> np.ndarray | None:
        """Return cosine(vector, stored vector) per PMID (unit vectors: a dot product)."""
        if self._vectors is None:
            return None
        rows = np.array([self._row_of.get(p, -1) for p in pmids], dtype=np.int64)
        known = rows >= 0
        out = np.zeros(len(rows), dtype=np.float32)
        if known.any():
            out[known] = np.asarray(self._vectors[rows[known]], dtype=np.float32) @ vector.astype(
                np.float32
            )
        return out

    def nearest(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Return the `k` documents whose stored vectors are closest to `vector`, best first.

        Exact: every row of the memory-mapped matrix is scored, a block at a time (so a large
        index never sits in memory as float32). Rows of re-indexed or deleted PMIDs are skipped.
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
            best = _top_rows(self._vectors, query, min(rows, want + 16))
            live = self._live([int(r) for r, _ in best])
            hits = [(str(self._pmids[r]), s) for r, s in best if r in live][:k]
            if len(hits) >= k or len(best) >= rows:
                return hits
            want *= 4

    def _live(self, rows: Sequence[int]) -> set[int]:
        """Return the rows that hold their PMID's current, undeleted document."""
        current = [r for r in rows if self._row_of.get(self._pmids[r]) == r]
        if not current:
            return set()
        wanted = [str(self._pmids[r]) for r in current]
        query = tantivy.Query.term_set_query(self._schema, "pmid", wanted)
        found = self._searcher.search(query, len(wanted))
        addresses = [address for _, address in found.hits]
        landed = self._searcher.fast_field_values("row", addresses) if addresses else []
        return {int(r) for r in landed}

    def vectors(self, pmids: Sequence[str]) -> np.ndarray | None:
        """Return the stored vectors of these PMIDs as float32 rows (tests and evaluation)."""
        if self._vectors is None:
            return None
        return np.asarray(self._vectors[[self._row_of[p] for p in pmids]], dtype=np.float32)

    def has(self, pmid: str) -> bool:
        """Tell whether the index holds this PMID."""
        query = tantivy.Query.term_query(self._schema, "pmid", str(pmid))
        return self._searcher.search(query, 1).count > 0

    def _compile(self, node: Node) -> tantivy.Query | None:
        if isinstance(node, Bool):
            must = [self._compile(n) for n in node.must]
            should = [q for q in map(self._compile, node.should) if q is not None]
            must_not = [q for q in map(self._compile, node.must_not) if q is not None]
            if None in must or (not must and not should):
                return None
            clauses = [(_OCCUR.Must, q) for q in must] + [(_OCCUR.Should, q) for q in should]
            clauses += [(_OCCUR.MustNot, q) for q in must_not]
            return tantivy.Query.boolean_query(clauses)
        if isinstance(node, Term) and node.prefix:
            query = self._prefix(node)
        elif isinstance(node, Term) and node.fuzzy:
            query = self._fuzzy(node)
        else:
            words = node.text.replace('"', " ").strip()
            quoted = isinstance(node, Phrase) or any(ch in _SPECIAL for ch in words)
            text = f'"{words}"' if quoted else words
            if isinstance(node, Phrase) and node.slop:
                text += f"~{node.slop}"
            query = self._index.parse_query(text, list(node.fields))
        if query is not None and node.boost:
            query = tantivy.Query.boost_query(query, float(node.boost))
        return query

    def _prefix(self, term: Term) -> tantivy.Query | None:
        found: dict[tuple[str, str], int] = {}
        for field in term.fields:
            for word, freq in self._searcher.terms_with_prefix(field, term.text):
                found[(field, word)] = freq
        best = sorted(found, key=lambda key: -found[key])[: self._max_prefix]
        if not best:
            return None
        return _any([tantivy.Query.term_query(self._schema, f, w) for f, w in best])

    def _fuzzy(self, term: Term) -> tantivy.Query | None:
        tokens = self._analyzer.analyze(term.text)
        if not tokens:
            return None
        per_token = [
            _any(
                [
                    tantivy.Query.fuzzy_term_query(self._schema, f, tok, term.fuzzy)
                    for f in term.fields
                ]
            )
            for tok in tokens
        ]
        return (
            per_token[0]
            if len(per_token) == 1
            else tantivy.Query.boolean_query([(_OCCUR.Must, q) for q in per_token])
        )


def _any(queries: list[tantivy.Query]) -> tantivy.Query:
    return (
        queries[0]
        if len(queries) == 1
        else tantivy.Query.boolean_query([(_OCCUR.Should, q) for q in queries])
    )


def _top_rows(matrix: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Return the `k` rows of `matrix` with the highest dot product with `query`, best first."""
    best_rows, best_scores = [], []
    for start in range(0, matrix.shape[0], NEAREST_BLOCK):
        scores = np.asarray(matrix[start : start + NEAREST_BLOCK], dtype=np.float32) @ query
        keep = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        best_rows.append(keep + start)
        best_scores.append(scores[keep])
    rows, scores = np.concatenate(best_rows), np.concatenate(best_scores)
    order = np.lexsort((rows, -scores))[:k]  # ties: the earlier row first, so runs repeat
    return [(int(rows[i]), float(scores[i])) for i in order]


def _first(stored: dict[str, list[Any]], field: str, default: Any = "") -> Any:
    values = stored.get(field) or [default]
    return values[0]
