"""How fallback_search: what PubMed was asked, and the documents it added."""

from __future__ import annotations

from typing import Any

from nodes.describing import NodeDescription, Outcome, describes, plural
from nodes.trace_view import Block, Table


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
