"""Confidence earned from the evidence, not taken from the model's word.

The synthesizer's own confidence still drives the BioASQ ensemble paper's gate (below 0.5,
synthesize again at temperature 0: graphs/routers.py). What quorum reports, and what decides
a fallback search, is that word capped by what the evidence shows, from signals that do not
come from the answering model alone:

    evidence = answered × agreement × on_question × (0.4 + 0.6 × citations) × supported
    confidence = min(model, evidence)            (synthesis.mode "vote": evidence alone)
    confidence = min(confidence, 0.5)            unless a judge other than its author
                                                 verified it (UNJUDGED_CAP)

- answered: the share of ensemble members that gave an answer (0 when none did: then no
  answer is confident, whatever the synthesizer says);
- agreement: the decision's support behind the answer given — its share when the answer is
  the decision's first, the share of the answer among the decision's answers when synthesis
  chose another, 0 when it chose one nobody decided (for a summary: the members who answered);
- on_question: the share of the members giving the answer who cite a passage that addresses
  the question (infra/relevance.py): members that agree while citing only passages off the
  question, or nothing, give no confidence;
- citations: the share of the abstracts the answer cites that address the question and back
  it — for a factoid or list answer, abstracts whose text holds it; for yes/no, abstracts
  cited for that answer by the decision or by members giving it (none cited counts 0).
  Citations pointing only at abstracts that say nothing of the answer, or that are off the
  question, leave at most 0.4 of the evidence: below the gate. An answer re-cited to other
  passages (the support check's re-cite) is scored on the citations it gave;
- the judge: only a supported verdict from a verifier other than the answering model lets the
  confidence above 0.5; a self-verified, unverified (the demo) or refused-then-stood-in answer
  is capped there, as nothing but its author vouched for it.

No paper gives this formula; it is a judgement, each factor tested on planted cases
(tests/unit/test_earned_confidence.py): agreement, disagreement, nobody answered, citations
pointing at irrelevant passages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infra.bioasq import normalize_answer
from nodes.state import Decision, Member, Passage

CITATION_FLOOR = 0.4
"""The share of the evidence an answer keeps when none of its citations backs it."""
UNJUDGED_CAP = 0.5
"""The highest confidence of an answer no model other than its author judged: 0.5 is the
paper's gate (below it synthesis runs again), so such an answer is never reported as more
likely right than not; the gate is strict (< 0.5), so the cap alone sends no answer to a
fallback search."""


def _keys(answer: str | Sequence[str]) -> set[str]:
    items = [answer] if isinstance(answer, str) else list(answer)
    return {k for k in (normalize_answer(str(i)) for i in items) if k}


def answered_share(members: Sequence[Member]) -> float | None:
    """Return the share of members that answered; None when the question had no members."""
    if not members:
        return None
    done = [m for m in members if m.get("error") is None and m.get("answer")]
    return len(done) / len(members)


def agreement(qtype: str, decision: Decision | None, given: Sequence[str]) -> float:
    """Return the decision's support behind the answer given (its first exact answer).

    A list answer agrees with the decision's items in proportion to their overlap (Jaccard).
    """
    answers = (decision or {}).get("answers") or []
    if not answers:
        return 0.0
    total = sum(max(0.0, float(a["support"])) for a in answers)
    share = float((decision or {}).get("share", answers[0]["support"] / total if total else 0.0))
    if qtype == "summary":
        return share
    if not given:
        return 0.0
    if qtype == "list":
        first, wanted = _keys(answers[0]["answer"]), _keys(given)
        return share * len(first & wanted) / len(first | wanted) if first | wanted else 0.0
    wanted = _keys(given[0])
    for rank, row in enumerate(answers):
        if _keys(row["answer"]) & wanted:
            if rank == 0:
                return share
            return max(0.0, float(row["support"])) / total if total else 0.0
    return 0.0


def backing(
    qtype: str,
    given: Sequence[str],
    decision: Decision | None,
    members: Sequence[Member],
    passages: Sequence[Passage],
) -> set[str]:
    """Return the PMIDs that back the answer given.

    A factoid or list answer is backed by an abstract whose text holds it (whole words,
    normalised): a member citing an abstract is no evidence that it says so, as readers cite
    the wrong passage a quarter of the time (calibration.py: 74.5% citation precision). A
    yes/no answer cannot be looked up in a text, so it is backed by the abstracts cited for
    it: by the decision's answer, or by members giving it.
    """
    wanted = _keys(given if qtype == "list" else given[:1])
    found: set[str] = set()
    if qtype in ("factoid", "list"):
        for passage in passages:
            body = f"{passage.get('title') or ''} {passage.get('abstract') or ''}"
            text = f" {normalize_answer(body)} "
            if any(f" {key} " in text for key in wanted):
                found.add(passage["pmid"])
        return found
    for row in (decision or {}).get("answers") or []:
        if _keys(row["answer"]) & wanted:
            found.update(row.get("cited") or [])
    for member in members:
        if _keys(member.get("answer") or []) & wanted:
            found.update(member.get("pmids") or [])
    return found


def agreeing(qtype: str, given: Sequence[str], members: Sequence[Member]) -> list[Member]:
    """Return the members that gave this answer (a summary: every member that answered)."""
    done = [m for m in members if m.get("error") is None and m.get("answer")]
    if qtype == "summary":
        return done
    wanted = _keys(given if qtype == "list" else given[:1])
    return [m for m in done if _keys(m.get("answer") or []) & wanted]


def on_question(
    qtype: str, given: Sequence[str], members: Sequence[Member], relevant: set[str]
) -> float:
    """Return the share of the members giving the answer that cite a passage on the question.

    1.0 when no member gave it (agreement already says so, or no ensemble ran).
    """
    agree = agreeing(qtype, given, members)
    if not agree:
        return 1.0
    return sum(bool(set(m.get("pmids") or []) & relevant) for m in agree) / len(agree)


def judged_independently(support: Mapping[str, Any] | None) -> bool:
    """Tell whether a verifier other than the answering model found the answer supported."""
    verified = (support or {}).get("verified") or {}
    return verified.get("status") == "supported" and verified.get("judge") == "independent"


def judge_of(support: Mapping[str, Any] | None) -> str:
    """Return who judged the answer: "independent", "self" or "none" (not verified)."""
    verified = (support or {}).get("verified") or {}
    if verified.get("status") not in ("supported", "refused"):
        return "none"
    return "independent" if verified.get("judge") == "independent" else "self"


def earned_confidence(
    qtype: str,
    *,
    model: float | None,
    given: Sequence[str],
    cited: Sequence[str],
    decision: Decision | None,
    members: Sequence[Member],
    passages: Sequence[Passage],
    supported: float = 1.0,
    relevance: Mapping[str, Mapping[str, Any]] | None = None,
    support: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Return the confidence the evidence allows, with its parts (for the trace and --json).

    Args:
        qtype: The question type.
        model: The synthesizer's own confidence; None when no model gave one (mode "vote").
        given: The exact answers given, best first (a summary: []).
        cited: The PMIDs the answer cites.
        decision: The strategy's decision.
        members: The ensemble's member calls.
        passages: The passages the answer was made from.
        supported: The share of the answer's items its cited passages carry.
        relevance: Each passage's relevance verdict by PMID (None: every passage counts as on
            the question, for a caller that judged none).
        support: The answer's support record: who verified it, and whether it was re-cited.
    """
    relevant = (
        {p["pmid"] for p in passages}
        if relevance is None
        else {p for p, r in relevance.items() if r.get("relevant")}
    )
    recited = (support or {}).get("recited") or {}
    if recited:  # scored on the citations the answer gave, not on those it was re-cited to
        cited = list(recited.get("from") or [])
    answered = answered_share(members)
    if answered is None:  # no ensemble ran (organize's groups decided): the decision answered
        answered = 1.0 if (decision or {}).get("answers") else 0.0
    agreed = agreement(qtype, decision, given)
    if qtype == "summary":  # no answer to compare: who answered, and what they cited
        agreed = agreed if (decision or {}).get("answers") else answered
        backed = {p for m in members if not m.get("error") for p in m.get("pmids") or []}
    else:
        backed = backing(qtype, given, decision, members, passages)
    backed &= relevant
    citations = sum(p in backed for p in cited) / len(cited) if cited else 0.0
    aligned = on_question(qtype, given, members, relevant)
    evidence = answered * agreed * aligned
    evidence *= CITATION_FLOOR + (1.0 - CITATION_FLOOR) * citations
    evidence *= supported
    value = evidence if model is None else min(model, evidence)
    judge = judge_of(support)
    capped = not judged_independently(support) and value > UNJUDGED_CAP
    if capped:
        value = UNJUDGED_CAP
    return {
        "confidence": round(value, 3),
        "parts": {
            "model": None if model is None else round(model, 3),
            "answered": round(answered, 3),
            "agreement": round(agreed, 3),
            "on_question": round(aligned, 3),
            "citations": round(citations, 3),
            "supported": round(supported, 3),
            "evidence": round(evidence, 3),
            "judge": judge,
            "capped": capped,
            "recited": bool(recited),
        },
    }
