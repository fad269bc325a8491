"""fallback_search: evidence is insufficient, so search PubMed itself (E-utilities)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from infra.pubmed import FallbackUnavailable
from infra.search.keywords import keyword_query, without_stopwords
from infra.search.query import QueryError, parse_query, to_pubmed
from nodes.context import Context
from nodes.passages import bounded
from nodes.state import QAState


async def fallback_search(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Fetch PubMed articles into the pool; when NCBI is unreachable, go on without them."""
    ctx = runtime.context
    try:
        kept = without_stopwords(parse_query(state.get("query") or ""))
    except QueryError:
        kept = None
    try:
        term = to_pubmed(kept or parse_query(keyword_query(state["question"])))
    except QueryError:
        term = keyword_query(state["question"])
    record: dict[str, Any] = {"source": "pubmed-eutils", "query": term, "added": 0}
    if ctx.pubmed is None:
        fallback = ctx.settings.fallback
        why = (
            "fallback off: no contact e-mail (set fallback.email, which NCBI asks of every "
            "E-utilities client; QUORUM_FALLBACK__EMAIL)"
            if fallback.enabled and not fallback.email
            else "fallback unavailable: no PubMed client configured"
        )
        return {"fallbacks": [record | {"status": why}]}
    try:
        docs = await ctx.pubmed.search(term, retmax=ctx.settings.fallback.retmax)
    except FallbackUnavailable as exc:
        return {
            "fallbacks": [record | {"status": f"fallback unavailable: {exc}"}],
            "notes": [
                "fallback_search: PubMed unavailable; answering from the evidence already found"
            ],
        }
    except ValueError as exc:
        return {"fallbacks": [record | {"status": f"fallback failed: {exc}"}]}
    known = set(state.get("pool") or {})
    new = {
        d["pmid"]: bounded(d)
        for d in docs
        if d.get("abstract") and d["pmid"] not in known and not _indexed(ctx, d["pmid"])
    }
    return {
        "pool": new,
        "fallbacks": [record | {"status": "ok", "added": len(new), "returned": len(docs)}],
    }


def _indexed(ctx: Context, pmid: str) -> bool:
    has = getattr(ctx.search, "has", None)
    return bool(has and has(pmid))
