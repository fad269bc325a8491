"""Routers: pure functions over the state that choose the next node."""

from __future__ import annotations

from typing import Literal

from nodes.state import QAState, evidence_round


def needs_refinement(state: QAState) -> Literal["refine_query", "rerank"]:
    """Relax the query while it finds fewer than min_hits, at most max_refinements times."""
    limits = state["limits"]
    if (
        state.get("hits", 0) < limits["min_hits"]
        and state.get("refinements", 0) < limits["max_refinements"]
    ):
        return "refine_query"
    return "rerank"


def needs_resynthesis(state: QAState) -> bool:
    """Tell whether to synthesize again at temperature 0: low confidence and attempts left.

    The gate reads the synthesizer's own confidence, as the BioASQ ensemble paper's does (an
    attempt that failed or broke the answer contract counts 0); what the evidence earns is
    reported, and decides a fallback search.
    """
    limits = state["limits"]
    this_round = [a for a in state.get("attempts", []) if a["round"] == evidence_round(state)]
    answer = state.get("answer") or {}
    if answer.get("source") in ("decision", "vote", "insufficient"):
        return False  # the rule step answered: no model to ask again, it would answer the same
    own = answer.get("model_confidence", answer.get("confidence", 0.0))
    confidence = 0.0 if own is None else own
    return confidence < limits["min_confidence"] and len(this_round) < limits["max_attempts"]


def fallback_wanted(state: QAState) -> bool:
    """Tell whether to look for more evidence elsewhere: too few contexts, or low confidence.

    Not whether an answer is given: that is the one door's word (nodes/answered.py), at
    finalize; this only asks for another search while rounds are left.
    """
    limits = state["limits"]
    contexts = state.get("organized") or state.get("contexts") or []
    confidence = (state.get("answer") or {}).get("confidence", 0.0)
    return len(contexts) < limits["min_contexts"] or confidence < limits["min_confidence"]


def needs_fallback(state: QAState) -> bool:
    """Tell whether to search elsewhere: a fallback is wanted and rounds are left."""
    return (
        fallback_wanted(state)
        and len(state.get("fallbacks", [])) < state["limits"]["max_fallbacks"]
    )


def after_synthesis(state: QAState) -> Literal["synthesize", "fallback_search", "finalize"]:
    """Route after synthesis: re-synthesize, search elsewhere, or finish."""
    if needs_resynthesis(state):
        return "synthesize"
    if needs_fallback(state):
        return "fallback_search"
    return "finalize"


def after_fallback(state: QAState) -> Literal["rerank", "finalize"]:
    """Re-rank when the fallback brought new documents; otherwise finish with what we have."""
    last = (state.get("fallbacks") or [{}])[-1]
    return "rerank" if last.get("added", 0) > 0 else "finalize"
