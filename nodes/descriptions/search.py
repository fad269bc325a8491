"""How search: the query run against the index, its hits and best candidates."""

from __future__ import annotations

from typing import Any

from nodes.describing import NodeDescription, describes, plural
from nodes.trace_view import Block, Facts, Table

SHOWN = 10
"""How many of the best candidates a trace lists (the JSON trace keeps them all)."""


def search_trace(update: dict[str, Any]) -> list[Block]:
    """Return each search's query and hits, and the best candidates with their BM25 scores."""
    blocks: list[Block] = []
    for done in update.get("searches") or []:
        how = f"error: {done['error']}" if done.get("error") else f"{plural(done['hits'], 'hit')}"
        took = f" in {done['ms']:g} ms on {done['backend']}" if "ms" in done else ""
        blocks.append(Facts(f"{done['query']} → {how}{took}"))
    candidates = update.get("candidates") or []
    if candidates:
        rows = tuple(
            (str(i), pmid, f"{score:.3f}") for i, (pmid, score) in enumerate(candidates[:SHOWN], 1)
        )
        title = f"best {len(rows)} of {plural(len(candidates), 'candidate')} by BM25"
        blocks.append(Table(title, ("rank", "PMID", "BM25"), rows, frozenset({0, 2})))
    return blocks


describes(
    "search",
    NodeDescription(
        "searching",
        done=lambda update: f"searched: {plural(update.get('hits', 0), 'hit')}",
        summary=lambda update: [f"{update['hits']:,} hits"] if "hits" in update else [],
        trace=search_trace,
        covers=frozenset({"hits", "candidates", "searches"}),
    ),
)
