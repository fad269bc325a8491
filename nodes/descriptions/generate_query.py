"""How generate_query: every query proposed, why one was refused, the one searched."""

from __future__ import annotations

from typing import Any

from nodes.describing import NodeDescription, Outcome, describes
from nodes.records import Query
from nodes.trace_view import Block, Facts, Table


def _query_done(update: dict[str, Any]) -> str:
    proposals = update.get("queries") or []
    if proposals and proposals[-1].get("source") == "keywords" and len(proposals) > 1:
        why = proposals[-2].get("error") or "refused"
        return f"the model's query failed ({str(why)[:80]}); searching the question's keywords"
    return "query written"


def _query_summary(update: dict[str, Any]) -> list[str]:
    parts = [f"query: {update['query']}"] if update.get("query") else []
    if update.get("asked") and update.get("question"):
        parts.append(f"read as: {update['question']}")
    return parts


def _query_outcome(update: dict[str, Any]) -> Outcome:
    proposals = update.get("queries") or []
    failed = proposals and proposals[-1].get("source") == "keywords" and len(proposals) > 1
    return "failed" if failed else "done"


def query_trace(update: dict[str, Any]) -> list[Block]:
    """Return every query proposed, where it came from and why it was refused, then the one used."""

    def verdict(proposed: Query) -> str:
        if proposed.get("error"):
            return f"refused: {proposed['error']}"
        return "used" if proposed.get("query") == update.get("query") else ""

    rows = tuple(
        (str(i), q.get("source", ""), q.get("query", ""), verdict(q))
        for i, q in enumerate(update.get("queries") or [], 1)
    )
    blocks: list[Block] = []
    if rows:
        header = ("#", "source", "query", "verdict")
        blocks.append(Table("queries proposed", header, rows, frozenset({0})))
    if "query" in update:
        blocks.append(Facts(f"searching: {update['query']}"))
    return blocks


describes(
    "generate_query",
    NodeDescription(
        "writing the search query",
        done=_query_done,
        summary=_query_summary,
        outcome=_query_outcome,
        trace=query_trace,
        covers=frozenset({"queries", "query"}),
    ),
)
