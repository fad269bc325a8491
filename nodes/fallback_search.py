"""fallback_search: evidence is insufficient, so search PubMed itself (E-utilities)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from infra.pubmed import FallbackUnavailable
from infra.search.keywords import keyword_query, without_stopwords
from infra.search.query import QueryError, parse_query, to_pubmed
from nodes.context import Context
from nodes.describing import NodeDescription, Outcome, describes, plural
from nodes.passages import bounded
from nodes.state import QAState
from nodes.trace_view import Block, Table


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


def _fallback_done(update: dict[str, Any]) -> str:
    rounds = update.get("fallbacks") or []
    if rounds and all(str(f.get("status", "")).startswith("fallback off") for f in rounds):
        return "PubMed not asked: no contact e-mail set (fallback.email)"
    if rounds and all(str(f.get("status", "")).startswith("fallback ") for f in rounds):
        why = str(rounds[-1]["status"]).split(": ", 1)[-1]
        return f"PubMed unavailable ({why[:100]}): answering from the evidence found"
    added = sum(f.get("added", 0) for f in rounds)
    return f"searched PubMed: {plural(added, 'document')} added"


def _fallback_outcome(update: dict[str, Any]) -> Outcome:
    rounds = update.get("fallbacks") or []
    if rounds and all(str(f.get("status", "")).startswith("fallback ") for f in rounds):
        return "skipped"  # unavailable or not configured: nothing was searched
    return "done"


def fallback_trace(update: dict[str, Any]) -> list[Block]:
    """Return each fallback round: where it asked, what, and what came of it."""
    rows = tuple(
        (f.get("source", ""), f.get("query", ""), str(f.get("added", 0)), f.get("status", ""))
        for f in update.get("fallbacks") or []
    )
    return [Table("fallback rounds", ("source", "query", "added", "status"), rows, frozenset({2}))]


describes(
    "fallback_search",
    NodeDescription(
        "searching PubMed",
        done=_fallback_done,
        outcome=_fallback_outcome,
        trace=fallback_trace,
        covers=frozenset({"fallbacks"}),
    ),
)
