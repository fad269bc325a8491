"""An embedded index split into tantivy shards, searched one thread a shard.

tantivy-py searches an index's segments one after another in the calling thread (it exposes no
multi-threaded executor) but releases the GIL while it does, so an index written as several
tantivy indexes answers a query in parallel: at 26 M documents on 2 cores, BM25 top-1000 p50
27.9 ms in one index, 19.1 ms in two shards (docs/measured.md, "Shards in the engine").
The document at row r lives in shard r mod shards: shard 0 is `tantivy/`, shard i `tantivy-i/`.
Each shard scores with its own statistics, as Elasticsearch's shards do by default (at 13 M
documents a shard, 0.999 of the merged top 1,000 score in the single index at least as high as
its 1,000th).

One tantivy commit is atomic; several are not. A sharded writer therefore commits a batch in
two phases, each recoverable when the writer next opens the index:

  1. adds: every shard gets its new documents and nothing is deleted. A crash between the
     shards' commits is rolled back (the batch's rows deleted from the shards that have them):
     nothing older was touched.
  2. deletes: the documents that a re-indexed or deleted PMID leaves behind — its rows below the
     batch, and rows of the batch it superseded. They are written to `deletes.pending.json`
     before phase 1 and removed after phase 2, so a crash in between is finished on reopening.
     A batch of new PMIDs, with nothing superseded or deleted, has no phase 2 (docs/measured.md).

Readers never write: they skip rows of a batch still landing, and while a pending file exists,
hits that are not their PMID's latest row.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from infra.search.embedded_layout import TANTIVY

PENDING_DELETES = "deletes.pending.json"
"""The deletes of a sharded commit in flight: the batch's PMIDs, its first row, stale rows."""
_SCORE, _ADDRESS = itemgetter(0), itemgetter(1)


def shard_count(meta: dict[str, Any]) -> int:
    """Return how many tantivy shards an index has (1 for every index written before shards)."""
    return int(meta.get("shards", 1))


def shard_dirs(path: Path, shards: int) -> list[Path]:
    """Return the shards' tantivy directories, shard 0 first."""
    return [path / TANTIVY] + [path / f"{TANTIVY}-{i}" for i in range(1, shards)]


def rows_landed(indexes: Sequence[tantivy.Index], rows: int, pending: int) -> list[bool | None]:
    """Per shard: whether its rows in [rows, pending) are there (None: it should hold none)."""
    shards = len(indexes)
    out: list[bool | None] = []
    for i, index in enumerate(indexes):
        first = rows + (i - rows) % shards
        if first >= pending:
            out.append(None)
            continue
        query = row_range(index.schema, rows, pending - 1)
        out.append(index.searcher().search(query, 1).count > 0)
    return out


def row_range(schema: tantivy.Schema, first: int, last: int) -> tantivy.Query:
    """Return a query for the documents at rows first..last (inclusive)."""
    return tantivy.Query.range_query(schema, "row", tantivy.FieldType.Unsigned, first, last)


def write_pending(
    path: Path, pmids: Sequence[str], first_row: int, stale_rows: Sequence[int], through: int
) -> dict[str, Any]:
    """Record a commit's deletes durably before its first shard commits; return them.

    `first_row`: the batch's first row; `through`: the rows once it has landed.
    """
    pending = {
        "pmids": list(pmids),
        "first_row": first_row,
        "stale_rows": [int(r) for r in stale_rows],
        "through": through,
    }
    tmp = path / (PENDING_DELETES + ".tmp")
    tmp.write_text(json.dumps(pending))
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    tmp.replace(path / PENDING_DELETES)
    return pending


def read_pending(path: Path) -> dict[str, Any] | None:
    """Return the deletes a sharded commit left pending, or None."""
    try:
        return json.loads((path / PENDING_DELETES).read_text())
    except FileNotFoundError:
        return None


def apply_deletes(schema: tantivy.Schema, writers: Sequence[Any], pending: dict[str, Any]) -> None:
    """Phase 2: delete what the batch's PMIDs left behind in every shard, and commit each.

    Below the batch's first row, every document of one of its PMIDs is stale (a re-indexed or
    deleted PMID); inside the batch, the rows recorded as superseded are. Idempotent.
    """
    older = older_copies(schema, pending["pmids"], int(pending["first_row"]))
    for writer in writers:
        if older is not None:
            writer.delete_documents_by_query(older)
        for row in pending["stale_rows"]:
            writer.delete_documents_by_query(row_range(schema, int(row), int(row)))
        writer.commit()


def older_copies(schema: tantivy.Schema, pmids: Sequence[str], first: int) -> tantivy.Query | None:
    """Return a query for the documents of `pmids` below row `first` (None: there are none)."""
    if not pmids or first <= 0:
        return None
    return tantivy.Query.boolean_query(
        [
            (tantivy.Occur.Must, tantivy.Query.term_set_query(schema, "pmid", list(pmids))),
            (tantivy.Occur.Must, row_range(schema, 0, first - 1)),
        ]
    )


def any_older(indexes: Sequence[tantivy.Index], pmids: Sequence[str], first: int) -> bool:
    """Tell whether a shard holds a document of one of `pmids` below row `first`.

    The shards' searchers must see every row below `first` (the writer reloads after a commit).
    """
    query = older_copies(indexes[0].schema, pmids, first)
    return query is not None and any(index.searcher().search(query, 1).hits for index in indexes)


def every_hit(searcher: tantivy.Searcher, query: tantivy.Query, expected: int) -> list[Any]:
    """Return the addresses of every document `query` matches (`expected`: the usual count).

    A PMID has one document, but a sharded commit a crash interrupted leaves its old copies
    beside the new until a writer finishes it, so a PMID lookup may not stop at one a PMID.
    """
    found = searcher.search(query, max(1, expected), count=True)
    if (found.count or 0) > len(found.hits):
        found = searcher.search(query, int(found.count))
    return [address for _, address in found.hits]


class ShardSearch:
    """One query on every shard at once; hits merged best first, ties by row.

    Each shard is asked for its share of the top `limit` (a quarter more than an even split,
    documents being spread by row) rather than all of it: at 10,000 candidates, taking 10,000
    hits out of each of two shards made the default path 7 ms slower than one index (26 M).
    A shard that filled its share with hits scoring at least the merged list's last could hold
    more of it, and is asked again for all `limit`: the result is what asking every shard for
    `limit` would give.
    """

    MARGIN = 1.25

    def __init__(self, searchers: Sequence[tantivy.Searcher]):
        self.searchers = list(searchers)
        self._pool = ThreadPoolExecutor(len(self.searchers), thread_name_prefix="shard")

    def search(self, query: tantivy.Query, limit: int) -> tuple[int, np.ndarray, np.ndarray]:
        """Return (total matches, scores, rows) of the best `limit` hits over every shard."""
        wanted, limit = max(0, limit), max(1, limit)  # tantivy refuses a limit of 0
        share = min(limit, math.ceil(limit / len(self.searchers) * self.MARGIN) + 16)
        parts = list(self._pool.map(lambda s: _hits(s, query, share), self.searchers))
        scores, rows = _merge(parts, limit)
        last = scores[-1] if len(scores) == limit else -np.inf
        again = [
            i
            for i, (_, got, _) in enumerate(parts)
            if share < limit and len(got) == share and got[-1] >= last
        ]
        if again:
            more = self._pool.map(lambda i: _hits(self.searchers[i], query, limit), again)
            for i, part in zip(again, more, strict=True):
                parts[i] = part
            scores, rows = _merge(parts, limit)
        return sum(p[0] for p in parts), scores[:wanted], rows[:wanted]


def _hits(
    searcher: tantivy.Searcher, query: tantivy.Query, limit: int
) -> tuple[int, np.ndarray, np.ndarray]:
    """Return (matches, scores, rows) of one shard's best `limit` hits, best first."""
    found = searcher.search(query, limit, count=True)
    hits = found.hits
    scores = np.fromiter(map(_SCORE, hits), np.float32, len(hits))
    addresses = list(map(_ADDRESS, hits))
    values = searcher.fast_field_values("row", addresses) if addresses else []
    return int(found.count or 0), scores, np.fromiter(values, np.int64, len(hits))


def _merge(
    parts: list[tuple[int, np.ndarray, np.ndarray]], limit: int
) -> tuple[np.ndarray, np.ndarray]:
    scores = np.concatenate([p[1] for p in parts])
    rows = np.concatenate([p[2] for p in parts])
    order = best_first(scores, rows)[:limit]
    return scores[order], rows[order]


def best_first(scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Return the order of hits by score, highest first, equal scores by row.

    As `np.lexsort((rows, -scores))` orders them, in one sort of one 64-bit key (float32
    scores, rows below 2**32): the score's bits turned to sort as the float does, inverted,
    above the row. For two shards' 12,532 hits 0.31 ms against lexsort's 1.91, on the default
    path of every sharded search.
    """
    bits = (np.asarray(scores, np.float32) + np.float32(0)).view(np.uint32)  # -0.0 as 0.0
    ascending = np.where(bits >> 31 == 1, ~bits, bits | np.uint32(0x80000000))
    key = (~ascending).astype(np.uint64) << np.uint64(32) | np.asarray(rows).astype(np.uint64)
    return np.argsort(key)
