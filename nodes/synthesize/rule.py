"""The rule step: the decision as an answer with no model call, and the honest last resort.

In synthesis.mode "vote" the strategy's decision is the answer (the papers' own setting); in
mode "llm" it stands in when every synthesis attempt of a round failed or broke the answer
contract. Either way the ideal answer is prose made from the evidence — the answer, then the
sentence of the best supporting abstract that backs it — never a bare "yes". When the decision
gives nothing that keeps the contract, the answer says the evidence is insufficient and why.
"""

from __future__ import annotations

from collections.abc import Sequence

from infra.bioasq import exact_answer_shape, format_exact
from infra.embeddings import Embedder
from infra.snippets import supporting_sentences
from nodes.answered import insufficient, why_unanswered
from nodes.state import Answer, Decision, Passage


def decided(qtype: str, decision: Decision | None) -> list[str]:
    """Return the decision as exact answers before formatting: what the rule step answers."""
    answers = (decision or {}).get("answers") or []
    if not answers:
        return []
    if qtype == "factoid":  # BioASQ takes up to five candidates, best first
        return [str(a["answer"]) for a in answers[:5]]
    top = answers[0]["answer"]
    return [str(i) for i in top] if isinstance(top, list) else [str(top)]


def backing_pmids(decision: Decision | None, shown: Sequence[str]) -> list[str]:
    """Return the PMIDs behind the decision's answer (every side's, when it is plural)."""
    answers = (decision or {}).get("answers") or []
    plural = bool((decision or {}).get("plural"))
    backing = [p for a in (answers if plural else answers[:1]) for p in a["cited"]]
    allowed = set(shown)
    return list(dict.fromkeys(p for p in backing if p in allowed))


def stated(
    qtype: str,
    question: str,
    exact: Sequence[str],
    decision: Decision | None,
    contexts: Sequence[Passage],
    embedder: Embedder,
) -> tuple[str, str | None]:
    """Return prose stating the decided answer and the sentence of the abstract behind it.

    The PMID of that sentence comes beside it (None when no abstract states the answer).
    """
    if (decision or {}).get("plural") and qtype != "summary":
        sides = [a["answer"] for a in (decision or {}).get("answers") or []]
        named = ", ".join(repr(s if isinstance(s, str) else "; ".join(s)) for s in sides[:5])
        # The question restated: the prose of an answer must address its question (issue 55).
        return f'The abstracts conflict on "{question.strip()}": they answer {named}.', None
    if qtype == "summary":  # the members' own summary: it is prose already
        return " ".join(exact), None
    if not exact:
        return "", None
    shown = [c["pmid"] for c in contexts]
    cited = backing_pmids(decision, shown) or shown[:1]
    answer = "; ".join(exact)
    # A factoid or list answer is stated with a sentence that holds it, or with none: an
    # unrelated sentence beside it would read as support it is not.
    holding = qtype in ("factoid", "list")
    docs = [c for c in contexts if c["pmid"] in cited[:3]] if not holding else list(contexts)
    found = supporting_sentences(question, answer, docs, embedder, holding=holding) if docs else {}
    order = [*cited, *(c["pmid"] for c in contexts)]
    quoted = next((p for p in order if p in found), None)
    lead = exact[0].capitalize() if qtype == "yesno" else answer
    if quoted is not None:
        return f"{lead}. {found[quoted].text}", quoted
    return (
        f"The ensemble's readers answered {lead}; no abstract shown states it in so many words.",
        None,
    )


def rule_answer(
    qtype: str,
    question: str,
    decision: Decision | None,
    contexts: Sequence[Passage],
    embedder: Embedder,
    *,
    why_failed: str | None = None,
    stating: Sequence[Passage] | None = None,
) -> Answer:
    """Return the decision as the answer, or the insufficient-evidence answer when it has none.

    Args:
        qtype: The question type.
        question: The question (its words choose the supporting sentence).
        decision: The strategy's decision.
        contexts: The passages synthesis reads, in the decision's order.
        embedder: Scores the sentences of the supporting abstracts.
        why_failed: What went wrong before the rule step stood in (synthesis's failure).
        stating: The passages its prose may quote a sentence of (default: `contexts`); it
            cites what the decision cites among `contexts` all the same, so a decision resting
            on passages off the question is judged on them.
    """
    extracted = decided(qtype, decision)
    exact = [] if qtype == "summary" else format_exact(qtype, extracted)
    quotable = list(contexts) if stating is None else list(stating)
    ideal, quoted = stated(qtype, question, exact or extracted, decision, quotable, embedder)
    problem = why_unanswered(qtype, question, exact_answer_shape(qtype, exact), ideal)
    if problem is not None:
        reason = "the ensemble reached no answer" if not extracted else problem
        if why_failed:
            reason = f"{reason}; synthesis failed: {why_failed}"
        return insufficient(reason, (decision or {}).get("why", "no decision"))
    return {
        "extracted": extracted,
        "exact": exact,
        "ideal": ideal,
        "confidence": 0.0,  # earned from the evidence by the caller
        # The decision's citations; when it has none, the abstract its prose quotes.
        "cited": backing_pmids(decision, [c["pmid"] for c in contexts])
        or ([quoted] if quoted else []),
        "rationale": (decision or {}).get("why", "no decision"),
        "source": "decision" if why_failed is None else "vote",
    }
