"""search: BM25 over title+abstract, up to search.max_candidates hits."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from langgraph.runtime import Runtime

from infra.search.query import QueryError
from nodes.context import Context
from nodes.describing import NodeDescription, describes, plural
from nodes.state import QAState
from nodes.trace_view import Block, Facts, Table


async def search(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Run the current query and keep the candidates as (PMID, BM25 score)."""
    ctx = runtime.context
    query = state["query"]
    started = time.perf_counter()
    try:
        result = await asyncio.to_thread(
            ctx.search.search, query, ctx.settings.search.max_candidates
        )
    except QueryError as exc:
        # Queries are validated before they get here; a backend that still refuses one is
        # recorded and treated as no hits, which sends the graph to refine_query.
        return {
            "hits": 0,
            "candidates": [],
            "searches": [{"query": query, "hits": 0, "error": str(exc)}],
        }
    ms = (time.perf_counter() - started) * 1000
    return {
        "hits": result.total,
        "candidates": result.hits,
        "searches": [
            {
                "query": query,
                "hits": result.total,
                "returned": len(result.hits),
                "ms": round(ms, 1),
                "backend": ctx.search.name,
            }
        ],
    }


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
