"""The embedded engine: tantivy BM25 on disk plus memory-mapped int8 vectors (no server)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from infra.records import Document
from infra.search.analysis import analyzer
from infra.search.base import SearchResult
from infra.search.embedded_layout import (
    PmidLookup,
    RecentRows,
    decode,
    mapped,
    pmids_file,
)
from infra.search.embedded_open import open_layout
from infra.search.embedded_schema import has_combined
from infra.search.embedded_shards import PENDING_DELETES, ShardSearch, every_hit
from infra.search.embedded_store import build_fresh
from infra.search.embedded_vectors import EmbeddedVectors
from infra.search.query import (
    TEXT_FIELDS,
    Bool,
    Node,
    Phrase,
    QueryError,
    Term,
    parse_query,
    searched_fields,
)
from infra.settings import SearchSettings

_SPECIAL = set("+-&|!(){}[]^\"~*?:\\/<>=' ")
_KEYWORDS = frozenset({"IN", "TO", "AND", "OR", "NOT"})
"""Words tantivy's parser reads as syntax when upper-case ("cells IN leaves" was a syntax
error): a term holding one is quoted, which searches it as the word it is."""
_OCCUR = tantivy.Occur
_SCORE, _ADDRESS = itemgetter(0), itemgetter(1)


SEARCH = SearchSettings()
"""The search group's defaults: what an index opened without settings gets, stated there."""


class EmbeddedIndex(EmbeddedVectors):
    """Search side of an embedded index; write with `EmbeddedWriter` or `EmbeddedIndex.build`."""

    name = "embedded"

    def __init__(self, path: Path, *, max_prefix_expansions: int = SEARCH.max_prefix_expansions):
        self.path = Path(path)
        indexes, self.meta, rows = open_layout(self.path)
        self._index = indexes[0]
        self._schema = self._index.schema
        self.combined = has_combined(self._schema)
        """Unqualified words score one title + abstract field (False: an index built before it)."""
        self._searchers = [index.searcher() for index in indexes]
        self._searcher = self._searchers[0]
        self._shards = ShardSearch(self._searchers) if len(indexes) > 1 else None
        # A sharded commit's deletes were left pending by a crash: the writer that next opens
        # the index finishes them; until then, hits of rows their PMIDs have left are skipped.
        self._superseded_visible = (self.path / PENDING_DELETES).exists()
        width = int(self.meta["pmid_width"])
        self._pmids = mapped(self.path / pmids_file(width), f"S{width}", (rows,))
        self._lookup = PmidLookup(self.path, self.meta, self._pmids)
        self._open_vectors(rows)
        self._max_prefix = max_prefix_expansions
        self._analyzer = analyzer()
        self._recent: RecentRows | None = None  # the latest search's hits, asked about next

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
        return sum(int(s.num_docs) for s in self._searchers)

    @property
    def shards(self) -> int:
        """Return how many tantivy shards a search runs on at once (`embedded_shards`)."""
        return len(self._searchers)

    def segments(self) -> int:
        """Return how many tantivy segments a search walks (each collects its own top hits)."""
        return sum(int(s.num_segments) for s in self._searchers)

    def doc_freq(self, term: str) -> int:
        """Return how many documents hold this index term where unqualified words are searched.

        Title and abstract count once each for an index without the combined field: a sum of
        postings, which is what a search of the term walks, not a count of documents.
        """
        return sum(
            int(searcher.doc_freq(field, term))
            for field in searched_fields(TEXT_FIELDS, self.combined)
            for searcher in self._searchers
        )

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
        if self._shards is not None:
            return self._search_shards(compiled, limit)
        # tantivy panics on a limit of 0 ("Limit must be greater than 0"): count with one hit.
        found = self._searcher.search(compiled, max(1, limit), count=True)
        hits = found.hits[: max(0, limit)]
        if not hits:
            return SearchResult(total=int(found.count or 0))
        n = len(hits)
        scores = np.fromiter(map(_SCORE, hits), np.float32, n)
        addresses = list(map(_ADDRESS, hits))
        rows = np.fromiter(self._searcher.fast_field_values("row", addresses), np.int64, n)
        # Equal scores in row order: tantivy breaks ties by segment, and segments depend on how
        # its writer and merges happened to run, so the same corpus would rank ties differently
        # from one build to the next. Its hits come best first: only runs of ties move, sorted
        # by (run, row) in one int64 key (rows < 2**32).
        tied = scores[1:] == scores[:-1]
        if (scores[1:] > scores[:-1]).any():  # never seen; if tantivy's order ever breaks
            order = np.lexsort((rows, -scores))
            rows, scores = rows[order], scores[order]
        elif tied.any():
            run = np.zeros(n, np.int64)
            np.cumsum(~tied, out=run[1:])
            order = np.argsort((run << 32) | rows, kind="stable")
            rows, scores = rows[order], scores[order]
        pmids = decode(self._pmids[rows])
        self._recent = RecentRows(pmids, rows)
        return SearchResult(total=int(found.count or 0), pmids=pmids, scores=scores)

    def _search_shards(self, compiled: tantivy.Query, limit: int) -> SearchResult:
        """Search every shard at once (`embedded_shards`); hits best first, ties by row."""
        total, scores, rows = self._shards.search(compiled, limit)  # type: ignore[union-attr]
        keep = rows < len(self._pmids)  # rows of a batch still landing in another shard
        scores, rows = scores[keep], rows[keep]
        pmids = decode(self._pmids[rows])
        if self._superseded_visible and pmids:
            latest = self._lookup.rows_of(pmids) == rows
            pmids = [p for p, ok in zip(pmids, latest, strict=True) if ok]
            scores, rows = scores[latest], rows[latest]
        self._recent = RecentRows(pmids, rows)
        return SearchResult(total=total, pmids=pmids, scores=scores)

    def fetch(self, pmids: Sequence[str]) -> list[Document]:
        """Return stored documents for these PMIDs, in order, skipping unknown ones."""
        wanted = [str(p) for p in pmids]
        if not wanted:
            return []
        query = tantivy.Query.term_set_query(self._schema, "pmid", wanted)
        latest: dict[str, tuple[int, dict[str, Any]]] = {}  # shards: a crash may leave two
        for searcher in self._searchers:
            for address in every_hit(searcher, query, len(wanted)):
                stored = searcher.doc(address).to_dict()
                row = int(_first(stored, "row", 0))
                if row >= len(self._pmids):  # a batch still landing in another shard
                    continue
                doc = {
                    "pmid": _first(stored, "pmid"),
                    "title": _first(stored, "title"),
                    "abstract": _first(stored, "abstract"),
                    "year": _first(stored, "year", 0) or None,
                    "mesh": [m for m in _first(stored, "mesh").split(" ; ") if m],
                    "journal": _first(stored, "journal"),
                }
                if doc["pmid"] not in latest or row > latest[doc["pmid"]][0]:
                    latest[doc["pmid"]] = (row, doc)
        return [latest[p][1] for p in wanted if p in latest]

    def _live(self, pmids: Sequence[str]) -> set[int]:
        """Return the rows holding these PMIDs' current, undeleted documents."""
        if not pmids:
            return set()
        query = tantivy.Query.term_set_query(self._schema, "pmid", list(pmids))
        live: set[int] = set()
        for searcher in self._searchers:
            addresses = every_hit(searcher, query, len(pmids))
            if addresses:
                live.update(int(r) for r in searcher.fast_field_values("row", addresses))
        if self._superseded_visible:  # a crash left old copies: only each PMID's latest row
            live &= {int(r) for r in self._lookup.rows_of(list(pmids))}
        return live

    def _pmid_list(self, rows: Sequence[int]) -> list[str]:
        return decode(self._pmids[np.asarray(rows, dtype=np.int64)]) if len(rows) else []

    def _rows_of(self, pmids: Sequence[str]) -> np.ndarray:
        """Return each PMID's row (-1: not indexed), those of the latest search's hits first."""
        recent = self._recent
        if recent is None:
            return self._lookup.rows_of(pmids)
        return recent.rows_of(pmids, self._lookup)

    def has(self, pmid: str) -> bool:
        """Tell whether the index holds this PMID."""
        query = tantivy.Query.term_query(self._schema, "pmid", str(pmid))
        return any(s.search(query, 1).count > 0 for s in self._searchers)

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
            quoted = (
                isinstance(node, Phrase)
                or any(ch in _SPECIAL for ch in words)
                or bool(_KEYWORDS & set(words.split()))
            )
            text = f'"{words}"' if quoted else words
            if isinstance(node, Phrase) and node.slop:
                text += f"~{node.slop}"
            query = self._index.parse_query(text, list(self._fields(node)))
        if query is not None and node.boost:
            query = tantivy.Query.boost_query(query, float(node.boost))
        return query

    def _fields(self, node: Term | Phrase) -> tuple[str, ...]:
        return searched_fields(node.fields, self.combined)

    def _prefix(self, term: Term) -> tantivy.Query | None:
        found: dict[tuple[str, str], int] = {}
        for field in self._fields(term):
            for searcher in self._searchers:
                for word, freq in searcher.terms_with_prefix(field, term.text):
                    found[(field, word)] = found.get((field, word), 0) + freq
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
                    for f in self._fields(term)
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


def _first(stored: dict[str, list[Any]], field: str, default: Any = "") -> Any:
    values = stored.get(field) or [default]
    return values[0]
