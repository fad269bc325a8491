"""refine_query: too few hits, so a (stronger) model relaxes the query."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from infra.search.keywords import relaxations
from infra.search.query import QueryError, parse_query, to_text
from nodes.context import Context
from nodes.generate_query import BooleanQuery
from nodes.state import QAState, Query
from prompts import render


async def refine_query(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Ask the refine model for a broader query; without a new valid one, relax the keywords."""
    ctx = runtime.context
    question, query = state["question"], state["query"]
    tried = {_canonical(q["query"]) for q in state.get("queries", []) if q.get("query")}
    if ctx.settings.search.query_mode == "question":
        # No model: straight to the deterministic ladder.
        fresh = [q for q in relaxations(question, query) if _canonical(q) not in tried]
        proposal = fresh[0] if fresh else query
        return {
            "query": proposal,
            "queries": [{"query": proposal, "source": "keywords", "error": None}],
            "refinements": state.get("refinements", 0) + 1,
            "notes": [f"refine_query: relaxed without a model to: {proposal}"],
        }
    messages = render(
        "refine_query",
        question=question,
        query=query,
        hits=state.get("hits", 0),
        min_hits=state["limits"]["min_hits"],
    )
    reply = await ctx.models.first("refine").structured(BooleanQuery, messages)
    proposal = reply.value.query if reply.value else None
    error = reply.error
    if proposal and not error:
        try:
            ctx.search.validate(proposal)
        except QueryError as exc:
            error = str(exc)
    if proposal and not error and _canonical(proposal) in tried:
        error = "the same query was already tried"
    proposals: list[Query] = [{"query": proposal, "source": "refine", "error": error}]
    notes = []
    if error:
        # Deterministic relaxation ladder: AND→OR, the question's keywords, prefixes, fuzzy.
        fresh = [q for q in relaxations(question, query) if _canonical(q) not in tried]
        proposal = fresh[0] if fresh else query
        proposals.append({"query": proposal, "source": "keywords", "error": None})
        notes.append(f"refine_query: model proposal unusable ({error}); relaxed to: {proposal}")
    return {
        "query": proposal,
        "queries": proposals,
        "calls": [reply.record("refine_query")],
        "refinements": state.get("refinements", 0) + 1,
        "notes": notes,
    }


def _canonical(query: str) -> str:
    try:
        return to_text(parse_query(query)).lower()
    except QueryError:
        return query.strip().lower()
