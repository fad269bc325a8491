"""How rerank: the ranked documents' best scores, and which became contexts."""

from __future__ import annotations

from typing import Any

from nodes.describing import NodeDescription, describes, plural
from nodes.trace_view import Block, Facts, Table


def _rerank_done(update: dict[str, Any]) -> str:
    kept = f"reranked: {plural(len(update.get('contexts') or []), 'context')} kept"
    added = (update.get("first_stage") or {}).get("dense_only", 0)
    return kept + (f" ({plural(added, 'document')} found by vector alone)" if added else "")


SHOWN = 10
"""How many of the ranked documents a trace lists (the JSON trace keeps them all)."""


def rerank_trace(update: dict[str, Any]) -> list[Block]:
    """Return the ranked documents' best scores, and which became contexts."""
    ranked = update.get("ranked") or []
    if not ranked:
        return [Facts("nothing to rank")]
    kept = {c["pmid"] for c in update.get("contexts") or []}
    rows = tuple(
        (str(i), pmid, f"{score:.3f}", "context" if pmid in kept else "")
        for i, (pmid, score) in enumerate(ranked[:SHOWN], 1)
    )
    title = f"best {len(rows)} of {plural(len(ranked), 'ranked document')}, {len(kept)} kept"
    return [Table(title, ("rank", "PMID", "score", "kept as"), rows, frozenset({0, 2}))]


describes(
    "rerank",
    NodeDescription(
        "reranking",
        done=_rerank_done,
        summary=lambda update: (
            [f"{len(update['contexts'])} contexts"] if "contexts" in update else []
        ),
        trace=rerank_trace,
        covers=frozenset({"ranked"}),
    ),
)
