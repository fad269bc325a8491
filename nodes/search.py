"""search: BM25 over title+abstract, up to search.max_candidates hits."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from langgraph.runtime import Runtime

from infra.search.query import QueryError
from nodes.context import Context
from nodes.state import QAState


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
