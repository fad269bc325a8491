"""The support check, run on every answer before it is given: synthesis's and the stand-in's.

An answer that keeps the contract is given only when passages that address the question carry
it: infra/relevance.py judges each passage's relevance without the answering model;
infra/support.py decides without a model whether the relevant passages the answer cites carry
it (entities found, prose grounded and on the question, debris refused); a list or factoid
answer keeps the items the evidence carries and loses the rest; then the verifier, when one is
configured, reads the answer beside those passages. `judge_answer` is the one door: synthesize
and the rule step's stand-in go through it, and so does `quorum eval support`, so what is
measured is what runs. What the check found is the answer's `support` record, shown in the
trace, the page and the export.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.bioasq import exact_answer_shape
from infra.bioasq.contract import contradiction
from infra.embeddings import Embedder
from infra.injection import flagged
from infra.models import ChatModel
from infra.relevance import judge_relevance
from infra.support import check_support
from nodes.answered import RULE_STEP, why_unanswered
from nodes.context import Context
from nodes.state import Answer, Call, Check, Passage, PassageRelevance, SupportRecord
from nodes.synthesize.verify import answer_authors, counted, verifier_enabled, verify_answer

VERIFIER_OFF = "verify.enabled is off for this model (the local demo model cannot judge entailment)"


@dataclass(frozen=True)
class Judging:
    """What an answer is judged by, beside its passages: the same in the graph and the eval."""

    question: str
    relevance: Mapping[str, PassageRelevance]
    """Each passage's relevance verdict by PMID; a passage with none is never evidence."""
    embedder: Embedder | None = None
    """Judges whether prose addresses the question (None: its key terms alone)."""
    verifier: ChatModel | None = None
    """The verify role's model; None: the answer is "not verified" (`unverified`)."""
    unverified: str = VERIFIER_OFF
    """Why there is no verifier, as the support record says it."""
    recite: bool = False
    """Re-cite an answer its cited passages do not carry to shown passages on the question
    that do (verify.recite), instead of refusing it."""
    authors: tuple[ChatModel, ...] = ()
    """The models that wrote the answer: a verifier among them judges itself ("self")."""


def judging_for(
    ctx: Context, question: str, answer: Answer, relevance: Mapping[str, PassageRelevance]
) -> Judging:
    """Return how this run judges an answer: its embedder, verifier, authors, re-cite policy."""
    enabled = verifier_enabled(ctx.settings)
    return Judging(
        question,
        relevance,
        embedder=ctx.embedder,
        verifier=ctx.models.first("verify") if enabled else None,
        recite=ctx.settings.verify.recite,
        authors=tuple(answer_authors(ctx.models, answer)),
    )


def relevance_for(
    ctx: Context,
    question: str,
    passages: Sequence[Passage],
    known: Mapping[str, PassageRelevance] | None,
) -> dict[str, PassageRelevance]:
    """Return the relevance verdicts of the passages not judged yet (phase B's, the pool's)."""
    known = known or {}
    missing = [p for p in passages if p["pmid"] not in known]
    found = judge_relevance(question, missing, ctx.embedder, scorer=ctx.reranker)
    return {pmid: record_of(r.record()) for pmid, r in found.items()}


def record_of(record: Mapping[str, Any]) -> PassageRelevance:
    """Return a relevance record as the state holds it."""
    return {
        "relevant": bool(record["relevant"]),
        "terms": float(record["terms"]),
        "cosine": record.get("cosine"),
        "cross_encoder": record.get("cross_encoder"),
        "missing": list(record.get("missing") or []),
        "subject": bool(record.get("subject", True)),
    }


def cited_passages(answer: Answer, contexts: Sequence[Passage]) -> list[Passage]:
    """Return the passages the answer cites, in its citation order."""
    by_pmid = {c["pmid"]: c for c in contexts}
    return [by_pmid[p] for p in answer.get("cited") or [] if p in by_pmid]


def _contract(judging: Judging, qtype: str, answer: Answer) -> Check | None:
    """Return the failed contract check of an answer (a contradiction named so), or None.

    The rule step's answer met the contract where it was made (rule_answer): it is not held
    to it twice. Every other answer meets it here, its one gate.
    """
    if answer.get("source") in RULE_STEP:
        return None
    exact = exact_answer_shape(qtype, list(answer.get("exact") or []))
    ideal = answer.get("ideal") or ""
    problem = why_unanswered(qtype, judging.question, exact, ideal)
    if problem is None:
        return None
    said = contradiction(qtype, exact, ideal, judging.question)
    named = "contradiction" if said == problem else "contract"
    return {"check": named, "passed": False, "detail": problem}


def check_answer(
    judging: Judging, qtype: str, answer: Answer, contexts: Sequence[Passage]
) -> tuple[Answer, str | None]:
    """Return the answer as its evidence carries it, and why it is refused (None: supported).

    A factoid or list answer keeps only the items its cited passages on the question carry;
    the ideal answer's prose is held to what those passages say and must address the question.
    A cited passage off the question, or one that addresses the model (infra/injection.py), is
    dropped from the citations: it is never evidence. The record of the check rides on the
    answer.
    """
    exact = list(answer.get("exact") or [])
    ideal = answer.get("ideal") or ""
    if (broken := _contract(judging, qtype, answer)) is not None:
        record = _refused_record(broken)
        return {**answer, "support": record}, f"the answer broke the contract: {broken['detail']}"
    cited = cited_passages(answer, contexts)
    # An answer that cites nothing is held to the passages it was made from: a factoid or
    # list answer then cites the passages found to carry it (where its words stand, never a
    # guess); prose cites nothing and earns the citations' floor (confidence.py).
    found = _check(judging, qtype, exact, ideal, cited or list(contexts))
    recited: list[str] = []
    if found.verdict == "refused" and cited and _recitable(judging, qtype, found):
        # The cited passages do not carry it: the shown passages on the question may.
        elsewhere = [c for c in contexts if c["pmid"] not in {p["pmid"] for p in cited}]
        again = _check(judging, qtype, exact, ideal, elsewhere)
        if again.verdict == "supported":
            recited = list(dict.fromkeys(c.pmid for c in again.carriers.values()))
            again.checks.insert(
                0,
                {
                    "check": "re-cited",
                    "passed": True,
                    "detail": f"the cited PMID {', '.join(p['pmid'] for p in cited)} do not "
                    f"carry it ({found.reason}); PMID {', '.join(recited)}, shown and on the "
                    "question, do",
                },
            )
            found = again
    record = found.record()
    if recited:
        record["recited"] = {"from": [p["pmid"] for p in cited], "to": recited}
    checked: Answer = {**answer, "support": record}
    if found.verdict == "refused":
        record["relevance"] = _judged(judging, [p["pmid"] for p in cited])
        return checked, f"the answer is not supported by its evidence: {found.reason}"
    relevant = {p for p, r in judging.relevance.items() if r.get("relevant")}
    if recited:
        checked["cited"] = recited
    elif cited:
        planted = flagged([dict(p) for p in cited])
        checked["cited"] = [p["pmid"] for p in cited if p["pmid"] in relevant - planted.keys()]
    if qtype in ("factoid", "list"):
        checked["exact"] = [e for e in exact if e in found.kept]
        if not cited:
            checked["cited"] = list(dict.fromkeys(c.pmid for c in found.carriers.values()))
    record["relevance"] = _judged(judging, [*(p["pmid"] for p in cited), *checked.get("cited", [])])
    return checked, None


def _check(
    judging: Judging, qtype: str, exact: list[str], ideal: str, passages: Sequence[Passage]
) -> Any:
    return check_support(
        qtype,
        exact,
        ideal,
        [dict(p) for p in passages],
        question=judging.question,
        relevance=judging.relevance,
        embedder=judging.embedder,
    )


def _recitable(judging: Judging, qtype: str, found: Any) -> bool:
    """Tell whether a refusal may be re-cited: an entity its cited passages do not carry."""
    failed = found.checks[-1]["check"] if found.checks else ""
    return judging.recite and qtype in ("factoid", "list") and failed in ("relevance", "carried")


def _judged(judging: Judging, pmids: Sequence[str]) -> dict[str, PassageRelevance]:
    return {p: judging.relevance[p] for p in dict.fromkeys(pmids) if p in judging.relevance}


def _refused_record(check: Check) -> SupportRecord:
    return {
        "verdict": "refused",
        "reason": f"{check['check']}: {check['detail']}",
        "kept": [],
        "dropped": [],
        "carriers": [],
        "checks": [check],
    }


async def judge_answer(
    judging: Judging, qtype: str, answer: Answer, contexts: Sequence[Passage]
) -> tuple[Answer, str | None, list[Call]]:
    """Return the answer as its evidence carries it, why it is refused, and the verifier's call.

    The model-free check first (it needs no call and refuses most of what is wrong); then, when
    there is a verifier, it reads the answer beside the passages on the question it cites, once.
    A verifier that could not be asked leaves the model-free verdict standing, marked so.
    """
    checked, refused = check_answer(judging, qtype, answer, contexts)
    if refused is not None:
        return checked, refused, []
    if judging.verifier is None:
        checked["support"]["verified"] = {
            "status": "not verified",
            "passages": [],
            "why": judging.unverified,
        }
        return checked, None, []
    # An answer that cites nothing is read beside the passages on the question it was made
    # from, as the model-free check read it; it then cites those the verifier quotes.
    cited = cited_passages(checked, contexts)
    relevant = {p for p, r in judging.relevance.items() if r.get("relevant")}
    shown = cited or [c for c in contexts if c["pmid"] in relevant]
    verification, call = await verify_answer(
        judging.verifier,
        judging.question,
        qtype,
        list(checked.get("exact") or []),
        checked.get("ideal") or "",
        shown,
        relevant=relevant,
        authors=judging.authors,
    )
    checked["support"]["verified"] = verification
    calls = [call] if call is not None else []
    if verification["status"] == "refused":
        checked["support"]["verdict"] = "refused"
        checked["support"]["reason"] = f"verifier: {verification['why']}"
        return checked, f"the verifier refused the answer: {verification['why']}", calls
    if not cited and verification["status"] == "supported":
        quoted = [v["pmid"] for v in verification["passages"] if counted(v) == "supports"]
        checked["cited"] = list(dict.fromkeys(quoted))
    return checked, None, calls


async def held_to_evidence(
    ctx: Context,
    question: str,
    qtype: str,
    answer: Answer,
    contexts: Sequence[Passage],
    relevance: Mapping[str, PassageRelevance],
) -> tuple[Answer, str | None, list[Call]]:
    """Return the answer as this run judges it (`judge_answer`), why refused, and the calls."""
    judging = judging_for(ctx, question, answer, relevance)
    return await judge_answer(judging, qtype, answer, contexts)


def support_share(qtype: str, answer: Answer) -> float:
    """Return the share of a list answer's items the evidence carries; 1.0 for other types.

    A factoid answer is its first candidate: the candidates the check dropped were never given,
    and agreement already scores the first one; yes/no and summary have no items to count.
    """
    record = answer.get("support") or {}
    if record.get("verdict") == "refused":
        return 0.0
    kept, dropped = len(record.get("kept") or []), len(record.get("dropped") or [])
    if qtype != "list" or not kept + dropped:
        return 1.0
    return kept / (kept + dropped)
