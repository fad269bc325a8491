"""given_evidence: BioASQ phase B — answer from the snippets the organizers provide, no search.

The given snippets become the contexts: one per document, its snippets joined in the order
given, documents ranked as listed (the organizers list gold documents, unordered, so list order
is the only order there is). No fallback search: phase B answers from what it was given.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from infra.bioasq import detect_type
from infra.bioasq.formats import pmid_of
from nodes.context import Context
from nodes.generate_query import limits
from nodes.state import Passage, QAState, Snippet


def contexts_from_snippets(documents: list[str], snippets: list[Snippet]) -> list[Passage]:
    """Return one context per document: its given snippets as the passage, in list order."""
    texts: dict[str, list[str]] = {}
    for snippet in snippets:
        try:
            pmid = pmid_of(snippet.get("document", ""))
        except ValueError:
            continue
        text = (snippet.get("text") or "").strip()
        if text and text not in texts.setdefault(pmid, []):
            texts[pmid].append(text)
    order = [pmid_of(d) for d in documents if pmid_of(d) in texts]
    order += [p for p in texts if p not in order]
    n = len(order)
    return [
        {"pmid": p, "title": "", "abstract": " ".join(texts[p]), "score": (n - i) / n}
        for i, p in enumerate(order)
    ]


async def given_evidence(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Turn the question's given documents and snippets into ranked contexts."""
    given = state.get("given") or {}
    contexts = contexts_from_snippets(given.get("documents", []), given.get("snippets", []))
    bounds = limits(runtime.context) | {"max_fallbacks": 0}
    qtype = state.get("qtype")
    return {
        "qtype": qtype or detect_type(state["question"]),
        "qtype_source": "given" if qtype else "detected",
        "limits": bounds,
        "contexts": contexts,
        "ranked": [(c["pmid"], c["score"]) for c in contexts],
        "notes": [f"given_evidence: {len(contexts)} document(s) from the given snippets"],
    }
