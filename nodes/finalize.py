"""finalize: the BioASQ-shaped answer, with documents best first and snippets with offsets."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from infra.bioasq import exact_answer_shape
from infra.snippets import best_snippets
from nodes.context import Context
from nodes.state import QAState

MAX_DOCUMENTS = 10
ALL_FAILED = "no model could answer this question from the evidence found"
INSUFFICIENT = f"Insufficient evidence: {ALL_FAILED}."


async def finalize(state: QAState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Shape the answer by question type; documents are the cited PMIDs, then the ranking."""
    ctx = runtime.context
    qtype = state["qtype"]
    answer = state.get("answer") or {"exact": [], "ideal": "", "confidence": 0.0, "cited": []}
    contexts = state.get("organized") or state.get("contexts") or []
    known = {c["pmid"]: c for c in state.get("contexts", [])}
    cited = [p for p in answer.get("cited", []) if p in known]
    ranked = [p for p, _ in state.get("ranked", [])]
    documents = list(dict.fromkeys([*cited, *ranked]))[:MAX_DOCUMENTS]
    by_pmid = {c["pmid"]: c for c in contexts} | known
    chosen = ctx.settings.snippets
    snippet_docs = [by_pmid[p] for p in documents if p in by_pmid][: chosen.documents]
    snippets = await asyncio.to_thread(
        best_snippets,
        state["question"],
        snippet_docs,
        ctx.embedder,
        limit=chosen.limit,
        per_doc=chosen.per_document,
        scorer=ctx.snippet_scorer,
        min_score=chosen.min_score,
        merge=chosen.merge,
    )
    ideal = (answer.get("ideal") or "").strip() or "; ".join(answer.get("exact", []))
    reason = _why_unanswered(state, answer, ideal)
    if reason:
        # Say so in the answer itself rather than pass an empty answer off as a result.
        ideal = f"Insufficient evidence: {reason}."
    return {
        "result": {
            "insufficient": reason is not None,
            "insufficient_reason": reason,
            "question": state["question"],
            "type": qtype,
            "exact_answer": exact_answer_shape(qtype, answer.get("exact", [])),
            "ideal_answer": ideal,
            "confidence": answer.get("confidence", 0.0),
            "documents": documents,
            "snippets": snippets,
            "titles": {p: by_pmid[p].get("title", "") for p in documents if p in by_pmid},
        }
    }


def _why_unanswered(state: QAState, answer: dict[str, Any], ideal: str) -> str | None:
    """Return why a question that was to be answered has no answer, or None when it has one."""
    members = state.get("members") or []
    if state.get("answer") is None and not members:
        return None  # phase A retrieves only: nothing was to be answered
    if (
        members
        and all(m.get("error") for m in members)
        and answer.get("source") != "synthesis"
        and not answer.get("exact")
    ):
        # The server's own words, so whoever reads the answer knows what to fix.
        return f"{ALL_FAILED} (last error: {members[-1]['error'][:500]})"
    if ideal:
        return None
    errors = [a["error"] for a in state.get("attempts", []) if a.get("error")]
    return f"the model gave no answer ({errors[-1] if errors else 'an empty reply'})"
