"""How given_evidence: the organizers' documents and snippets read as contexts."""

from __future__ import annotations

from typing import Any

from infra.text import clip
from nodes.describing import NodeDescription, describes, plural
from nodes.trace_view import Block, Facts, Table

SHOWN = 80
"""How many characters of a context's joined snippets a trace shows (the JSON trace keeps all)."""


def given_evidence_trace(update: dict[str, Any]) -> list[Block]:
    """Return the contexts made of the given snippets, in the order they rank, with their text."""
    contexts = update.get("contexts") or []
    if not contexts:
        return [Facts("no usable snippets were given: nothing to answer from")]
    rows = tuple(
        (str(i), c["pmid"], f"{len(c['abstract']):,}", clip(c["abstract"], SHOWN))
        for i, c in enumerate(contexts, 1)
    )
    title = f"{plural(len(contexts), 'context')} from the given snippets, in the order given"
    return [Table(title, ("rank", "PMID", "characters", "snippets"), rows, frozenset({0, 2}))]


describes(
    "given_evidence",
    NodeDescription(
        "reading the given snippets",
        done=lambda update: (
            f"read the given snippets: {plural(len(update.get('contexts') or []), 'document')}"
        ),
        trace=given_evidence_trace,
        covers=frozenset({"contexts", "ranked"}),
    ),
)
